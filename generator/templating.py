"""The one Jinja environment over templates/: every generated text file is rendered here.

The templates own the layout (`generate`'s out/ files, the `codemode-gen types` .d.ts); this
module gives them what they share: the `js` filter for JSON values in generated code, and the
doc-comment helpers of the TypeScript printer, which sanitise every piece of server text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from typing import Any

import jinja2

from codemode_gen.error_classes import errors_declaration
from codemode_gen.generator.typescript.printer import doc_comment, joined_doc


def js_literal(value: Any) -> str:
    """A JS/TS literal for a JSON value: ASCII-only JSON, so no line terminator (U+2028/9), bidi
    control or other invisible character from a server can reach generated code raw."""
    return json.dumps(value, ensure_ascii=True, sort_keys=True, indent=2)


def js_json_string(value: Any) -> str:
    """A JS string literal holding a JSON value's compact JSON text (for `JSON.parse` in
    generated code): ASCII-only, like `js_literal`."""
    return json.dumps(json.dumps(value, ensure_ascii=True, sort_keys=True, separators=(",", ":")))


@cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("codemode_gen.templates", ""),
        undefined=jinja2.StrictUndefined,
        autoescape=False,  # the output is code, not HTML; every untrusted value goes through a filter
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters["js"] = js_literal
    env.filters["js_json_string"] = js_json_string
    env.globals["doc_comment"] = doc_comment
    env.globals["tool_doc"] = joined_doc
    env.globals["errors_declaration"] = errors_declaration
    return env


def render(template: str, **context: Any) -> str:
    return environment().get_template(template).render(**context)


def header_line(manifest: Mapping[str, Any], prefix: str = "//") -> str:
    """The generated-file header (templates/header.j2) for files built outside the templates."""
    template = environment().get_template("header.j2")
    module = template.make_module(
        {"generator": manifest["generator"], "fixtures_hash": manifest["fixturesHash"]}
    )
    return str(getattr(module, "header")(prefix))  # noqa: B009 (a Jinja macro, not a declared attribute)
