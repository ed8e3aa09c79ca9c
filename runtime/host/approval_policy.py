"""Which tool calls need a person's yes (issue 12): the approval policy of each tool, and why.

Policy per tool (`tool_policy`, pure): the tool's own entry in codemode.toml
(`[servers.<id>.approval] <tool> = "..."`), else the server's default (`approval = "..."` or
`"*" = "..."` in that table), else the project default (`approval = "..."` at the top); "auto"
there means "from the tool's MCP annotations":

- `readOnlyHint: true` → allow;
- `destructiveHint: false` (and not read-only) → allow: the server says it only adds;
- anything else → ask. This fails closed: a tool without annotations, or with `readOnlyHint:
  false` and no `destructiveHint` (which the MCP spec then defaults to true), is asked for.

Why a tool without annotations is asked before every call, not once per session: in the real
catalogs (tests/data/catalogs) the servers that annotate nothing are the ones that post, push and
write (github `push_files`, slack `slack_post_message`, sqlite `write_query`, puppeteer
`puppeteer_evaluate`), and a yes given to one script must not cover another script's calls
later in the session. What keeps this livable: every question of an "ask" tool offers to
approve the tool's further calls for the rest of the run (`FOR_RUN`), so a loop asks once; the
project decides for good in codemode.toml, and `record`, `generate` and `codemode-gen policy`
print the policy with the lines that change it (`policy_table`). Where nobody can be asked it
stays a denial (fail closed), whose hint says the same lines.

Annotations are the server's own claims; a server that lies about them is only contained by an
explicit entry in codemode.toml. A per-tool `deny` hides the tool altogether (codemode_toml.py adds it
to the server's blocklist: no binding, no declaration, not in discovery), so the gate only sees a
`deny` that came from a default (`"*" = "deny"`): such calls are refused without asking.

This module is pure (settings and annotations in, a policy out): the catalog marks tools with
it, `codemode-gen policy` and the summaries of `record`/`generate` print it (`policy_table`),
and the gate (runtime/host/approval.py) asks it before each call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

# What codemode.toml may say (a Policy, or "auto": from the tool's annotations) lives with the
# config that parses it.
from codemode_gen.config import (
    APPROVAL_SETTINGS,
    ApprovalSetting,
    ServerConfig,
    ServerSettings,
    Settings,
)
from codemode_gen.settings_schema import SettingsSource

__all__ = [
    "APPROVAL_SETTINGS",
    "ApprovalSetting",
    "Policy",
    "PolicySource",
    "ToolPolicy",
    "describe_annotations",
    "explain_policy",
    "policy_from_annotations",
    "policy_table",
    "toml_line",
    "tool_policy",
]

#: What a tool's calls get: sent at once, sent after a yes (every call / the first per session),
#: or never sent.
Policy = Literal["allow", "ask", "ask-once", "deny"]
#: Why a tool has its policy: one of its MCP annotations, a line of codemode.toml (or the
#: blocklist), or the default for a tool whose annotations say nothing ("auto" asks).
PolicySource = Literal["annotation", "config", "default"]


def policy_from_annotations(annotations: Mapping[str, Any] | None) -> Policy:
    """ "auto": allow read-only tools and tools that say they destroy nothing; ask the rest.

    Only literal booleans count: a server sending `"readOnlyHint": "true"` is not trusted with
    the lenient reading."""
    hints = annotations if isinstance(annotations, Mapping) else {}
    if hints.get("readOnlyHint") is True:
        return "allow"
    if hints.get("destructiveHint") is False:
        return "allow"
    return "ask"


def tool_policy(
    config: ServerConfig,
    tool_name: str,
    annotations: Mapping[str, Any] | None,
    project_default: ApprovalSetting = "auto",
) -> Policy:
    """The policy of one tool: its own entry, else the server's default, else `project_default`
    (which load_config already folded into `config.approval_default`; it matters for configs
    built by hand), with "auto" resolved from the tool's annotations."""
    setting: str | None = config.approval.get(tool_name)
    if setting is None:
        setting = config.approval_default
    if setting is None:
        setting = project_default
    return _resolved(setting, annotations)


def _resolved(setting: str, annotations: Mapping[str, Any] | None) -> Policy:
    if setting == "auto":
        return policy_from_annotations(annotations)
    if setting in ("allow", "ask", "ask-once", "deny"):
        return setting  # type: ignore[return-value]
    return "ask"  # unreachable for validated configs; never fail open


@dataclass(frozen=True)
class ToolPolicy:
    """One row of the policy table (`codemode-gen policy`): a tool's policy and why it has it.

    `source` is what decided: "annotation" (`detail` names it: `destructiveHint: true`),
    "config" (`detail` is the codemode.toml line, `line` where it is when known) or "default"
    (auto, and the annotations say nothing either way)."""

    config_id: str
    tool_name: str
    policy: Policy
    source: PolicySource
    detail: str
    line: int | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "server": self.config_id,
            "tool": self.tool_name,
            "policy": self.policy,
            "why": self.source,
            "detail": self.detail,
        }
        if self.line is not None:
            out["line"] = self.line
        return out


def explain_policy(
    config_id: str,
    server: ServerSettings | None,
    project_default: ApprovalSetting,
    tool_name: str,
    annotations: Mapping[str, Any] | None,
    *,
    source: SettingsSource | None = None,
) -> ToolPolicy:
    """`tool_policy` with its reason, from codemode.toml's settings (`server`: its
    `[servers.<id>]`, None when it has none), as `load_config` folds them: a tool on the
    blocklist (a per-tool "deny" is one) is denied, else its own entry, the server's default,
    the project's default, "auto" from the annotations. `source` (the file the settings came
    from) gives each config reason its line, and a server default the form it was written in."""
    server = server if server is not None else ServerSettings()

    def config(setting: str, text: str, *keys: str) -> ToolPolicy:
        return ToolPolicy(
            config_id,
            tool_name,
            _resolved(setting, annotations),
            "config",
            text,
            source.line(keys) if source is not None else None,
        )

    table = f"[servers.{_toml_key(config_id)}]"
    own = server.approval.get(tool_name)
    if tool_name in server.blocklist and own != "deny":
        return config("deny", f"{table} blocklist", "servers", config_id, "blocklist")
    if own is not None and own != "auto":
        return config(
            own, toml_line(config_id, tool_name, own), "servers", config_id, "approval", tool_name
        )
    if own is None and server.approval_default not in (None, "auto"):
        default = str(server.approval_default)
        written = _server_entry(source, config_id)
        if isinstance(written, Mapping):
            return config(
                default,
                f'[servers.{_toml_key(config_id)}.approval] "*" = "{default}"',
                "servers",
                config_id,
                "approval",
                "*",
            )
        return config(default, f'{table} approval = "{default}"', "servers", config_id, "approval")
    if own is None and server.approval_default is None and project_default != "auto":
        return config(project_default, f'approval = "{project_default}"', "approval")
    policy = policy_from_annotations(annotations)
    hints = annotations if isinstance(annotations, Mapping) else {}
    for key, value in (
        ("readOnlyHint", True),
        ("destructiveHint", False),
        ("destructiveHint", True),
    ):
        if hints.get(key) is value:
            return ToolPolicy(
                config_id, tool_name, policy, "annotation", f"{key}: {str(value).lower()}"
            )
    if hints.get("readOnlyHint") is False:
        return ToolPolicy(
            config_id,
            tool_name,
            policy,
            "annotation",
            "readOnlyHint: false, no destructiveHint (MCP reads it as true)",
        )
    return ToolPolicy(
        config_id,
        tool_name,
        policy,
        "default",
        "no annotations" if not hints else "annotations say nothing of reads or destruction",
    )


def _server_entry(source: SettingsSource | None, config_id: str) -> Any:
    """What codemode.toml wrote as `[servers.<id>] approval`: a string, a table, or None."""
    servers = source.data.get("servers") if source is not None else None
    table = servers.get(config_id) if isinstance(servers, Mapping) else None
    return table.get("approval") if isinstance(table, Mapping) else None


def policy_table(
    settings: Settings, servers: Iterable[tuple[str, Sequence[Mapping[str, Any]]]]
) -> list[ToolPolicy]:
    """Every tool's `explain_policy` under `settings`, for servers given as (config id, their
    recorded tools/list entries); in server and tool order."""
    rows = []
    for config_id, tools in sorted(servers, key=lambda s: s[0]):
        server = settings.servers.get(config_id)
        for tool in sorted(
            (t for t in tools if isinstance(t.get("name"), str)), key=lambda t: str(t["name"])
        ):
            annotations = tool.get("annotations")
            rows.append(
                explain_policy(
                    config_id,
                    server,
                    settings.approval,
                    str(tool["name"]),
                    annotations if isinstance(annotations, Mapping) else None,
                    source=settings.source,
                )
            )
    return rows


def toml_line(config_id: str, tool_name: str, setting: ApprovalSetting) -> str:
    """The codemode.toml table header and entry (one line, as in a hint) that give one tool
    `setting`, keys quoted where TOML needs it."""
    return f'[servers.{_toml_key(config_id)}.approval] {_toml_key(tool_name)} = "{setting}"'


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+\Z")


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.match(key) else json.dumps(key, ensure_ascii=False)


def describe_annotations(annotations: Mapping[str, Any] | None) -> str:
    """What the tool's annotations say about it, in two or three words for a prompt."""
    if not isinstance(annotations, Mapping):
        return "no annotations"
    if annotations.get("readOnlyHint") is True:
        return "read-only"
    if annotations.get("destructiveHint") is True:
        return "destructive"
    if annotations.get("destructiveHint") is False:
        return "not destructive"
    return "may be destructive"
