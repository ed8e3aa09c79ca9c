"""The sealed state of a run that waits for a person's answer (runtime/host/resume.py): its
wire form, versioned and bounded, and the digests that bind it to the request and each call.

The state travels through the client (MCP 2026-07-28 `requestState`), so it is read as untrusted
after unsealing: every field is type-checked (`StateError`), and its decompressed size is bounded.
"""

from __future__ import annotations

import base64
import hashlib
import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: The version of RunState's wire form: a state of another version is refused, not guessed at.
STATE_VERSION = 1
# Bounds the state once unsealed and decompressed (it was sealed by us, so this only bounds the
# memory a bug could make one retry take).
MAX_STATE_JSON_BYTES = 32 * 1024 * 1024


class StateError(ValueError):
    """A state that cannot be used (malformed, another version)."""


@dataclass(frozen=True)
class LoggedCall:
    """A call the script made and the reply it got (the JSON text the sandbox got), with its
    trace entry: replayed, never sent again."""

    seq: int
    ident: str
    reply: str
    entry: dict[str, Any]


@dataclass(frozen=True)
class PendingAsk:
    """A call that waits for the user's answer (asked as resume.py's `ASK_KEY_PREFIX` + seq), with the names
    its trace entry shows."""

    seq: int
    ident: str
    server: str
    tool: str


@dataclass
class RunState:
    """Everything a retry needs to resume a run, sealed into requestState.

    `tool` and `args` bind it to the codemode.run call that made it (the retry must be the same
    call); `deadline` is when the run's timeoutMs ends (Unix seconds); `nonce` tells one state
    from another (a state is used once per instance); `journal` is the worker's (events,
    clock, seed, clockBase); `issued` the calls the script had made; `for_run` the (config id,
    tool name) approved for the rest of the run (approval.FOR_RUN): a resumed run, on any
    instance, does not ask about them again."""

    tool: str
    args: str
    deadline: float
    nonce: str
    round: int
    issued: int
    calls: list[LoggedCall]
    pending: list[PendingAsk]
    journal: dict[str, Any]
    for_run: list[tuple[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {
            "v": STATE_VERSION,
            "tool": self.tool,
            "args": self.args,
            "deadline": self.deadline,
            "nonce": self.nonce,
            "round": self.round,
            "issued": self.issued,
            "calls": [[c.seq, c.ident, c.reply, c.entry] for c in self.calls],
            "pending": [[p.seq, p.ident, p.server, p.tool] for p in self.pending],
            "journal": self.journal,
            "forRun": [list(key) for key in self.for_run],
        }

    @classmethod
    def from_json(cls, value: Any) -> RunState:
        try:
            if not isinstance(value, dict) or value.get("v") != STATE_VERSION:
                raise StateError("another version")
            calls = [
                LoggedCall(_int(c[0]), _str(c[1]), _str(c[2]), _dict(c[3]))
                for c in _list(value["calls"])
            ]
            pending = [
                PendingAsk(_int(p[0]), _str(p[1]), _str(p[2]), _str(p[3]))
                for p in _list(value["pending"])
            ]
            journal = _dict(value["journal"])
            events, clock = _list(journal.get("events")), _list(journal.get("clock"))
            if not all(isinstance(e, int) and not isinstance(e, bool) for e in events):
                raise StateError("journal events")
            if not all(
                isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r)
                for r in clock
            ):
                raise StateError("journal clock")
            for_run = [(_str(k[0]), _str(k[1])) for k in _list(value["forRun"])]
            deadline = value["deadline"]
            if not isinstance(deadline, int | float) or isinstance(deadline, bool):
                raise StateError("deadline")
            return cls(
                tool=_str(value["tool"]),
                args=_str(value["args"]),
                deadline=float(deadline),
                nonce=_str(value["nonce"]),
                round=_int(value["round"]),
                issued=_int(value["issued"]),
                calls=calls,
                pending=pending,
                journal=journal,
                for_run=for_run,
            )
        except (KeyError, IndexError, TypeError) as exc:
            raise StateError(f"malformed: {type(exc).__name__}") from None


def _int(value: Any) -> int:
    if type(value) is not int:
        raise StateError("not an integer")
    return value


def _str(value: Any) -> str:
    if not isinstance(value, str):
        raise StateError("not a string")
    return value


def _list(value: Any) -> list[Any]:
    if not isinstance(value, list):
        raise StateError("not a list")
    return value


def _dict(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise StateError("not an object")
    return value


def encode_state(state: RunState) -> bytes:
    """The state as compressed JSON (what is sealed)."""
    text = json.dumps(state.to_json(), ensure_ascii=True, separators=(",", ":"))
    return zlib.compress(text.encode("ascii"), 6)


def decode_state(data: bytes) -> RunState:
    """`encode_state`'s inverse; StateError for anything else (decompressed size bounded)."""
    inflater = zlib.decompressobj()
    try:
        text = inflater.decompress(data, MAX_STATE_JSON_BYTES)
    except zlib.error:
        raise StateError("not compressed JSON") from None
    if inflater.unconsumed_tail:
        raise StateError("too large")
    try:
        value = json.loads(text)
    except ValueError:
        raise StateError("not JSON") from None
    return RunState.from_json(value)


def arguments_digest(arguments: Any) -> str:
    """What binds a state to the codemode.run call that made it: its arguments, canonical."""
    text = json.dumps(
        arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str
    )
    return urlsafe_b64(hashlib.sha256(text.encode("ascii")).digest()[:24])


def urlsafe_b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode("ascii").rstrip("=")


def call_ident(request: Mapping[str, Any]) -> str:
    """A call as the script made it (server, tool, input): digest of its canonical JSON."""
    body = {k: v for k, v in request.items() if k != "op"}
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return urlsafe_b64(hashlib.sha256(text.encode("ascii")).digest()[:24])
