"""Drift between the committed fixtures and a live server: what `record --check` reports.

Pure: no I/O. `generator/record_check.py` connects, lists the tools and repeats sample calls;
this module gets the recorded `FixtureSet`, the live tools as `record` would write them (JSON
only, redacted) and the repeated results (redacted and bounded like a recorded line), and
returns findings. The same inputs give the same report: servers, tools and findings are sorted.

What counts as drift (docs/config.md, "record --check"):

- a tool added or removed; a tool's `description`, `title`, `annotations`, `inputSchema` or
  `outputSchema` changed (the fields `generate` reads), compared as canonical JSON (key order
  and `1` vs `1.0` do not matter), reported as JSON pointers with old -> new; the server's
  `instructions` changed (agent context, like descriptions);
- the *shape* of a repeated sample of a read-only tool. The result is unwrapped as the runtime
  unwraps it (spec §5.3.2, the server's unwrap mode) and validated against the output type
  `generate` builds from the fixtures: the declared outputSchema, else the schema inferred from
  the recorded samples by the same inference (`infer_output`). The schema is first reduced to
  what the TypeScript type says (`shape_schema`): kinds, properties, required, closed objects,
  unions, literal `enum`/`const`, maps (`additionalProperties`: inferred for objects whose keys
  are data, generator/infer.py). Value constraints the type does not carry (minimum, pattern,
  format, lengths, not, if/then/else, ...) and integer vs number are dropped, and an open object
  accepts new properties: values change all the time, the committed type still holds. A map's
  keys are values too: only its values' shape is compared, and a finding names any of its keys
  `*` (`/byTag/*: expected number, got string`), once for the map. A
  mismatch the recorded result of the same sample already had is not reported (a server that
  broke its declared schema when it was recorded: `generate` reports that itself).

Not drift but "could not check" (exit 3 when nothing drifted): a repeated call that failed
(JSON-RPC error, timeout, lost connection) or answered with a tool error (`isError`), and a
server that could not be reached. Notes never change the exit status: samples not repeated by
design (a redacted input), results too large to compare, a declared schema that cannot be used.

This module plans which samples to repeat and turns the stages' findings into one verdict and
report per server; the stages live beside it: drift_findings.py (the types they exchange),
drift_listing.py (the listing compared), drift_results.py (result shapes compared).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, get_args

from codemode_gen.generator.drift_findings import FindingKind, Repeated, Resample, ServerCheck
from codemode_gen.generator.drift_listing import compare_server, compare_tools
from codemode_gen.generator.drift_results import compare_results
from codemode_gen.generator.fixtures import FixtureSet
from codemode_gen.generator.infer import MAX_INFER_SAMPLES, unwrapped_samples
from codemode_gen.generator.probe import REDACTION_MARK
from codemode_gen.generator.untrusted import shown
from codemode_gen.generator.unwrap import UnwrapMode

__all__ = [
    "check_server",
    "exit_status",
    "plan_resamples",
    "render_report",
]

# Order of a tool's findings in the report: what the listing says first, then results.
_KIND_RANK = {kind: rank for rank, kind in enumerate(get_args(FindingKind))}

# Lines printed per server (a hostile server can list 10,000 new tools); the rest are counted.
MAX_REPORT_LINES_PER_SERVER = 200
# Bounds one line of an unreachable server's reason (it quotes the server's stderr).
MAX_STDERR_LINE_CHARS = 400


# --------------------------------------------------------------------------- planning


def _read_only(tool: Mapping[str, Any]) -> bool:
    annotations = tool.get("annotations")
    return isinstance(annotations, dict) and annotations.get("readOnlyHint") is True


def _mentions_redaction(value: Any) -> bool:
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and REDACTION_MARK in item:
            return True
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def plan_resamples(
    fixture_set: FixtureSet,
    live_tools: Sequence[Mapping[str, Any]],
    *,
    blocklist: Iterable[str] = (),
) -> tuple[list[Resample], list[str]]:
    """The recorded samples to repeat, and notes on the ones left out on purpose.

    Only tools the live server annotates `readOnlyHint: true` (its word now, not the
    recording's), that are recorded and still listed, and not blocklisted; only the samples
    that define the committed type (not isError, not cut: `unwrapped_samples`), the first
    MAX_INFER_SAMPLES of them as inference takes; never one whose recorded input was redacted.
    """
    live = {t["name"]: t for t in live_tools if isinstance(t.get("name"), str)}
    listed = {t["name"] for t in fixture_set.tools}
    hidden = set(blocklist)
    plan: list[Resample] = []
    notes: list[str] = []
    for name in sorted(fixture_set.calls):
        tool = live.get(name)
        if name not in listed or tool is None or name in hidden or not _read_only(tool):
            continue
        calls = fixture_set.calls[name]
        lines = [sample.line for sample in unwrapped_samples(calls, "spec")]
        if len(lines) > MAX_INFER_SAMPLES:
            notes.append(
                f"{shown(name)}: only the first {MAX_INFER_SAMPLES} of {len(lines)} samples repeated"
            )
            lines = lines[:MAX_INFER_SAMPLES]
        for line in lines:
            args = calls[line - 1].get("input")
            if _mentions_redaction(args):
                notes.append(
                    f"{shown(name)} sample {line}: not repeated: its recorded input was redacted"
                )
                continue
            plan.append(Resample(name, line, args))
    return plan, notes


# --------------------------------------------------------------------------- one server, report


def check_server(
    fixture_set: FixtureSet,
    live_server_json: Mapping[str, Any] | None,
    live_tools: Sequence[Mapping[str, Any]],
    repeated: Iterable[Repeated],
    *,
    mode: UnwrapMode = "spec",
    notes: Iterable[str] = (),
) -> ServerCheck:
    """Everything `record --check` says about one reachable server. `live_server_json` None:
    its initialize result was not usable (not compared)."""
    check = ServerCheck(fixture_set.config_id, tools=len(live_tools), notes=list(notes))
    if live_server_json is not None:
        check.findings += compare_server(fixture_set.server_json, live_server_json)
    check.findings += compare_tools(fixture_set.tools, live_tools)
    findings, unchecked, result_notes, compared = compare_results(fixture_set, repeated, mode)
    check.findings += findings
    check.unchecked += unchecked
    check.notes += result_notes
    check.compared = compared
    check.findings.sort(
        key=lambda f: (f.tool is not None, f.tool or "", _KIND_RANK[f.kind])
    )  # stable
    return check


def exit_status(checks: Iterable[ServerCheck]) -> int:
    """1: drift (or a server not recorded yet) anywhere; else 3: something could not be checked
    (unreachable server, failed sample call); else 0."""
    statuses = {c.status for c in checks}
    if statuses & {"drift", "not-recorded"}:
        return 1
    if statuses & {"unreachable", "incomplete"}:
        return 3
    return 0


def _n(count: int, noun: str) -> str:
    return f"{count} {noun}" + ("" if count == 1 else "s")


def _status_line(check: ServerCheck, fixtures_dir: Path) -> str:
    sid = check.server_id
    status = check.status
    if status == "not-recorded":
        return f"{sid}: not recorded yet: no {fixtures_dir / sid}/ (run `codemode-gen record --server {sid}`)"
    if status == "unreachable":
        # the reason may quote the server's stderr: every line printable, never an escape
        reason = "\n".join(
            shown(line, MAX_STDERR_LINE_CHARS) for line in str(check.unreachable).splitlines()
        )
        return f"{sid}: unreachable: {reason}"
    counts = f"{_n(check.tools, 'tool')}, {_n(check.compared, 'result')} compared"
    if status == "drift":
        return f"{sid}: drift, {_n(len(check.findings), 'finding')} ({counts})"
    if status == "incomplete":
        return f"{sid}: no drift found, but {_n(len(check.unchecked), 'sample')} could not be checked ({counts})"
    return f"{sid}: up to date ({counts})"


def render_report(checks: Iterable[ServerCheck], fixtures_dir: Path) -> list[str]:
    """The per-server report, sorted by server id; findings sorted by tool, then kind."""
    out: list[str] = []
    for check in sorted(checks, key=lambda c: c.server_id):
        out.append(_status_line(check, fixtures_dir))
        body = [f"  {finding.text()}" for finding in check.findings]
        body += [f"  could not check: {line}" for line in check.unchecked]
        if check.status == "unreachable" and check.log_path is not None:
            body.append(f"  (server log: {check.log_path})")
        body += [f"  note: {line}" for line in check.notes]
        if len(body) > MAX_REPORT_LINES_PER_SERVER:
            more = len(body) - MAX_REPORT_LINES_PER_SERVER
            body = [*body[:MAX_REPORT_LINES_PER_SERVER], f"  ... and {more} more lines"]
        out += body
    return out
