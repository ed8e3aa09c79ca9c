"""Skills at check time and run time (generator/skills.py reads and lays them out).

`check_skills` type-checks every skill of the project against a codemode.d.ts with the real
TypeScript compiler (strict, as a script is checked) and gets each one's declaration from the
compiler's own declaration emit, so a skill's parameters and result are its function's types.
`with_skills` is what `generate` adds to out/: nothing is written when a skill does not check
(its errors are `skills/<name>.ts:line:col` lines). `skill_modules` gives a run the skills out/
holds, as modules the sandbox imports like server modules (the same bridge makes their calls).
"""

from __future__ import annotations

import json
import os
import subprocess
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError
from codemode_gen.generator import skills as sk
from codemode_gen.generator.manifest import CODEMODE_DTS
from codemode_gen.runtime.host.tsinput import erase_types

if TYPE_CHECKING:
    from codemode_gen.generator.build import Outputs

# The TypeScript compiler's finder is imported by the functions that check skills: a host that
# only runs scripts reads skills through skill_entries/skill_modules and never holds it.

SKILLS_TSC_JS = Path(__file__).parent.parent / "js" / "skills_tsc.js"
#: Bounds one check of every skill (one tsc program: seconds; a hang is a bug, reported).
SKILLS_CHECK_TIMEOUT_S = 180.0
#: Bounds the checker's answer read back (declarations of MAX_SKILLS skills and their errors).
MAX_CHECK_OUTPUT_BYTES = 16 * 1024 * 1024
#: Diagnostics printed per failed check (the rest are counted).
MAX_SHOWN_ERRORS = 20
#: Bounds one skill's module as it is read from out/ at run time (generate wrote it from a source
#: of at most MAX_SKILL_BYTES; erasing types keeps the length in UTF-8 bytes).
MAX_MODULE_BYTES = sk.MAX_SKILL_BYTES
#: Bounds a skill's file of out/ kept as it is when no compiler can re-check it (its module, or
#: its declaration, which tsc may have expanded from the tool types it uses).
MAX_KEPT_FILE_BYTES = 4 * sk.MAX_SKILL_BYTES


@dataclass(frozen=True)
class SkillCheck:
    diagnostics: list[dict[str, Any]]  # {file, line, column, code, category, message}
    declarations: dict[str, str]  # skill name -> tsc's .d.ts text of its file

    @property
    def errors(self) -> list[dict[str, Any]]:
        return [d for d in self.diagnostics if d.get("category") == "error"]


def render(diagnostics: Sequence[Mapping[str, Any]]) -> list[str]:
    """`skills/x.ts:12:5 error TS2353: message` lines."""
    lines = []
    for d in diagnostics:
        where = f"{d.get('file', '?')}:{d.get('line', 1)}:{d.get('column', 1)}"
        message = str(d.get("message", "")).replace("\n", " ")
        lines.append(f"{where} {d.get('category', 'error')} TS{d.get('code')}: {message}")
    return lines


def check_skills(
    skills: Sequence[sk.Skill],
    declarations_dts: str,
    *,
    roots: Sequence[Path] = (),
    tsc: str | None = None,
) -> SkillCheck:
    """Type-check `skills` against `declarations_dts` (a codemode.d.ts without skills)."""
    if not skills:
        return SkillCheck([], {})
    from codemode_gen.runtime.host.tscompiler import CompilerNotFound, find_compiler

    compiler = find_compiler(tsc, roots)
    if compiler.node is None:
        raise CompilerNotFound(
            "checking skills needs Node.js (found TypeScript but no `node`)",
            hint="install Node.js (https://nodejs.org) and put `node` on PATH",
        )
    with tempfile.TemporaryDirectory(prefix="codemode-skills-") as work:
        root = Path(work)
        (root / sk.SKILLS_DIR).mkdir()
        (root / CODEMODE_DTS).write_text(sk.strip_skills(declarations_dts), encoding="utf-8")
        for skill in skills:
            (root / skill.file).write_text(skill.text, encoding="utf-8")
        try:
            done = subprocess.run(
                [compiler.node, str(SKILLS_TSC_JS), str(compiler.typescript), str(root)],
                capture_output=True,
                timeout=SKILLS_CHECK_TIMEOUT_S,
                stdin=subprocess.DEVNULL,
                env={**os.environ, "NODE_OPTIONS": ""},
            )
        except subprocess.TimeoutExpired:
            raise UserError(
                f"the type check of skills/ did not finish within {SKILLS_CHECK_TIMEOUT_S:.0f} s"
            ) from None
        if done.returncode != 0 or len(done.stdout) > MAX_CHECK_OUTPUT_BYTES:
            tail = done.stderr.decode(errors="replace")[-800:]
            raise UserError(
                f"the type check of skills/ failed: {tail.strip() or f'exit {done.returncode}'}",
                hint="check that the TypeScript it found works (`tsc --version`)",
            )
        answer = json.loads(done.stdout)
    return SkillCheck(list(answer["diagnostics"]), dict(answer["declarations"]))


def runnable_js(skill: sk.Skill) -> str:
    """The JavaScript a run imports for `skill`: its types erased, every position kept."""
    erased = erase_types(skill.text)
    if erased.diagnostics:
        first = erased.diagnostics[0]
        raise UserError(
            f"{skill.file}:{first.get('path', '1:1')}: {first.get('message')}",
            hint=str(first.get("hint") or "write TypeScript whose types can be erased"),
        )
    return erased.code


def fail_on_errors(result: SkillCheck, what: str) -> None:
    errors = result.errors
    if errors:
        shown = render(errors[:MAX_SHOWN_ERRORS])
        more = (
            f"\n  ... and {len(errors) - MAX_SHOWN_ERRORS} more"
            if len(errors) > MAX_SHOWN_ERRORS
            else ""
        )
        raise UserError(
            f"{what}: {len(errors)} type error(s) in skills/:\n  " + "\n  ".join(shown) + more,
            hint="fix the skill (a tool it calls may have changed: see `codemode-gen generate`'s drift report), "
            "or remove it from skills/",
        )


def with_skills(
    outputs: Outputs,
    project_dir: Path,
    *,
    roots: Sequence[Path] = (),
    out_dir: Path | None = None,
    notes: list[str] | None = None,
) -> Outputs:
    """`outputs` plus the project's skills, type-checked against `outputs`' codemode.d.ts; a
    UserError listing `file:line:col` of every error when one does not check (nothing written).

    Without a TypeScript compiler (a fresh machine running the demo, no npm), `generate` still
    works when out/ already holds these very skills checked against these very declarations: the
    compiler would write the same files, so they are kept (a note in `notes` says so). Anything
    else needs the compiler, and the error says how to get one."""
    skills = sk.load_skills(project_dir)
    if not skills:
        return outputs
    from codemode_gen.runtime.host.tscompiler import CompilerNotFound

    try:
        result = check_skills(skills, outputs.files[CODEMODE_DTS], roots=roots)
    except CompilerNotFound as missing:
        kept = _checked_before(outputs, skills, out_dir) if out_dir is not None else None
        if kept is None:
            raise UserError(
                f"{missing.message} — needed because skills/ or the declarations they use changed since out/ was "
                "written",
                hint=missing.hint,
            ) from None
        if notes is not None:
            notes.append(
                f"skills/ not re-checked (no TypeScript here): out/ holds its {len(skills)} skill(s) "
                "checked against these same declarations; " + (missing.hint or "")
            )
        return kept
    fail_on_errors(result, "generate")
    return sk.add_skills(
        outputs, skills, result.declarations, {s.name: runnable_js(s) for s in skills}
    )


def _checked_before(outputs: Outputs, skills: Sequence[sk.Skill], out_dir: Path) -> Outputs | None:
    """`outputs` with out/'s skill files as they are, when out/ was generated from these same
    skill sources (manifest `sourceHash`) and these same declarations (codemode.d.ts without its
    skills part); None otherwise, or when a file is missing or unreadable."""
    from codemode_gen.generator.manifest import MANIFEST_FILE, dump_manifest

    try:
        old_dts = (out_dir / CODEMODE_DTS).read_text(encoding="utf-8")
        old_manifest = json.loads((out_dir / MANIFEST_FILE).read_text(encoding="utf-8"))
        entries = skill_entries(old_manifest)
        if sk.strip_skills(old_dts).rstrip("\n") != outputs.files[CODEMODE_DTS].rstrip("\n"):
            return None
        if {str(e["name"]): e.get("sourceHash") for e in entries} != {
            s.name: s.digest for s in skills
        }:
            return None
        files = dict(outputs.files)
        for skill in skills:
            for suffix in (".d.ts", ".js"):
                rel = f"{sk.SKILLS_DIR}/{skill.name}{suffix}"
                path = out_dir / rel
                if path.is_symlink() or path.stat().st_size > MAX_KEPT_FILE_BYTES:
                    return None
                files[rel] = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    files[CODEMODE_DTS] = old_dts
    manifest = {**outputs.manifest, "skills": [dict(e) for e in entries]}
    files[MANIFEST_FILE] = dump_manifest(manifest)  # type: ignore[arg-type]
    return replace(outputs, files=files, manifest=manifest)  # type: ignore[arg-type]


def skill_entries(manifest: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    """The manifest's valid skill entries (a hand-edited entry with a bad name is left out)."""
    if not manifest:
        return []
    found = manifest.get("skills")
    if not isinstance(found, list):
        return []
    return [
        e
        for e in found
        if isinstance(e, Mapping) and isinstance(e.get("name"), str) and sk.NAME_RE.match(e["name"])
    ]


def skill_modules(out_dir: Path, manifest: Mapping[str, Any] | None) -> dict[str, str]:
    """specifier -> source of every skill out/ holds (read at each call: a skill is source, §1.4)."""
    modules: dict[str, str] = {}
    for entry in skill_entries(manifest):
        path = out_dir / sk.SKILLS_DIR / f"{entry['name']}.js"
        try:
            if path.is_symlink() or path.stat().st_size > MAX_MODULE_BYTES:
                continue
            modules[sk.SKILL_PREFIX + entry["name"]] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
    return modules


def imported_skill_code(code: str, modules: Mapping[str, str]) -> str:
    """The sources of the skills `code` imports, transitively (for choosing which servers a run
    connects: a skill's imports are the run's imports)."""
    seen: set[str] = set()
    todo = [spec for spec in sk.module_imports(code) if spec in modules]
    parts = []
    while todo:
        spec = todo.pop()
        if spec in seen:
            continue
        seen.add(spec)
        parts.append(modules[spec])
        todo.extend(s for s in sk.module_imports(modules[spec]) if s in modules and s not in seen)
    return "\n".join(parts)


def check_against_out(
    out_dir: Path, *, roots: Sequence[Path] = (), tsc: str | None = None
) -> tuple[list[sk.Skill], SkillCheck]:
    """Type-check the skills beside `out_dir` against its codemode.d.ts (`check`, `skill test`)."""
    declarations = out_dir / CODEMODE_DTS
    if not declarations.is_file():
        raise UserError(
            f"{declarations}: not found; there is nothing to check skills against",
            hint="run `codemode-gen generate` first, or pass --out to the generated folder",
        )
    skills = sk.load_skills(Path(os.path.abspath(out_dir)).parent)
    return skills, check_skills(
        skills, declarations.read_text(encoding="utf-8"), roots=roots, tsc=tsc
    )


def test_scripts(project_dir: Path, skill: sk.Skill) -> list[tuple[str, str]]:
    """(label, script) for each example of `skill`: its doc comment's @example blocks (run with
    the function imported) and its skills/<name>.test.ts|js file (run as written)."""
    scripts = [
        (
            f"{skill.file} @example {i + 1}",
            f'import {{ {skill.function} }} from "{skill.specifier}";\n{example}\n',
        )
        for i, example in enumerate(skill.examples)
    ]
    test = sk.test_file(project_dir, skill.name)
    if test is not None:
        rel = f"{sk.SKILLS_DIR}/{test.name}"
        scripts.append((rel, sk.read_skill_file(test, rel)))
    return scripts


# ------------------------------------------------------------------------------ saveSkill (serve --skills-writable)

#: The module a run imports `saveSkill` from (only on a host started with --skills-writable).
SKILLS_MODULE = "@codemode/skills"
SKILLS_MODULE_SOURCE = """// @codemode/skills (serve --skills-writable): propose a skill for the repository.
import { callTool as __callTool } from "@codemode/host";

/** Propose skills/<name>.ts|js; written only once the user approves it (never overwrites). */
export async function saveSkill(input) {
  return __callTool("@skills", "saveSkill", input);
}
"""
#: Its declaration (codemode.d.ts does not carry it: only a writable host offers it).
SKILLS_MODULE_DTS = """declare module "@codemode/skills" {
  /** Propose a skill (skills/<name>.ts|js: one documented async function); the user approves it or not. */
  export function saveSkill(input: { name: string; source: string; lang?: "ts" | "js" }): Promise<{ path: string; written: true }>;
}
"""


class SkillSaver:
    """What `saveSkill` may write, and where: skills/ beside out/ (runtime/host/bridge.py asks first)."""

    def __init__(self, project_dir: Path) -> None:
        from codemode_gen.config import ServerConfig

        self.project_dir = project_dir
        self.config = ServerConfig(id="skills", transport="stdio")

    def check(self, proposal: Any) -> tuple[tuple[str, str] | None, dict[str, Any]]:
        """(None, the arguments shown to the person) for a proposal that could be written, else
        ((what is wrong, the fix), {})."""
        usage = 'call saveSkill({ name: "plan_week", source: "/** What it does. */ export async function plan_week(input) {...}", lang: "ts" })'
        if not isinstance(proposal, Mapping):
            return ("the input must be an object { name, source, lang? }", usage), {}
        name, source, lang = (
            proposal.get("name"),
            proposal.get("source"),
            proposal.get("lang", "ts"),
        )
        if not isinstance(name, str) or not isinstance(source, str) or lang not in ("ts", "js"):
            return ('name and source must be strings and lang "ts" or "js"', usage), {}
        extra = sorted(set(proposal) - {"name", "source", "lang"})
        if extra:
            return (f"unknown field(s) {', '.join(extra)}", usage), {}
        try:
            sk.check_name(name)
            if len(source.encode("utf-8", "surrogatepass")) > sk.MAX_SKILL_BYTES:
                raise UserError(
                    f"the source is larger than a skill may be ({sk.MAX_SKILL_BYTES} bytes)",
                    hint="a skill is one function a person reviews: keep data out of it",
                )
            sk.parse_skill(name, f"{sk.SKILLS_DIR}/{name}.{lang}", source)
            existing = [
                f"{sk.SKILLS_DIR}/{name}{s}"
                for s in sk.SUFFIXES
                if (sk.skills_dir(self.project_dir) / f"{name}{s}").exists()
            ]
            if existing:
                raise UserError(
                    f"{existing[0]} exists already", hint="propose it under another name"
                )
        except UserError as exc:
            return (exc.message, exc.hint or usage), {}
        return None, {
            "name": name,
            "lang": lang,
            "path": f"{sk.SKILLS_DIR}/{name}.{lang}",
            "source": source,
        }

    def write(self, arguments: dict[str, Any]) -> dict[str, Any]:
        target = sk.write_skill(
            self.project_dir, arguments["name"], arguments["source"], lang=arguments["lang"]
        )
        return {"path": f"{sk.SKILLS_DIR}/{target.name}", "written": True}
