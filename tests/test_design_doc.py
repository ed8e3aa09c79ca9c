"""docs/DESIGN.md stays a true map: every path and code name it writes in backticks exists, every
relative link resolves (and so does every link from the other docs into it), and it stays short.

The old DESIGN.md copied the code and drifted (methods on the wrong class, a function nothing
called, a broken link). A map that names only what exists cannot say those things: whatever a
change renames, this test names the line of the map to update."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from tests.architecture import REPO, package_dirs, package_modules

DESIGN = REPO / "docs" / "DESIGN.md"
#: A map, not a copy (issue 24): past this it is copying the code again.
MAX_DESIGN_LINES = 400

_FENCE = re.compile(r"^```.*?^```", re.M | re.S)
_SPAN = re.compile(r"`([^`\n]+)`")
_LINK = re.compile(r"\[[^\]\n]*\]\(([^)\s]+)\)")
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_PATH = re.compile(r"[\w.@<>*-]*(?:/[\w.@<>*-]*)+|[\w.<>*-]+\.(?:py|js|md|json|jsonl|toml|j2|ts)")
_OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
# Text the JavaScript side and the templates define (classes of @codemode/errors, module names).
_JS_SOURCES = ("runtime/js/*.js", "templates/*.j2")


def spans(text: str) -> Iterator[tuple[int, str]]:
    """(line, text) of every inline code span outside fenced blocks."""
    for match in _SPAN.finditer(_FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)):
        yield text.count("\n", 0, match.start()) + 1, match.group(1)


@cache
def python_names() -> tuple[
    frozenset[str], dict[str, frozenset[str]], dict[str, frozenset[str]], str
]:
    """(every name defined at module or class level, class -> its members, module stem -> its
    top-level names: of the package and its tests; every string constant of the package joined)."""
    names: set[str] = set()
    members: dict[str, set[str]] = {}
    modules: dict[str, set[str]] = {}
    strings: list[str] = []

    def targets(node: ast.stmt) -> Iterator[str]:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            yield node.name
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                yield from (n.id for n in ast.walk(target) if isinstance(n, ast.Name))
        elif isinstance(node, ast.AnnAssign | ast.AugAssign) and isinstance(node.target, ast.Name):
            yield node.target.id

    package = package_modules()
    for path in [*package, *sorted((REPO / "tests").rglob("*.py"))]:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        top = modules.setdefault(path.stem, set())
        for statement in tree.body:
            top.update(targets(statement))
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                inside = members.setdefault(node.name, set())
                for item in node.body:
                    inside.update(targets(item))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str) and path in package:
                strings.append(node.value)
        names |= top
    return (
        frozenset(names),
        {k: frozenset(v) for k, v in members.items()},
        {k: frozenset(v) for k, v in modules.items()},
        "\n".join(strings),
    )


@cache
def js_words() -> frozenset[str]:
    words: set[str] = set()
    for pattern in _JS_SOURCES:
        for path in REPO.glob(pattern):
            words.update(re.findall(r"[\w$@/.-]+", path.read_text(encoding="utf-8")))
            words.update(re.findall(r"\w+", path.read_text(encoding="utf-8")))
    return frozenset(words)


def symbol_exists(span: str) -> bool:
    """A Python name defined in the package or its tests (`CodeMode`, `Sandbox.run`,
    `response.diagnostic`), a module of the package (`codemode_gen.generator.build`), a name the
    sandbox's JavaScript or the templates define (`ToolCallError`), or a string the package spells
    (`SYNTAX_ERROR`, `timeoutMs`, `codemode.run`)."""
    names, members, modules, strings = python_names()
    if span in package_names():
        return True
    head, _, rest = span.partition(".")
    if rest and head[0].islower() and head not in (*modules, *members, "codemode_gen"):
        return True  # an expression of a script (`notes.result`), not a name of the code
    if not rest and span in names:
        return True
    if (
        rest
        and "." not in rest
        and (rest in members.get(head, ()) or rest in modules.get(head, ()))
    ):
        return True
    if span in js_words():
        return True
    return re.search(rf"(?<![\w.]){re.escape(span)}(?![\w])", strings) is not None


@cache
def package_names() -> frozenset[str]:
    """Dotted names of the package's packages and modules."""
    found = set()
    for package, folder in package_dirs().items():
        found.add(package)
        found.update(f"{package}.{path.stem}" for path in folder.glob("*.py"))
    return frozenset(found)


def path_exists(span: str) -> bool:
    """A repository path; `<placeholder>` and `*` stand for any name (`out/servers/<path>.js`).
    A bare file name (`bridge.py`, in a table row of its folder) is a file of a package folder,
    `@codemode/…` a module the JavaScript side defines, `/healthz` a path the package serves."""
    pattern = re.sub(r"<[^>]*>", "*", span).rstrip("/")
    if pattern.startswith("@"):
        return pattern in js_words()
    if pattern.startswith("/"):
        return pattern in python_names()[3].split("\n")
    if "/" not in pattern:
        folders = [*package_dirs().values(), REPO / "runtime" / "js", REPO]
        return any((folder / pattern).exists() for folder in folders)
    if not any(ch in pattern for ch in "*?["):
        return (REPO / pattern).exists()
    return any(REPO.glob(pattern))


def cli_options() -> set[str]:
    text = "\n".join(
        path.read_text(encoding="utf-8") for path in (REPO / "codemode_gen" / "cli").glob("*.py")
    )
    return set(re.findall(r'"(--[a-z][a-z0-9-]*)', text)) | {"--help"}


def problems_of(text: str, name: str = "DESIGN.md") -> list[str]:
    problems = []
    options = cli_options()
    for line, span in spans(text):
        bare = span.strip()
        is_path = " " not in bare and _PATH.fullmatch(bare) is not None
        if _IDENTIFIER.fullmatch(bare) and not is_path and not symbol_exists(bare):
            problems.append(f"{name}:{line}: `{bare}` names nothing in the package")
        elif is_path and not path_exists(bare):
            problems.append(f"{name}:{line}: `{bare}` is no path of the repository")
        for option in _OPTION.findall(bare):
            if option not in options:
                problems.append(f"{name}:{line}: `{bare}`: no command has the option {option}")
    return problems


def test_every_path_and_symbol_in_design_exists() -> None:
    problems = problems_of(DESIGN.read_text(encoding="utf-8"))
    assert not problems, "\n".join(problems)


def test_every_path_and_symbol_in_contributing_exists() -> None:
    """CONTRIBUTING.md walks a newcomer through the files to edit: each must be there."""
    problems = problems_of(
        (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8"), "CONTRIBUTING.md"
    )
    assert not problems, "\n".join(problems)


def test_the_check_catches_what_drifted_before() -> None:
    """The kinds of claims the old DESIGN.md got wrong fail here."""
    assert problems_of("`runtime/bridge.py` and `runtime/host/bridge.py`") == [
        "DESIGN.md:1: `runtime/bridge.py` is no path of the repository"
    ]
    assert problems_of("`ApprovalGate.decide`, `Sandbox.run`, `CodeMode.from_config`") == []
    assert problems_of("`Bridge.from_config`")  # a method on the wrong class
    assert problems_of("`NoSuchHelper`")
    assert problems_of("`response.no_such_function`")
    assert problems_of("`codemode_gen.generator.no_such_module`")
    assert problems_of("`serve --no-such-option`")
    assert problems_of("`out/servers/<path>.js` `tests/data/mistakes/`") == []


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = _FENCE.sub("", path.read_text(encoding="utf-8"))
    return {slug(m.group(1)) for m in re.finditer(r"^#+\s+(.+?)\s*$", text, re.M)}


def broken_links(doc: Path, only_to: Path | None = None) -> list[str]:
    broken = []
    text = _FENCE.sub("", doc.read_text(encoding="utf-8"))
    for match in _LINK.finditer(text):
        target = match.group(1)
        if re.match(r"[a-z]+:", target):
            continue
        file, _, anchor = target.partition("#")
        resolved = (doc.parent / file).resolve() if file else doc
        if only_to is not None and resolved != only_to:
            continue
        where = f"{doc.relative_to(REPO)}: ({target})"
        if not resolved.exists():
            broken.append(f"{where}: no such file")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            broken.append(f"{where}: no heading with the anchor #{anchor}")
    return broken


def test_design_and_contributing_have_no_broken_relative_links() -> None:
    assert broken_links(DESIGN) + broken_links(REPO / "CONTRIBUTING.md") == []


@pytest.mark.parametrize(
    "doc",
    [REPO / "README.md", REPO / "CONTRIBUTING.md", *sorted((REPO / "docs").glob("*.md"))],
    ids=lambda p: p.name,
)
def test_links_into_design_resolve(doc: Path) -> None:
    assert broken_links(doc, only_to=DESIGN.resolve()) == []


def test_design_is_a_map_not_a_copy() -> None:
    lines = DESIGN.read_text(encoding="utf-8").count("\n")
    assert lines <= MAX_DESIGN_LINES, f"docs/DESIGN.md has {lines} lines: link to the code instead"
