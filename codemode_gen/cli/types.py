"""`codemode-gen types SCHEMA.json [--name Root]`: any JSON Schema file -> a standalone .d.ts.

The json2ts-style entry point onto the same translator `generate` uses, so a schema's
TypeScript can be inspected (or used elsewhere) without recording a server.
"""

from __future__ import annotations

from pathlib import Path

import click

from codemode_gen.errors import UserError
from codemode_gen.generator.names import is_identifier
from codemode_gen.jsonio import read_json


@click.command("types")
@click.argument("schema_file", metavar="SCHEMA.json", type=click.Path(path_type=Path))
@click.option(
    "--name",
    default="Root",
    show_default=True,
    help="Name of the exported root type (PascalCased; helper types are named after $defs).",
)
def types(schema_file: Path, name: str) -> None:
    """Print TypeScript declarations for a JSON Schema file; warnings go to stderr."""
    if not is_identifier(name):
        raise UserError(
            f"--name {name!r} is not a TypeScript identifier",
            hint="use letters, digits, _ or $, not starting with a digit (e.g. --name Root)",
        )
    schema = read_json(schema_file, what="JSON Schema file")
    from codemode_gen.generator.typescript import render_standalone

    text, warnings = render_standalone(schema, name, source=schema_file.name)
    click.echo(text, nl=False)
    for warning in warnings:
        click.echo(f"warning: {warning}", err=True)
