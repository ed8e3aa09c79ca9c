"""What an approver is asked and what it answers: the contract between the gate and a person.

Asking is the host's business: an `Approver` is `async (ApprovalRequest) -> Answer`: True (this
call), False, or `FOR_RUN` ("run": this call and every later call of the same tool in the same
run, which the gate then lets through without asking, "approved-for-run"; offered for "ask"
tools, `ApprovalRequest.offers_run`). `run` asks on the terminal (cli/run.py: `a`), `serve`
through MCP elicitation (a checkbox of the form), the Python API takes any callable.
An approver that cannot ask (no terminal, a client without elicitation) raises
`ApprovalUnavailable`; one that raises anything else counts as a no. No approver at all → no
(fail closed), unless the host was built with `approve_all` (`--approve-all` on `run`
and `serve`).

Arguments are shown to the person asked, never written to the trace; what they see is
redacted like fixtures (the server's env/header values and codemode.toml's `redact` patterns),
cut at `MAX_ARGUMENTS_CHARS`, and shown as data: one line of JSON with every character that
could hide text or fake a line break escaped, set off behind a gutter after the host's own
words (codemode_gen/display.py), so nothing a script writes can read as the host's text. The
gate (runtime/host/approval.py) builds the request; the approvers (cli/run.py,
runtime/frontends/serve.py, runtime/host/resume.py) show it and answer.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from codemode_gen.display import GUTTER, data_block, display_string
from codemode_gen.runtime.host.approval_policy import Policy, describe_annotations

__all__ = [
    "ARGUMENTS_HEADING",
    "FOR_RUN",
    "MAX_ARGUMENTS_CHARS",
    "Answer",
    "ApprovalRequest",
    "ApprovalUnavailable",
    "Approver",
    "Unusable",
]

# Bounds the arguments shown to the person asked (characters of their JSON): a script can pass
# megabytes, which neither a terminal nor an elicitation dialog can show usefully.
MAX_ARGUMENTS_CHARS = 1000
# Characters of shown arguments per line of an elicitation message: clients lay the message out
# in dialogs of unknown width, and a line the dialog wraps again would start without the gutter
# that marks it as data. Narrow enough for a small dialog, wide enough for JSON to read.
ELICITATION_DATA_WIDTH = 60


class ApprovalUnavailable(Exception):
    """Raised by an approver that has no way to ask (no terminal, a client without
    elicitation): the call is denied, and the message says why."""


@dataclass(frozen=True)
class ApprovalRequest:
    """What the person asked gets to see: who wants to call what, with which arguments.

    `server_id` is the module path scripts import (`@codemode/servers/<server_id>`),
    `config_id` the server's key in .mcp.json and codemode.toml; `arguments_text` is the
    arguments' JSON on one line, redacted, cut at MAX_ARGUMENTS_CHARS, with every character
    that could hide text or break the line escaped (`display_json`); `policy` is "ask" or
    "ask-once". Every text field is safe to print on a terminal; show the arguments with
    `arguments_block`, after the host's own words.
    """

    server_id: str
    config_id: str
    tool_name: str
    arguments_text: str
    annotations: Mapping[str, Any] | None
    policy: Policy

    @property
    def offers_run(self) -> bool:
        """Whether the approver may answer `FOR_RUN`: an "ask" tool's calls are asked one by
        one, so a yes for the rest of the run spares the questions of a loop (an "ask-once"
        yes already covers the session)."""
        return self.policy == "ask"

    def describe(self, question: str = "", *, width: int = ELICITATION_DATA_WIDTH) -> str:
        """The message for a person: the host's words (who wants to call what; `question`),
        then the arguments set off as data, last (`arguments_block`)."""
        once = (
            " (ask-once: a yes approves this tool for the rest of the session)"
            if self.policy == "ask-once"
            else ""
        )
        flags = describe_annotations(self.annotations)
        return (
            f"A script wants to call tool {display_string(self.tool_name)} of server"
            f" {display_string(self.config_id)}{f' ({flags})' if flags else ''}{once}.\n"
            f"{question + chr(10) if question else ''}"
            f"{ARGUMENTS_HEADING}\n{self.arguments_block(width)}"
        )

    def arguments_block(self, width: int) -> str:
        """The arguments as lines of at most `width` characters, each behind the data gutter."""
        return data_block(self.arguments_text, width)


#: The line before shown arguments: what they are, so that nothing in them reads as ours.
ARGUMENTS_HEADING = (
    f"Arguments, as the script wrote them (JSON; secrets redacted; unusual characters escaped; "
    f"every line starts with {GUTTER.strip()}):"
)


#: The answer that approves this call and every later call of the same tool in the same run
#: ("allow `write_query` for the rest of this run"); counts as a plain yes where not offered.
FOR_RUN: Literal["run"] = "run"
#: What an approver answers: True (send this call), FOR_RUN, or False (anything else is no).
Answer = bool | Literal["run"]


class Unusable(str):
    """Why a client's response cannot count as an answer (it is not one): never FOR_RUN, though
    a str, so an answer and this are told apart by type."""


#: Asks a person. May raise ApprovalUnavailable (no way to ask).
Approver = Callable[[ApprovalRequest], Awaitable[Answer]]
