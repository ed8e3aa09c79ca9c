"""The host's options, declared once: each field is one knob of the CodeMode a command builds.

A knob used to be written five times (its click option, serve's options class, the
`--print-config` command line, `load_host` and both CodeMode signatures), and the same knob had
a different name on two commands. Here a field carries its flag spelling, aliases, help text and
the commands that take it (`HostFlag`); codemode_gen/cli/options.py makes the click options from
it, `serve --print-config` writes the command line from it, and `load_host` (and `run`) pass
the fields to `CodeMode.from_config` by name (tests/test_host_options.py checks every field
reaches each of them). It lives in the shared core, free of the runtime, so that reading the
options costs a command nothing before it needs the runtime.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from typing import Any

from codemode_gen.limit_bounds import (
    DEFAULT_MAX_RESPONSE_CHARS,
    HARD_MAX_RESPONSE_CHARS,
    MIN_RESPONSE_CHARS,
    TRACE_MODES,
    TraceMode,
)

__all__ = ["HOST_FLAG", "HostFlag", "HostOptions", "host_fields"]

#: The metadata key of a field's `HostFlag`.
HOST_FLAG = "host_flag"


@dataclass(frozen=True)
class HostFlag:
    """How a host option is spelled on the command line and who takes it."""

    flag: str  # the canonical spelling, e.g. "--approve-all"
    help: str
    commands: tuple[str, ...]  # the CLI commands that take it ("run", "serve", "check")
    aliases: tuple[str, ...] = ()  # older or shorter spellings that still work
    metavar: str | None = None
    choices: tuple[str, ...] | None = None
    minimum: int | None = None
    maximum: int | None = None
    path: bool = False  # a file: `--print-config` writes it absolute (clients start elsewhere)
    codemode: bool = True  # a CodeMode.from_config keyword of the same name
    printed: bool = True  # written by `serve --print-config` (not a secret)


@dataclass(frozen=True)
class HostOptions:
    """How a command builds its CodeMode. The defaults are serve's (a response for a model);
    a command that does not take a field leaves CodeMode's own default in place."""

    typecheck: bool = field(
        default=False,
        metadata={
            HOST_FLAG: HostFlag(
                "--typecheck",
                commands=("serve",),
                help="Type-check every script against out/ before it runs (type errors come back as warnings; "
                "limits.typecheck false turns it off per run). Without TypeScript installed, downloads it "
                "once at start-up (runs meanwhile skip the check).",
            )
        },
    )
    tsc: str | None = field(
        default=None,
        metadata={
            HOST_FLAG: HostFlag(
                "--tsc",
                commands=("serve", "check"),
                metavar="PATH",
                path=True,
                help="TypeScript compiler to use (a tsc, a typescript package folder or its lib/typescript.js) for "
                "`check`, --typecheck and limits.typecheck; default: node_modules/.bin/tsc of the project or a "
                "parent folder, else tsc on PATH, else TypeScript downloaded once into the user's cache.",
            )
        },
    )
    max_workers: int | None = field(
        default=None,
        metadata={
            HOST_FLAG: HostFlag(
                "--max-workers",
                commands=("serve",),
                metavar="N",
                minimum=1,
                help="Maximum sandbox worker processes running at once; more runs queue (default: [sandbox] "
                "max_workers in codemode.toml, else two per CPU).",
            )
        },
    )
    record: bool = field(
        default=False,
        metadata={
            HOST_FLAG: HostFlag(
                "--record",
                commands=("run", "serve"),
                help="Append every successful live tool call to fixtures/<server>/calls/ (as `record` does: "
                "redacted, capped per tool, no duplicates); `codemode-gen generate` then types their outputs.",
            )
        },
    )
    approve_all: bool = field(
        default=False,
        metadata={
            HOST_FLAG: HostFlag(
                "--approve-all",
                aliases=("--yes", "-y"),
                commands=("run", "serve"),
                help="Approve every tool call whose approval policy asks (codemode.toml `approval`; by default tools "
                "not marked read-only or non-destructive) without asking. Without it `run` asks on the terminal "
                "and `serve` through MCP elicitation; where nobody can be asked such calls are denied. "
                "--yes and -y are aliases.",
            )
        },
    )
    skills_writable: bool = field(
        default=False,
        metadata={
            HOST_FLAG: HostFlag(
                "--skills-writable",
                commands=("serve",),
                help='Let runs propose a skill (`import { saveSkill } from "@codemode/skills"`): it is written to '
                "skills/ beside out/ only once the user approves it, asked like a destructive call (even with "
                '--approve-all); never overwrites one. See README "Skills".',
            )
        },
    )
    # CODEMODE_STATE_SECRET is read by serve itself (input_required.resolve_state_secret), as the
    # token is: a variable that is set but short must be refused, not taken for "unset".
    state_secret: str | None = field(
        default=None,
        metadata={
            HOST_FLAG: HostFlag(
                "--state-secret",
                commands=("serve",),
                metavar="SECRET",
                codemode=False,
                printed=False,
                help="Seals the state of a run that waits for approval on an MCP 2026-07-28 client (an "
                "input_required result), so that the client's retry resumes it: every instance behind a load "
                "balancer needs the same one (at least 32 characters). Default: the CODEMODE_STATE_SECRET "
                "environment variable (prefer it: a command line is visible to other users), else a random key "
                "per process (a retry must then reach the same process).",
            )
        },
    )
    trace: TraceMode = field(
        default="errors",
        metadata={
            HOST_FLAG: HostFlag(
                "--trace",
                commands=("serve",),
                choices=TRACE_MODES,
                help="What toolTrace lists by default (limits.trace): every call, the failed and denied ones plus a "
                "toolSummary of all calls, or none.",
            )
        },
    )
    max_response_chars: int = field(
        default=DEFAULT_MAX_RESPONSE_CHARS,
        metadata={
            HOST_FLAG: HostFlag(
                "--max-response-chars",
                commands=("serve",),
                metavar="N",
                minimum=MIN_RESPONSE_CHARS,
                maximum=HARD_MAX_RESPONSE_CHARS,
                help="Characters of result and logs a response carries by default (limits.maxResponseChars); past it "
                "both are cut, with markers and a RESPONSE_TRUNCATED warning.",
            )
        },
    )

    def codemode_kwargs(self, command: str | None = None) -> dict[str, Any]:
        """The CodeMode.from_config keywords these options set (those `command` takes, if given)."""
        return {f.name: getattr(self, f.name) for f, flag in host_fields(command) if flag.codemode}

    def argv(self) -> list[str]:
        """The command-line flags of `serve` that give these options (the defaults left out)."""
        argv: list[str] = []
        for f, flag in host_fields("serve"):
            value = getattr(self, f.name)
            if not flag.printed or value == f.default:
                continue
            if isinstance(f.default, bool):
                argv.append(flag.flag)
            else:
                argv += [flag.flag, os.path.abspath(value) if flag.path else str(value)]
        return argv


def host_fields(command: str | None = None) -> Iterator[tuple[Any, HostFlag]]:
    """Each field of HostOptions with its flag, in declaration order (only `command`'s, if given)."""
    for f in fields(HostOptions):
        flag: HostFlag = f.metadata[HOST_FLAG]
        if command is None or command in flag.commands:
            yield f, flag
