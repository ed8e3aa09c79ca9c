"""Spec §6.1 (tool name -> export identifier) and §5.0.1 (server id -> module path)."""

from __future__ import annotations

import random

import pytest

from codemode_gen.generator.names import (
    RESERVED_IDENTIFIERS,
    SPEC_RESERVED_WORDS,
    assign_export_names,
    assign_module_paths,
    is_identifier,
    module_path,
    pascal_case,
    tool_identifier,
    unique_name,
)


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("get_note", "get_note"),
        ("notes.search", "notes_search"),
        ("list-files", "list_files"),
        ("a b/c:d", "a_b_c_d"),
        ("$dollar", "$dollar"),
        ("123tool", "_123tool"),
        ("9", "_9"),
        ("", "_"),
        ("日本", "__"),
        ("café", "caf_"),
    ],
)
def test_s6_1_illegal_chars_and_leading_digit(name: str, expected: str) -> None:
    assert tool_identifier(name) == expected


@pytest.mark.parametrize("word", sorted(SPEC_RESERVED_WORDS))
def test_s6_1_reserved_words_get_underscore_suffix(word: str) -> None:
    assert tool_identifier(word) == word + "_"


@pytest.mark.parametrize(
    "word",
    [
        "enum",
        "implements",
        "interface",
        "package",
        "private",
        "protected",
        "public",
        "arguments",
        "eval",
    ],
)
def test_strict_mode_reserved_words_are_suffixed_too(word: str) -> None:
    # ES modules are strict code: `export async function eval() {}` is a SyntaxError there.
    assert tool_identifier(word) == word + "_"


@pytest.mark.parametrize(
    "name", ["__meta__", "__callTool", "__deepFreeze", "__freeze", "__frozenJson", "__toolFunction"]
)
def test_module_internal_bindings_are_never_redeclared(name: str) -> None:
    assert tool_identifier(name) == name + "_"
    assert assign_export_names([name, "other"])[name] == name + "_"


def test_s6_1_reserved_check_happens_after_sanitising() -> None:
    assert tool_identifier("de-lete") == "de_lete"
    assert tool_identifier("class") == "class_"
    assert tool_identifier("Class") == "Class"  # case-sensitive, like JS


def test_s6_1_collisions_get_double_underscore_suffix_in_alphabetical_order() -> None:
    names = ["notes_search", "notes.search", "notes-search", "notes search"]
    mapping = assign_export_names(names)
    # sorted canonical names: "notes search" < "notes-search" < "notes.search" < "notes_search"
    assert mapping == {
        "notes search": "notes_search",
        "notes-search": "notes_search__2",
        "notes.search": "notes_search__3",
        "notes_search": "notes_search__4",
    }


def test_s6_1_collision_order_is_independent_of_input_order() -> None:
    names = ["a-b", "a.b", "a_b", "a b", "class", "class_", "1x", "_1x"]
    expected = assign_export_names(names)
    for seed in range(5):
        shuffled = names[:]
        random.Random(seed).shuffle(shuffled)
        assert assign_export_names(shuffled) == expected
    assert len(set(expected.values())) == len(names)


def test_s6_1_a_clean_name_that_looks_suffixed_keeps_it() -> None:
    mapping = assign_export_names(["a-b", "a.b", "a_b__2"])
    assert mapping["a_b__2"] == "a_b__2"
    assert mapping["a-b"] == "a_b"
    assert mapping["a.b"] == "a_b__3"


def test_s6_1_reserved_word_and_its_suffixed_form_collide_deterministically() -> None:
    mapping = assign_export_names(["class", "class_"])
    assert mapping == {"class": "class_", "class_": "class___2"}


def test_every_export_name_is_a_valid_unreserved_identifier() -> None:
    names = ["", "0", "-", "a" * 3, "x\u2028y", "*/", "__proto__", "constructor", "yield", "let"]
    for ident in assign_export_names(names).values():
        assert is_identifier(ident)
        assert ident not in RESERVED_IDENTIFIERS


@pytest.mark.parametrize(
    ("server_id", "expected"),
    [
        ("google-drive", "google-drive"),
        ("Google Drive", "google-drive"),
        ("My_Server.v2", "my-server-v2"),
        ("--a--b--", "a-b"),
        ("a  --  b", "a-b"),
        ("UPPER", "upper"),
        ("日本", "server"),
        ("---", "server"),
        ("", "server"),
    ],
)
def test_s5_0_1_module_path_normalisation(server_id: str, expected: str) -> None:
    assert module_path(server_id) == expected


def test_s5_0_1_collisions_get_double_dash_suffix_alphabetically() -> None:
    mapping = assign_module_paths(["My Server", "my-server", "my_server", "other"])
    assert mapping == {
        "My Server": "my-server",
        "my-server": "my-server--2",
        "my_server": "my-server--3",
        "other": "other",
    }
    assert assign_module_paths(["my_server", "other", "my-server", "My Server"]) == mapping


def test_s5_0_1_fallback_path_collides_like_any_other() -> None:
    assert assign_module_paths(["server", "日本"]) == {"server": "server", "日本": "server--2"}


@pytest.mark.parametrize(
    ("ident", "expected"),
    [
        ("get_note", "GetNote"),
        ("notes_search__2", "NotesSearch2"),
        ("_123tool", "123tool"),  # NameScope.claim makes it `T123tool…`
        ("class_", "Class"),
        ("_", ""),  # build.py falls back to `Tool`
        ("$x", "X"),
        ("getURL", "GetURL"),
        ("create-note v2", "CreateNoteV2"),  # a $defs key or title: any non-alphanumeric splits
        ("日本語 name", "Name"),
    ],
)
def test_pascal_case_type_stems(ident: str, expected: str) -> None:
    assert pascal_case(ident) == expected


def test_unique_name_takes_the_smallest_free_suffix() -> None:
    assert unique_name("a", set()) == "a"
    assert unique_name("a", {"a", "a2", "a4"}) == "a3"
    assert unique_name("p", {"p", "p--2"}, "--") == "p--3"


def test_host_export_names_stay_clean_because_the_module_aliases_its_imports() -> None:
    assert assign_export_names(["callTool", "deepFreeze"]) == {
        "callTool": "callTool",
        "deepFreeze": "deepFreeze",
    }
