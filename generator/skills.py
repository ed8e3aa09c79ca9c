"""Skills: scripts that worked, kept as typed functions of the repository (skills/<name>.ts|js).

A skill is an ES module in the project's skills/ folder exporting one documented async function;
it imports tools from `@codemode/servers/*` (and other skills from `@codemode/skills/*`) like any
script. It is source, not state (§1.4): `generate` type-checks it against out/'s declarations and
writes, next to the server modules, the JavaScript a run imports (out/skills/<name>.js) and its
declaration (`declare module "@codemode/skills/<name>"` in codemode.d.ts and out/skills/<name>.d.ts),
with a `skills` list in the manifest. A run imports it as it imports a server module, so its tool
calls are the run's own calls (same bridge: toolTrace, approvals, limits).

This module reads the skills/ folder (every bound named below, every refusal a UserError that says
the fix) and builds their out/ files from what the caller found: the type check itself is
runtime/host/skills.py's (it runs TypeScript, which the generator does not).
"""

from __future__ import annotations

import contextlib
import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemode_gen.errors import UserError

if TYPE_CHECKING:
    from codemode_gen.generator.build import Outputs

#: The project folder skills live in (beside codemode.toml) and out/'s folder for their files.
SKILLS_DIR = "skills"
#: What scripts import a skill as.
SKILL_PREFIX = "@codemode/skills/"
#: A skill's name: its file name, module name and a JavaScript identifier at once. Bounds what a
#: name can carry into paths and declarations (no `/`, `..`, dots, spaces or upper case that
#: collides on case-insensitive file systems).
NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,47}$")
#: Bounds one skill's source: a skill is a function a person reviews, and every run and check
#: reads it; a megabyte file is a mistake or an attack on the prompt and the checker.
MAX_SKILL_BYTES = 64 * 1024
#: Bounds how many skills one project has (each is a module every run may import and a line of
#: the prompt's ladder).
MAX_SKILLS = 100
#: The description (doc comment) kept in the manifest and the prompt, at most.
MAX_DESCRIPTION_CHARS = 400
#: Examples taken from one skill's doc comment (`@example` blocks) for `skill test`.
MAX_EXAMPLES = 8
SUFFIXES = (".ts", ".js")
TEST_SUFFIXES = (".test.ts", ".test.js")
#: Lines that mark the skills' part of codemode.d.ts (a check of skills/ leaves it out).
DTS_BEGIN = '// ---- Skills (skills/*.ts|js, see README "Skills"): functions of this repository.'
DTS_END = "// ---- end of skills"

_IMPORT_RE = re.compile(
    r"""(?:^|[\s;])(?:import|export)\b[^"';]*?\bfrom\s*["']([^"'\n]+)["']|\bimport\s*["']([^"'\n]+)["']"""
)
_DYNAMIC_IMPORT_RE = re.compile(r"""\bimport\s*\(\s*["']([^"'\n]+)["']""")
_DOC_RE = re.compile(
    r"/\*\*(.*?)\*/\s*export\s+(?:default\s+)?async\s+function\s+([A-Za-z_$][\w$]*)", re.S
)
_EXPORT_FN_RE = re.compile(r"\bexport\s+(?:default\s+)?async\s+function\s+([A-Za-z_$][\w$]*)")


@dataclass(frozen=True)
class Skill:
    """One skill file, read and validated."""

    name: str
    file: str  # relative to the project: "skills/<name>.ts"
    text: str
    lang: str  # "ts" or "js"
    function: str  # the exported async function's name
    description: str
    examples: tuple[str, ...]

    @property
    def specifier(self) -> str:
        return SKILL_PREFIX + self.name

    @property
    def digest(self) -> str:
        return "sha256:" + hashlib.sha256(self.text.encode()).hexdigest()

    def imports(self) -> list[str]:
        return module_imports(self.text)


def module_imports(code: str) -> list[str]:
    """Module specifiers `code` imports statically or with a literal `import("…")`, in order."""
    found = [a or b for a, b in _IMPORT_RE.findall(code)] + _DYNAMIC_IMPORT_RE.findall(code)
    return list(dict.fromkeys(found))


def check_name(name: str) -> str:
    """`name` if it can be a skill's name, else a UserError saying the rule."""
    if not NAME_RE.match(name):
        shown = name if len(name) <= 60 else name[:60] + "…"
        raise UserError(
            f"{shown!r} is not a valid skill name",
            hint="use 1-48 characters: a lower-case letter, then lower-case letters, digits or _ (e.g. plan_week)",
        )
    return name


def skills_dir(project_dir: Path) -> Path:
    return project_dir / SKILLS_DIR


def _doc_text(raw: str) -> tuple[str, tuple[str, ...]]:
    """A doc comment's description (its text before the first @tag) and its @example blocks."""
    lines = [re.sub(r"^\s*\* ?", "", line) for line in raw.strip("*").splitlines()]
    text = "\n".join(lines).strip()
    parts = re.split(r"(?m)^@", text)
    description = " ".join(parts[0].split())
    examples = []
    for part in parts[1:]:
        if part.startswith("example"):
            body = part[len("example") :].strip()
            body = re.sub(r"^```\w*\n|\n?```$", "", body).strip()
            if body:
                examples.append(body)
    return description[:MAX_DESCRIPTION_CHARS], tuple(examples[:MAX_EXAMPLES])


def parse_skill(name: str, file: str, text: str) -> Skill:
    """A skill from its source, or a UserError naming `file` and what it lacks."""
    exported = _EXPORT_FN_RE.findall(text)
    if len(exported) != 1:
        raise UserError(
            f"{file}: a skill exports exactly one async function (found {len(exported)})",
            hint="write `/** what it does */ export async function "
            + name
            + "(input: {...}): Promise<...> { ... }`",
        )
    doc = _DOC_RE.search(text)
    if doc is None or doc.group(2) != exported[0]:
        raise UserError(
            f"{file}: the exported function {exported[0]} has no doc comment",
            hint="put a /** ... */ comment saying what it does right before `export async function`; "
            "it is the skill's description in the prompt and discovery",
        )
    description, examples = _doc_text(doc.group(1))
    if not description:
        raise UserError(
            f"{file}: the doc comment of {exported[0]} has no description",
            hint="start the /** ... */ comment with a sentence saying what the skill does",
        )
    return Skill(
        name, file, text, "ts" if file.endswith(".ts") else "js", exported[0], description, examples
    )


def read_skill_file(path: Path, rel: str) -> str:
    """A skill's text: a regular file (not a link), at most MAX_SKILL_BYTES, UTF-8."""
    try:
        if path.is_symlink() or not path.is_file():
            raise UserError(
                f"{rel}: not a regular file (a skill is a file of the repository, not a link)",
                hint=f"replace {rel} with the file itself",
            )
        size = path.stat().st_size
        if size > MAX_SKILL_BYTES:
            raise UserError(
                f"{rel}: {size} bytes, more than a skill may have ({MAX_SKILL_BYTES})",
                hint="a skill is one function a person reviews: split it, or keep data out of it",
            )
        data = path.read_bytes()[: MAX_SKILL_BYTES + 1]
    except OSError as exc:
        raise UserError(f"{rel}: cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise UserError(f"{rel}: not UTF-8 text", hint="save it as UTF-8") from None


def load_skills(project_dir: Path) -> list[Skill]:
    """The project's skills (skills/<name>.ts|js, sorted by name); [] when it has no skills/.

    Test files (`<name>.test.ts|js`), hidden files and README files are not skills; anything
    else that is not a valid skill is refused with its path, so that nothing is silently left out."""
    folder = skills_dir(project_dir)
    if not folder.is_dir():
        return []
    if folder.is_symlink():
        raise UserError(
            f"{SKILLS_DIR}/: is a link", hint=f"make {SKILLS_DIR}/ a folder of the repository"
        )
    found: dict[str, Skill] = {}
    entries = sorted(folder.iterdir())
    for entry in entries:
        base = entry.name
        if (
            base.startswith(".")
            or base.lower().startswith("readme")
            or base.endswith(TEST_SUFFIXES)
        ):
            continue
        rel = f"{SKILLS_DIR}/{base}"
        stem, dot, suffix = base.rpartition(".")
        if not dot or f".{suffix}" not in SUFFIXES:
            raise UserError(
                f"{rel}: not a skill (a skill is skills/<name>.ts or skills/<name>.js)",
                hint=f"move it out of {SKILLS_DIR}/",
            )
        check_name(stem)
        if stem in found:
            raise UserError(
                f"{SKILLS_DIR}/{stem}.ts and {SKILLS_DIR}/{stem}.js: two skills named {stem}",
                hint="keep one of them",
            )
        if len(found) >= MAX_SKILLS:
            raise UserError(
                f"{SKILLS_DIR}/: more than {MAX_SKILLS} skills",
                hint="remove the ones no longer used",
            )
        found[stem] = parse_skill(stem, rel, read_skill_file(entry, rel))
    return [found[name] for name in sorted(found)]


def test_file(project_dir: Path, name: str) -> Path | None:
    """skills/<name>.test.ts|js when there is one."""
    for suffix in TEST_SUFFIXES:
        candidate = skills_dir(project_dir) / f"{name}{suffix}"
        if candidate.is_file() and not candidate.is_symlink():
            return candidate
    return None


def ambient_declaration(skill: Skill, emitted: str) -> str:
    """tsc's declaration of a skill's file, as the ambient module scripts import."""
    body = []
    in_example = False
    for line in emitted.splitlines():
        if not line.strip() or line.strip() == "export {};":
            continue
        # @example blocks are `skill test`'s (they call the function unimported): the prompt and
        # codemode.d.ts keep the description only.
        tag = re.match(r"\s*\*\s*@(\w+)", line)
        if tag is not None:
            in_example = tag.group(1) == "example"
        if line.strip().startswith("*/"):
            in_example = False
        if in_example:
            continue
        line = re.sub(r"^export declare ", "export ", line)
        line = re.sub(r"^declare ", "", line)
        body.append("  " + line)
    doc = f"/** Skill {skill.name} ({skill.file}): {skill.description} */"
    return f'{doc}\ndeclare module "{skill.specifier}" {{\n' + "\n".join(body) + "\n}"


def signature(emitted: str, function: str) -> str:
    """The one-line signature of the skill's function in tsc's declaration (for the prompt)."""
    text = " ".join(re.sub(r"/\*.*?\*/", " ", emitted, flags=re.S).split())
    found = re.search(r"export declare function " + re.escape(function) + r"\b", text)
    if found is None:
        return f"function {function}(input: unknown): Promise<unknown>;"
    depth = 0
    for i in range(found.end(), len(text)):
        ch = text[i]
        if ch in "({[<":
            depth += 1
        elif ch in ")}]>" and not (ch == ">" and text[i - 1] == "="):
            depth -= 1
        elif ch == ";" and depth == 0:
            line = text[found.start() + len("export declare ") : i + 1]
            return re.sub(r";\s*}", " }", re.sub(r"\{ ", "{ ", line))
    return f"function {function}(input: unknown): Promise<unknown>;"


def strip_skills(dts: str) -> str:
    """codemode.d.ts without its skills part (a check of skills/ declares them from their files)."""
    start = dts.find(DTS_BEGIN)
    end = dts.find(DTS_END)
    if start < 0 or end < start:
        return dts
    return dts[:start].rstrip("\n") + "\n" + dts[end + len(DTS_END) :].lstrip("\n")


def add_skills(
    outputs: Outputs,
    skills: Sequence[Skill],
    declarations: Mapping[str, str],
    runnable: Mapping[str, str],
) -> Outputs:
    """`outputs` with the skills' files: out/skills/<name>.js (`runnable`: its types erased),
    out/skills/<name>.d.ts, their ambient modules in codemode.d.ts, `skills` in the manifest."""
    from codemode_gen.generator.manifest import CODEMODE_DTS, MANIFEST_FILE, dump_manifest

    if not skills:
        return outputs
    files = dict(outputs.files)
    blocks = []
    entries: list[dict[str, Any]] = []
    for skill in skills:
        emitted = declarations.get(skill.name, "")
        block = ambient_declaration(skill, emitted)
        blocks.append(block)
        header = f"// Generated by codemode-gen from {skill.file} ({skill.digest}). Do not edit: run `codemode-gen generate`.\n"
        files[f"{SKILLS_DIR}/{skill.name}.d.ts"] = header + "\n" + block + "\n"
        # No header: the module keeps the source's lines, so stacks and diagnostics point at skills/.
        files[f"{SKILLS_DIR}/{skill.name}.js"] = runnable[skill.name]
        entries.append(
            {
                "name": skill.name,
                "specifier": skill.specifier,
                "source": skill.file,
                "sourceHash": skill.digest,
                "module": f"{SKILLS_DIR}/{skill.name}.js",
                "function": skill.function,
                "description": skill.description,
                "signature": signature(emitted, skill.function),
                "imports": skill.imports(),
                "examples": list(skill.examples),
            }
        )
    dts = files[CODEMODE_DTS].rstrip("\n")
    files[CODEMODE_DTS] = (
        dts + "\n\n" + DTS_BEGIN + "\n\n" + "\n\n".join(blocks) + "\n" + DTS_END + "\n"
    )
    manifest = {**outputs.manifest, "skills": entries}
    files[MANIFEST_FILE] = dump_manifest(manifest)  # type: ignore[arg-type]
    return replace(outputs, files=files, manifest=manifest)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------ saving a skill

_RESULT_RE = re.compile(r"globalThis\s*\.\s*__codemode_result__\s*=\s*")
_IMPORT_START_RE = re.compile(r"^\s*import\b(?!\s*\()")
_IMPORT_END_RE = re.compile(r"""(\bfrom\s*["'][^"']+["']|^\s*import\s*["'][^"']+["'])\s*;?\s*$""")


def _split_imports(code: str) -> tuple[list[str], list[str], list[str]]:
    """(leading comment lines, static import statements' lines, the rest)."""
    lines = code.splitlines()
    comments: list[str] = []
    imports: list[str] = []
    body: list[str] = []
    i = 0
    while (
        i < len(lines)
        and (not lines[i].strip() or lines[i].lstrip().startswith("//"))
        and not imports
    ):
        if lines[i].lstrip().startswith("//"):
            comments.append(lines[i].lstrip()[2:].strip())
        i += 1
    for j in range(i, len(lines)):
        line = lines[j]
        if body or not _IMPORT_START_RE.match(line):
            if not body and not line.strip() and not imports:
                continue
            body.append(line)
            continue
        imports.append(line)
        k = j
        while not _IMPORT_END_RE.search(lines[k]) and k + 1 < len(lines):
            k += 1
            imports.append(lines[k])
        lines[j + 1 : k + 1] = [""] * (k - j)  # consumed
    # Imports further down (after code) are still module-level: move them up too.
    rest: list[str] = []
    for line in body:
        (imports if _IMPORT_START_RE.match(line) and _IMPORT_END_RE.search(line) else rest).append(
            line
        )
    return comments, imports, rest


def skeleton(
    name: str, code: str, *, lang: str, origin: str, description: str | None = None
) -> str:
    """A skill made from a script that ran: its imports kept at the top, its body the body of
    `export async function <name>(input)`, what it set as `__codemode_result__` returned, its
    leading comment (or `description`) the doc comment. Parameters and result are left for the
    person who reviews it to type (`input: {}`, the result as the compiler infers it)."""
    comments, imports, body = _split_imports(code)
    text = (
        description
        or " ".join(c for c in comments if c and not c.startswith("codemode-gen "))
        or (f"TODO: say what {name} does (saved from {origin}).")
    )
    doc_lines = [
        "/**",
        *[f" * {line}" for line in _wrap(text)],
        " *",
        f" * Saved from {origin}. Review: type the parameters and the result, add an @example",
        " * that replays (`codemode-gen skill test`), then commit.",
        " */",
    ]
    inner = [("  " + line if line.strip() else "") for line in body]
    inner = [_RESULT_RE.sub("return ", line) for line in inner]
    while inner and not inner[-1].strip():
        inner.pop()
    if lang == "ts":
        head = f"export async function {name}(input: {{}} = {{}}) {{"
    else:
        head = f"export async function {name}(input = {{}}) {{"
        doc_lines[-1:] = [" * @param {{}} [input]", " */"]
    parts = [*imports, "" if imports else None, *doc_lines, head, "  void input;", *inner, "}", ""]
    return "\n".join(p for p in parts if p is not None)


def _wrap(text: str, width: int = 96) -> list[str]:
    words = text.split()
    lines: list[str] = []
    line = ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return [*lines, line] if line else lines


def write_skill(
    project_dir: Path, name: str, text: str, *, lang: str, replace_existing: bool = False
) -> Path:
    """Write skills/<name>.<lang> (validated first: name, size, one documented async function),
    atomically; refuses to overwrite a skill unless `replace_existing`."""
    import os
    import tempfile

    check_name(name)
    if lang not in ("ts", "js"):
        raise UserError(f"{lang!r}: a skill is TypeScript (ts) or JavaScript (js)")
    size = len(text.encode("utf-8"))
    if size > MAX_SKILL_BYTES:
        raise UserError(
            f"skill {name}: {size} bytes, more than a skill may have ({MAX_SKILL_BYTES})",
            hint="a skill is one function a person reviews: keep data out of it",
        )
    rel = f"{SKILLS_DIR}/{name}.{lang}"
    parse_skill(name, rel, text)
    folder = skills_dir(project_dir)
    if folder.is_symlink():
        raise UserError(
            f"{SKILLS_DIR}/: is a link", hint=f"make {SKILLS_DIR}/ a folder of the repository"
        )
    folder.mkdir(exist_ok=True)
    existing = [
        folder / f"{name}{suffix}" for suffix in SUFFIXES if (folder / f"{name}{suffix}").exists()
    ]
    if existing and not replace_existing:
        raise UserError(
            f"{SKILLS_DIR}/{existing[0].name} exists already",
            hint="pick another name, or pass --force to replace it",
        )
    target = folder / f"{name}.{lang}"
    fd, tmp = tempfile.mkstemp(prefix=f".{name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        for other in existing:
            if other != target:
                other.unlink()
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return target
