"""Benchmark: our JSON Schema -> TypeScript translator vs json-schema-to-typescript (npm).

Not a test; needs ../shared/corpus and node_modules. Run: .venv/bin/python bench/translator.py

(a) Speed: translate every ../shared/corpus/jstt/*.json with ours (in process) and with
    json-schema-to-typescript in ONE node process (timed inside node, excluding start-up,
    and from outside, including it). Target: ours >= 10x faster.
(b) Precision on the JSON-Schema-Test-Suite groups in ../shared/corpus/jsts/ (draft2020-12
    and draft7; groups needing remotes or with non-local refs are skipped and counted):
    each instance becomes `const v_N: T = <json>;` inside the group's namespace, all groups
    of a draft are type-checked in ONE tsc run and diagnostics are mapped back by line.
    Targets: >= 99% of valid instances accepted, >= 70% of invalid instances rejected.
    The same is measured for json-schema-to-typescript's output for comparison.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemode_gen.generator.typescript import NameScope, doc_comment, translate

REPO = Path(__file__).resolve().parent.parent
CORPUS = REPO.parent / "shared" / "corpus"
TSC = REPO / "node_modules" / ".bin" / "tsc"
NODE_TIMEOUT = 900  # seconds; json2ts with prettier over the whole corpus takes a while
TARGET_SPEEDUP = 10.0
TARGET_VALID = 0.99
TARGET_INVALID = 0.70

NODE_SCRIPT = r"""
const { compile } = require('json-schema-to-typescript');
const fs = require('fs');
const [mode, listFile, format] = process.argv.slice(2);
const jobs = JSON.parse(fs.readFileSync(listFile, 'utf8'));
(async () => {
  const out = {};
  const t0 = process.hrtime.bigint();
  for (const job of jobs) {
    try {
      const schema = JSON.parse(JSON.stringify(job.schema));
      if (mode === 'precision' && schema && typeof schema === 'object') delete schema.title;
      out[job.id] = await compile(schema, job.name, {
        bannerComment: '', format: format === 'format', cwd: '/nonexistent',
        $refOptions: { resolve: { http: false, file: false } },
      });
    } catch (e) {
      out[job.id] = { error: String(e && e.message || e).slice(0, 200) };
    }
  }
  const t1 = process.hrtime.bigint();
  process.stdout.write(JSON.stringify({ innerMs: Number(t1 - t0) / 1e6, out }));
})();
"""


def run_node(
    mode: str, jobs: list[dict[str, Any]], fmt: bool
) -> tuple[float, float, dict[str, Any]]:
    """(inner ms, outer ms including node start-up, results)."""
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "json2ts_bench.js"
        script.write_text(NODE_SCRIPT, encoding="utf-8")
        listing = Path(tmp) / "jobs.json"
        listing.write_text(json.dumps(jobs), encoding="utf-8")
        t0 = time.perf_counter()
        proc = subprocess.run(
            ["node", str(script), mode, str(listing), "format" if fmt else "noformat"],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=NODE_TIMEOUT,
            env={"NODE_PATH": str(REPO / "node_modules"), "PATH": "/usr/bin:/bin:/usr/local/bin"},
        )
        outer = (time.perf_counter() - t0) * 1000
    if proc.returncode != 0:
        raise SystemExit(f"node failed: {proc.stderr[-2000:]}")
    data = json.loads(proc.stdout)
    return float(data["innerMs"]), outer, data["out"]


# --- (a) speed -----------------------------------------------------------------------------


def bench_speed() -> list[str]:
    files = sorted((CORPUS / "jstt").glob("*.json"))
    schemas = [(f.stem, json.loads(f.read_text(encoding="utf-8"))) for f in files]
    rows = []
    # ours: best of 3 (in process; no start-up to exclude)
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for name, schema in schemas:
            translate(schema, name, NameScope())
        best = min(best, (time.perf_counter() - t0) * 1000)
    t0 = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "codemode_gen", "--version"],
        capture_output=True,
        check=True,
        cwd=REPO,
    )
    py_start = (time.perf_counter() - t0) * 1000
    jobs = [{"id": n, "name": n, "schema": s} for n, s in schemas]
    rows.append(f"(a) speed over {len(files)} files of corpus/jstt")
    rows.append(
        f"    ours                        {best:9.1f} ms (+ {py_start:.0f} ms python start-up)"
    )
    for fmt in (True, False):
        inner, outer, out = run_node("speed", jobs, fmt)
        errors = sum(1 for v in out.values() if isinstance(v, dict))
        ratio_in = inner / best
        ratio_out = outer / (best + py_start)
        label = "json2ts (format: true) " if fmt else "json2ts (format: false)"
        rows.append(
            f"    {label}     {inner:9.1f} ms in node, {outer:.0f} ms with start-up; {errors} failed"
        )
        verdict = "PASS" if ratio_in >= TARGET_SPEEDUP else "MISS"
        rows.append(
            f"    ratio vs {label} {ratio_in:6.1f}x excl. start-up, {ratio_out:5.1f}x incl.  "
            f"(target >= {TARGET_SPEEDUP:.0f}x) {verdict}"
        )
    return rows


# --- (b) precision -------------------------------------------------------------------------


@dataclass
class Tally:
    valid: int = 0
    valid_ok: int = 0
    invalid: int = 0
    invalid_ok: int = 0
    req_invalid: int = 0  # invalid instances of non-optional groups (no format/ECMA-regex tests)
    req_invalid_ok: int = 0
    decl_errors: int = 0  # groups whose generated declarations do not compile
    failed: int = 0  # groups the translator could not translate
    missed_valid: list[str] = field(default_factory=list)
    missed_invalid: list[str] = field(default_factory=list)


def _groups(draft: str) -> tuple[list[dict[str, Any]], int]:
    index = json.loads((CORPUS / "jsts" / "index.json").read_text(encoding="utf-8"))
    groups, skipped = [], 0
    for entry in index["groups"]:
        if not entry["file"].startswith(draft + "/"):
            continue
        if entry["needs_remotes"] or entry["nonlocal_refs"]:
            skipped += 1
            continue
        data = json.loads((CORPUS / "jsts" / entry["file"]).read_text(encoding="utf-8"))
        data["file"] = entry["file"]
        schema = data["schema"]
        if draft == "draft7" and isinstance(schema, dict) and "$schema" not in schema:
            # The suite states the dialect out of band; a real validator is told it too.
            data["schema"] = {"$schema": "http://json-schema.org/draft-07/schema#", **schema}
        groups.append(data)
    return groups, skipped


def _tsc(source: str) -> dict[int, list[str]]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.ts"
        path.write_text(source + "\nexport {};\n", encoding="utf-8")
        proc = subprocess.run(
            [str(TSC), "--noEmit", "--strict", "--skipLibCheck", "false", "--target", "es2022",
             "--pretty", "false", "--noErrorTruncation", str(path)],
            capture_output=True, text=True, timeout=NODE_TIMEOUT,
        )  # fmt: skip
    if proc.returncode not in (0, 1, 2) or ("error TS" not in proc.stdout and proc.returncode):
        raise SystemExit(f"tsc failed: {proc.stdout[-2000:]}{proc.stderr[-2000:]}")
    errors: dict[int, list[str]] = {}
    for line in proc.stdout.splitlines():
        m = re.match(r"^.*?\((\d+),\d+\): error (TS\d+: .*)$", line)
        if m:
            errors.setdefault(int(m[1]), []).append(m[2])
    if any(re.match(r"TS1\d{3}:", e) for errs in errors.values() for e in errs):
        # One syntax error makes tsc skip every semantic check: the figures would be void.
        raise SystemExit(f"syntax errors in the generated TypeScript: {list(errors.items())[:3]}")
    return errors


def _measure(
    groups: list[dict[str, Any]], decls_of: dict[int, str | None], root_of: dict[int, str]
) -> Tally:
    """Type-check every instance of every group against its declarations in one tsc run."""
    lines: list[str] = []
    instance_at: dict[int, tuple[int, int, bool]] = {}  # line -> (group, test, valid)
    decl_lines: dict[int, int] = {}  # line -> group
    tally = Tally()
    for gi, group in enumerate(groups):
        decls = decls_of.get(gi)
        if decls is None:
            tally.failed += 1
            continue
        lines.append(f"namespace g{gi} {{")
        for text in decls.split("\n"):
            lines.append(text)
            decl_lines[len(lines)] = gi
        for ti, test in enumerate(group["tests"]):
            lines.append(f"  const v{ti}: {root_of[gi]} = {json.dumps(test['data'])};")
            instance_at[len(lines)] = (gi, ti, bool(test["valid"]))
        lines.append("}")
    errors = _tsc("\n".join(lines))
    bad_decl_groups = {decl_lines[ln] for ln in errors if ln in decl_lines}
    tally.decl_errors = len(bad_decl_groups)
    for ln, (gi, ti, valid) in instance_at.items():
        rejected = ln in errors
        where = f"{groups[gi]['file']}#{ti}: {groups[gi]['tests'][ti]['description']}"
        if valid:
            tally.valid += 1
            tally.valid_ok += not rejected
            if rejected:
                tally.missed_valid.append(where + " | " + errors[ln][0][:160])
        else:
            tally.invalid += 1
            tally.invalid_ok += rejected
            if not groups[gi]["optional"]:
                tally.req_invalid += 1
                tally.req_invalid_ok += rejected
            if not rejected:
                tally.missed_invalid.append(where)
    return tally


def ours_decls(groups: list[dict[str, Any]]) -> tuple[dict[int, str | None], dict[int, str]]:
    decls_of: dict[int, str | None] = {}
    root_of: dict[int, str] = {}
    for gi, group in enumerate(groups):
        result = translate(group["schema"], "T", NameScope())
        parts = [doc_comment(d.doc) + f"export type {d.name} = {d.text};" for d in result.decls]
        decls_of[gi] = "\n".join(parts)
        root_of[gi] = result.root
    return decls_of, root_of


def json2ts_decls(groups: list[dict[str, Any]]) -> tuple[dict[int, str | None], dict[int, str]]:
    jobs = [{"id": str(gi), "name": "T", "schema": g["schema"]} for gi, g in enumerate(groups)]
    _, _, out = run_node("precision", jobs, fmt=False)
    decls_of: dict[int, str | None] = {}
    for gi in range(len(groups)):
        value = out.get(str(gi))
        decls_of[gi] = value if isinstance(value, str) else None
    return decls_of, dict.fromkeys(range(len(groups)), "T")


def pct(n: int, d: int) -> str:
    return f"{100 * n / d:5.1f}%" if d else "  n/a"


def bench_precision(show: int) -> list[str]:
    rows = ["(b) JSON-Schema-Test-Suite instances (corpus/jsts), one tsc run per draft and tool"]
    rows.append(
        f"    {'draft':<13}{'tool':<9}{'groups':>7}{'skip':>6}{'valid acc.':>12}{'invalid rej.':>14}"
        f"{'(required)':>14}{'decl err':>10}{'failed':>8}  verdict"
    )
    details: list[str] = []
    for draft in ("draft2020-12", "draft7"):
        groups, skipped = _groups(draft)
        for tool, make in (("ours", ours_decls), ("json2ts", json2ts_decls)):
            decls_of, root_of = make(groups)
            tally = _measure(groups, decls_of, root_of)
            va = tally.valid_ok / tally.valid if tally.valid else 0
            ir = tally.invalid_ok / tally.invalid if tally.invalid else 0
            rr = tally.req_invalid_ok / tally.req_invalid if tally.req_invalid else 0
            verdict = (
                f"valid {'PASS' if va >= TARGET_VALID else 'MISS'}, "
                f"invalid {'PASS' if ir >= TARGET_INVALID else 'MISS'} "
                f"(required {'PASS' if rr >= TARGET_INVALID else 'MISS'})"
            )
            rows.append(
                f"    {draft:<13}{tool:<9}{len(groups):>7}{skipped:>6}"
                f"{pct(tally.valid_ok, tally.valid):>7} of {tally.valid:<4}"
                f"{pct(tally.invalid_ok, tally.invalid):>7} of {tally.invalid:<4}"
                f"{pct(tally.req_invalid_ok, tally.req_invalid):>7} of {tally.req_invalid:<4}"
                f"{tally.decl_errors:>8}{tally.failed:>8}  {verdict if tool == 'ours' else '(reference)'}"
            )
            if tool == "ours" and show:
                details.append(f"  {draft}: valid instances rejected ({len(tally.missed_valid)}):")
                details += ["    " + m for m in tally.missed_valid[:show]]
                details.append(
                    f"  {draft}: invalid instances accepted ({len(tally.missed_invalid)}):"
                )
                details += ["    " + m for m in tally.missed_invalid[:show]]
    rows.append(f"    targets: valid >= {TARGET_VALID:.0%}, invalid >= {TARGET_INVALID:.0%}")
    rows.append(
        "    (required) = invalid instances of the suite's non-optional groups, i.e. without the"
        " optional format/ECMA-regex assertions TypeScript cannot express"
    )
    return rows + details


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--show", type=int, default=0, help="list up to N misses per draft")
    parser.add_argument("--only", choices=("speed", "precision"), help="run one half only")
    args = parser.parse_args()
    if not CORPUS.is_dir():
        raise SystemExit(f"corpus not found at {CORPUS}")
    rows = []
    if args.only != "precision":
        rows += bench_speed()
    if args.only != "speed":
        rows += bench_precision(args.show)
    print("\n".join(rows))


if __name__ == "__main__":
    main()
