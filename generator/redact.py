"""Keep secrets out of committed fixtures.

A server started with `env: {"API_KEY": ...}` or reached with `headers: {"Authorization":
...}` can echo those values back (in an error message, a debug field, a URL). Fixtures are
committed, so every configured env/header value is replaced by `<redacted:NAME>` wherever it
appears in anything `record` writes, and configured regexes (`redact = [...]` in
codemode.toml) are replaced by `<redacted:pattern>`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["MIN_SECRET_CHARS", "Redactor"]

# Values shorter than this are not treated as secrets: redacting every "1" or "true" (from
# env such as DEBUG=1) would corrupt recorded results without protecting anything.
MIN_SECRET_CHARS = 6
# Header values are often "<scheme> <credential>"; the credential alone is redacted too, so
# a server that echoes just the token is caught.
_AUTH_SCHEME = re.compile(r"^(?:Bearer|Basic|Token|Bot|Digest|ApiKey)\s+(\S.*)$", re.IGNORECASE)


class Redactor:
    """Replaces secret values and patterns in any JSON value (strings, keys, nested)."""

    def __init__(self, secrets: Mapping[str, str] | None = None, patterns: Iterable[str] = ()) -> None:
        pairs: dict[str, str] = {}
        for name, value in (secrets or {}).items():
            candidates = [value]
            scheme = _AUTH_SCHEME.match(value)
            if scheme:
                candidates.append(scheme.group(1))
            for candidate in candidates:
                if len(candidate) >= MIN_SECRET_CHARS and candidate not in pairs:
                    pairs[candidate] = f"<redacted:{name}>"
        # Longest first, so a secret that contains another secret is replaced whole.
        self._secrets = sorted(pairs.items(), key=lambda kv: (-len(kv[0]), kv[0]))
        self._secret_re = (
            re.compile("|".join(re.escape(value) for value, _ in self._secrets)) if self._secrets else None
        )
        self._replacement = dict(self._secrets)
        self._patterns = [re.compile(p) for p in patterns]

    def __bool__(self) -> bool:
        return bool(self._secrets or self._patterns)

    def text(self, value: str) -> str:
        if self._secret_re is not None:
            value = self._secret_re.sub(lambda m: self._replacement[m.group(0)], value)
        for pattern in self._patterns:
            value = pattern.sub("<redacted:pattern>", value)
        return value

    def value(self, value: Any) -> Any:
        """A redacted copy of a JSON value; the input is not modified."""
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        return value
