"""Keep secrets out of committed fixtures and out of what recording commands print.

A server is configured with credentials (`env: {"API_KEY": ...}`, `headers: {"Authorization":
...}`, `"args": ["--api-key", "${SECRET}"]`, `"url": "https://…/mcp?api_key=${KEY}"`) and can
echo them back anywhere: its instructions, a tool description, an error message, a result.
Fixtures are committed (and out/ is generated from them), so every secret of a server is
replaced by `<redacted:NAME>` wherever it appears, as a substring of any string or object key
at any depth, and configured regexes (`redact = [...]` in codemode.toml) by
`<redacted:pattern>`. The secrets of a server (`Redactor.for_server`) are:

- every `env` and `headers` value (NAME: the variable or header name);
- every value `.mcp.json` took from an environment variable, in any field (NAME: the variable;
  `ServerConfig.secrets`): `${CODEMODE_PYTHON}` and `:-default` values written in the file are
  not secrets;
- the password of `url` and the values of its query parameters named like a credential
  (`api_key`, `token`, `secret`, …; NAME: the parameter), even when written in the file;
- an OAuth client's secret or private key (`oauth` in .mcp.json), and every token and client
  secret this process has seen for the server (client/oauth_records.py's `live_secrets`: NAME
  `oauth-access-token`, …). Tokens change when they are refreshed, so a server's redactor
  picks up new ones by itself (`_refresh`), however long it is cached.

Each is also matched as the server may write it back: percent-encoded (an echoed URL), JSON-
escaped (JSON text inside a string) and, for `<scheme> <credential>` headers, the credential
alone. Values shorter than MIN_SECRET_CHARS are not redacted (see there).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, quote_plus, unquote, urlsplit

if TYPE_CHECKING:
    from codemode_gen.config import ServerConfig

__all__ = ["MIN_SECRET_CHARS", "REDACTED_PATTERN", "Redactor", "marker", "url_secrets"]

# Values shorter than this are not treated as secrets: they are replaced as substrings
# everywhere, and redacting every "1", "true" or "8000" (DEBUG=1, ${PORT}) would corrupt
# recorded results without protecting anything; no real credential is this short.
MIN_SECRET_CHARS = 6
# What a configured `redact` pattern's match becomes.
REDACTED_PATTERN = "<redacted:pattern>"
# Header values are often "<scheme> <credential>"; the credential alone is redacted too, so
# a server that echoes just the token is caught.
_AUTH_SCHEME = re.compile(r"^(?:Bearer|Basic|Token|Bot|Digest|ApiKey)\s+(\S.*)$", re.IGNORECASE)
# Query parameters of a server's url whose value is a credential by its name (`?api_key=…`,
# `&access_token=…`, `&sig=…`): secrets even when written in .mcp.json as they are.
_CREDENTIAL_PARAM = re.compile(
    r"key|token|secret|passw|pwd|auth|sig|credential|session", re.IGNORECASE
)


def marker(name: str) -> str:
    """The text that replaces a secret called `name`."""
    return f"<redacted:{name}>"


def url_secrets(url: str | None) -> list[tuple[str, str]]:
    """(name, value) of the credentials in a server URL: its password and the values of query
    parameters named like a credential, decoded and as written."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        password = parts.password
    except ValueError:  # an unparsable port or bracket: nothing to take apart
        return []
    found: list[tuple[str, str]] = []
    if password:
        found += [("url-password", password), ("url-password", unquote(password))]
    for name, value in parse_qsl(parts.query, keep_blank_values=False):
        if _CREDENTIAL_PARAM.search(name):
            found.append((name, value))
    for pair in parts.query.split("&"):
        name, _, raw = pair.partition("=")
        if raw and _CREDENTIAL_PARAM.search(unquote(name)):
            found.append((unquote(name), raw))
    return found


def _variants(value: str) -> list[str]:
    """`value` as a server may write it back."""
    out = [value]
    scheme = _AUTH_SCHEME.match(value)
    if scheme:
        out.append(scheme.group(1))
    for text in list(out):
        out += [
            quote(text, safe=""),
            quote_plus(text, safe=""),
            json.dumps(text, ensure_ascii=False)[1:-1],
        ]
    return out


class Redactor:
    """Replaces secret values and patterns in any JSON value (strings, keys, nested)."""

    def __init__(
        self,
        secrets: Mapping[str, str] | Iterable[tuple[str, str]] | None = None,
        patterns: Iterable[str] = (),
    ) -> None:
        pairs = secrets.items() if isinstance(secrets, Mapping) else (secrets or ())
        replacement: dict[str, str] = {}
        for name, value in pairs:
            for candidate in _variants(value):
                if len(candidate) >= MIN_SECRET_CHARS and candidate not in replacement:
                    replacement[candidate] = marker(name)  # the first name given wins
        self._replacement = replacement
        # (config, static secrets, patterns, generation) of a server using OAuth: `_refresh`.
        self._live: tuple[ServerConfig, list[tuple[str, str]], tuple[str, ...], int] | None = None
        # One regex for everything, so each string is scanned once however many secrets and
        # patterns there are. Secrets come first, longest first: a secret that contains another
        # is replaced whole, and a secret wins over a pattern matching at the same place.
        # Patterns with groups (a backreference would be renumbered) or global flags (only
        # valid at the start) cannot be joined and run after it, one by one.
        literal = sorted(replacement, key=lambda v: (-len(v), v))
        alternatives = [re.escape(v) for v in literal]
        self._separate: list[re.Pattern[str]] = []
        joined: list[str] = []
        for pattern in patterns:
            compiled = re.compile(pattern)
            if compiled.groups:
                self._separate.append(compiled)
            else:
                joined.append(f"(?:{pattern})")
        try:
            self._re = (
                re.compile("|".join(alternatives + joined)) if alternatives or joined else None
            )
        except re.error:  # a joined pattern that only compiles on its own
            self._separate = [re.compile(p) for p in patterns]
            self._re = re.compile("|".join(alternatives)) if alternatives else None

    @classmethod
    def for_server(cls, config: ServerConfig, patterns: Iterable[str] = ()) -> Redactor:
        """The redactor of everything recorded from or reported about one server."""
        from codemode_gen.client.oauth_records import live_secrets, secrets_generation

        static = [*config.secrets(), *url_secrets(config.url)]
        if config.transport == "stdio":
            return cls(static, patterns)
        redactor = cls([*static, *live_secrets(config)], patterns)
        redactor._live = (config, static, tuple(patterns), secrets_generation())
        return redactor

    def _refresh(self) -> None:
        """Rebuild when the server's OAuth tokens changed since (a refresh, a new login)."""
        from codemode_gen.client.oauth_records import live_secrets, secrets_generation

        assert self._live is not None
        config, static, patterns, generation = self._live
        if generation == secrets_generation():
            return
        fresh = Redactor([*static, *live_secrets(config)], patterns)
        self._replacement, self._re, self._separate = fresh._replacement, fresh._re, fresh._separate
        self._live = (config, static, patterns, secrets_generation())

    def __bool__(self) -> bool:
        if self._live is not None:
            self._refresh()
        return self._re is not None or bool(self._separate)

    def _sub(self, match: re.Match[str]) -> str:
        return self._replacement.get(match.group(0), REDACTED_PATTERN)

    def text(self, value: str) -> str:
        if self._live is not None:
            self._refresh()
        if self._re is not None:
            value = self._re.sub(self._sub, value)
        for pattern in self._separate:
            value = pattern.sub(REDACTED_PATTERN, value)
        return value

    def value(self, value: Any) -> Any:
        """A redacted copy of a JSON value; the input is not modified.

        One pass over the tree, iterative (no recursion limit however deep a server nests its
        result): each string and object key is scanned once by one regex."""
        text = self.text
        if isinstance(value, str):
            return text(value)
        if not isinstance(value, dict | list):
            return value
        root: Any = {} if isinstance(value, dict) else []
        stack: list[tuple[Any, Any]] = [(value, root)]
        while stack:
            source, target = stack.pop()
            items = source.items() if isinstance(source, dict) else enumerate(source)
            for key, item in items:
                if isinstance(item, str):
                    copied: Any = text(item)
                elif isinstance(item, dict):
                    copied = {}
                    stack.append((item, copied))
                elif isinstance(item, list):
                    copied = []
                    stack.append((item, copied))
                else:
                    copied = item
                if isinstance(target, dict):
                    target[text(key) if isinstance(key, str) else key] = copied
                else:
                    target.append(copied)
        return root
