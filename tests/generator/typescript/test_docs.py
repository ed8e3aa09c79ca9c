"""generator/typescript/docs.py: doc comments from schema annotations; generated titles dropped."""

from __future__ import annotations

import pytest

from codemode_gen.generator.typescript import NameScope, translate
from codemode_gen.generator.typescript.docs import is_generated_title


@pytest.mark.parametrize(
    ("title", "names", "generated"),
    [
        ("addArguments", ["git_add", "GitAddInput"], True),  # the function, minus the git_ prefix
        ("navigateParams", ["browser_navigate"], True),
        ("git_addArguments", ["git_add"], True),
        ("Arguments", ["git_add"], False),  # nothing but a suffix
        ("adArguments", ["git_add"], False),  # a stem shorter than MIN_TITLE_STEM says little
        ("Address", ["git_add"], False),  # a word of its own, no generated suffix
        ("addArguments", ["git_commit"], False),
    ],
)
def test_titles_named_after_a_prefixed_tool_count_as_generated(
    title: str, names: list[str], generated: bool
) -> None:
    """Frameworks title a tool's input model after the function (`addArguments`), which the
    server prefixes in the tool name (`git_add`): such a title repeats the name and is dropped."""
    assert is_generated_title(title, names) is generated


def test_a_generated_title_for_a_prefixed_tool_is_not_printed() -> None:
    schema = {
        "type": "object",
        "title": "addArguments",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }
    result = translate(schema, "GitAddInput", NameScope(), derived_from=("git_add",))
    assert result.decls[0].doc == ()
    kept = translate(
        dict(schema, title="Stage files"), "GitAddInput", NameScope(), derived_from=("git_add",)
    )
    assert kept.decls[0].doc == ("Stage files",)
