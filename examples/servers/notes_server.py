"""Demo MCP server: a small notes and tasks service.

Run:  python examples/servers/notes_server.py [stdio|http|sse] [--port N] [--host 127.0.0.1]

It exists so that codemode-gen has something realistic to record, type and run against, so it
deliberately shows the shapes real servers send: structured results with a declared
outputSchema, JSON hidden in a text block with no schema (`search_notes`, `stats`), an image
plus caption (`render_chart`), a tool that always fails (`flaky_sync`), plain prose
(`summary`), a tool name that is not a JS identifier (`export-csv`) and dotted names
(`tasks.add`, `tasks.list`).

State lives in memory and starts from the same seed every time; timestamps come from a logical
clock, so two recordings of the same calls produce the same results.
"""

from __future__ import annotations

import csv
import io
import json
import struct
import zlib
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any, Literal

from _serving import run as serve
from mcp.server.mcpserver import Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations
from pydantic import BaseModel, Field

VERSION = "1.0.0"

MAX_TITLE_CHARS = (
    200  # bounds memory per note: a client looping create_note cannot grow one note unboundedly
)
MAX_BODY_CHARS = 20_000  # same, for note bodies
MAX_TAGS = 16  # keeps tag lists (and the chart's bar count) small
MAX_NOTES = 1_000  # bounds total in-memory state against a runaway create loop
MAX_SEARCH_LIMIT = 50  # caps the size of one search answer
CHART_MAX_BARS = 12  # a chart wider than this is unreadable at the tiny fixed size

READ_ONLY = ToolAnnotations(
    read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
)


class Note(BaseModel):
    """One note. `done` is only present on notes that are used as to-dos."""

    id: int = Field(description="Stable integer id, assigned by the server")
    title: str
    body: str
    tags: list[str] = Field(description="Lower-case tags, sorted")
    created: str = Field(description="ISO 8601 timestamp (UTC)")
    done: bool | None = Field(default=None, description="Completion state for to-do notes")


class Deleted(BaseModel):
    id: int
    deleted: bool
    remaining: int = Field(description="Number of notes left after the deletion")


class Task(BaseModel):
    id: int
    title: str
    done: bool
    due: str | None = Field(default=None, description="Due date, YYYY-MM-DD")


class Store:
    """In-memory notes and tasks with a logical clock (one minute per write)."""

    EPOCH = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)

    def __init__(self) -> None:
        self.notes: dict[int, Note] = {}
        self.tasks: dict[int, Task] = {}
        self._ticks = 0
        self._next_note = 1
        self._next_task = 1
        for title, body, tags, done in SEED_NOTES:
            self.add_note(title, body, tags, done=done)
        for title, due in SEED_TASKS:
            self.add_task(title, due)
        self.tasks[1].done = True

    def now(self) -> str:
        self._ticks += 1
        stamp = self.EPOCH + timedelta(minutes=self._ticks)
        return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")

    def add_note(
        self, title: str, body: str, tags: list[str] | None, *, done: bool | None = None
    ) -> Note:
        if len(self.notes) >= MAX_NOTES:
            raise ToolError(f"note limit reached ({MAX_NOTES}); delete some notes first")
        note = Note(
            id=self._next_note,
            title=_clean_title(title),
            body=_clean_body(body),
            tags=_clean_tags(tags or []),
            created=self.now(),
            done=done,
        )
        self.notes[note.id] = note
        self._next_note += 1
        return note

    def add_task(self, title: str, due: str | None) -> Task:
        task = Task(id=self._next_task, title=_clean_title(title), done=False, due=due)
        self.tasks[task.id] = task
        self._next_task += 1
        return task

    def get(self, note_id: int) -> Note:
        note = self.notes.get(note_id)
        if note is None:
            known = ", ".join(str(i) for i in sorted(self.notes)) or "none"
            raise ToolError(f"note {note_id} not found (existing ids: {known})")
        return note


SEED_NOTES: list[tuple[str, str, list[str], bool | None]] = [
    (
        "Quarterly planning",
        "Draft the Q2 roadmap: search latency, billing export, onboarding emails. Review with Dana on Friday.",
        ["work", "planning"],
        None,
    ),
    (
        "Groceries",
        "Oat milk, coffee beans, lemons, basil, parmesan. Check if the bakery has rye bread.",
        ["home", "shopping"],
        False,
    ),
    (
        "Search latency investigation",
        "p95 latency for search is 840 ms; the index is rebuilt on every deploy. Cache the index and measure again.",
        ["work", "search", "perf"],
        None,
    ),
    (
        "Book club",
        "Next meeting 14 March at Priya's. Read chapters 4-7 of 'The Dispossessed'.",
        ["personal", "books"],
        True,
    ),
    (
        "Release checklist",
        "Tag the release, update the changelog, publish the wheel, announce in #eng. Search docs need a refresh.",
        ["work", "release"],
        False,
    ),
]

SEED_TASKS: list[tuple[str, str | None]] = [
    ("Renew passport", "2026-04-30"),
    ("Send invoice to Acme", "2026-03-06"),
    ("Fix the bike's rear brake", None),
]


def _clean_title(title: str) -> str:
    title = " ".join(title.split())
    if not title:
        raise ToolError("title must not be empty")
    if len(title) > MAX_TITLE_CHARS:
        raise ToolError(f"title is {len(title)} characters; the maximum is {MAX_TITLE_CHARS}")
    return title


def _clean_body(body: str) -> str:
    if len(body) > MAX_BODY_CHARS:
        raise ToolError(f"body is {len(body)} characters; the maximum is {MAX_BODY_CHARS}")
    return body


def _clean_tags(tags: list[str]) -> list[str]:
    cleaned = sorted({t.strip().lower() for t in tags if t.strip()})
    if len(cleaned) > MAX_TAGS:
        raise ToolError(f"{len(cleaned)} tags given; the maximum is {MAX_TAGS}")
    return cleaned


def _score(note: Note, terms: list[str]) -> float:
    """Term hits weighted title > tags > body, normalised to 0..1 (deterministic)."""
    title, body, tags = note.title.lower(), note.body.lower(), " ".join(note.tags)
    raw = sum(3 * title.count(t) + 2 * tags.count(t) + body.count(t) for t in terms)
    return round(raw / (raw + 2), 3) if raw else 0.0


def png_bar_chart(values: list[int], *, width: int = 96, height: int = 48) -> bytes:
    """A tiny RGB PNG with one bar per value, encoded by hand (zlib + struct, no imaging library)."""
    background, bar_colour, axis = (250, 250, 250), (52, 101, 164), (60, 60, 60)
    top = max(values, default=0) or 1
    slot = width // max(len(values), 1)
    rows: list[bytes] = []
    for y in range(height):
        row = bytearray()
        for x in range(width):
            colour = background
            index = x // slot if slot else 0
            if y == height - 1 or x == 0:
                colour = axis
            elif index < len(values) and 1 < x % slot < slot - 1:
                bar_height = round(values[index] / top * (height - 4))
                if y >= height - 1 - bar_height:
                    colour = bar_colour
            row += bytes(colour)
        rows.append(b"\x00" + bytes(row))  # filter type 0 per scanline

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)  # 8-bit RGB
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(b"".join(rows), 9))
        + chunk(b"IEND", b"")
    )


def build_server() -> MCPServer:
    """A fresh server with fresh seed state (tests may build several in one process)."""
    store = Store()
    app = MCPServer(
        "notes",
        version=VERSION,
        instructions=(
            "Personal notes and a small task list. Notes have integer ids, a title, a body, "
            "lower-case tags and an ISO creation time; list or search them before reading one "
            "with get_note. Writes are in memory only and reset when the server restarts."
        ),
        log_level="WARNING",
    )

    @app.tool(annotations=READ_ONLY)
    def list_notes(
        tag: Annotated[str | None, Field(description="Only notes carrying this tag")] = None,
    ) -> list[Note]:
        """List notes, oldest first, optionally filtered by tag."""
        wanted = tag.strip().lower() if tag else None
        return [n for n in store.notes.values() if wanted is None or wanted in n.tags]

    @app.tool(annotations=READ_ONLY)
    def get_note(
        id: Annotated[int, Field(description="Note id, as returned by list_notes")],
    ) -> Note:
        """Fetch one note by id."""
        return store.get(id)

    @app.tool(
        annotations=ToolAnnotations(
            destructive_hint=False, idempotent_hint=False, open_world_hint=False
        )
    )
    def create_note(
        title: Annotated[str, Field(description="Short title", max_length=MAX_TITLE_CHARS)],
        body: Annotated[str, Field(description="Free text, markdown allowed")],
        tags: Annotated[
            list[str] | None, Field(description="Tags; stored lower-cased and sorted")
        ] = None,
    ) -> Note:
        """Create a note and return it with its new id."""
        return store.add_note(title, body, tags)

    @app.tool(
        annotations=ToolAnnotations(
            destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    def update_note(
        id: int,
        title: str | None = None,
        body: str | None = None,
        tags: list[str] | None = None,
        done: bool | None = None,
    ) -> Note:
        """Replace the given fields of a note; fields left out keep their value."""
        note = store.get(id)
        changes: dict[str, Any] = {}
        if title is not None:
            changes["title"] = _clean_title(title)
        if body is not None:
            changes["body"] = _clean_body(body)
        if tags is not None:
            changes["tags"] = _clean_tags(tags)
        if done is not None:
            changes["done"] = done
        updated = note.model_copy(update=changes)
        store.notes[id] = updated
        return updated

    @app.tool(
        annotations=ToolAnnotations(
            destructive_hint=True, idempotent_hint=True, open_world_hint=False
        )
    )
    def delete_note(id: int) -> Deleted:
        """Delete a note permanently."""
        store.get(id)
        del store.notes[id]
        return Deleted(id=id, deleted=True, remaining=len(store.notes))

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def search_notes(
        query: Annotated[str, Field(description="Words to look for in titles, tags and bodies")],
        limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 5,
    ) -> str:
        """Full-text search. Returns a JSON array of {id, title, score}, best match first."""
        terms = [t for t in query.lower().split() if t]
        if not terms:
            raise ToolError("query must contain at least one word")
        hits = [(n, _score(n, terms)) for n in store.notes.values()]
        ranked = sorted((h for h in hits if h[1] > 0), key=lambda h: (-h[1], h[0].id))[:limit]
        return json.dumps([{"id": n.id, "title": n.title, "score": s} for n, s in ranked])

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def stats() -> str:
        """Counts of notes and tasks, as a JSON object."""
        by_tag: dict[str, int] = {}
        for note in store.notes.values():
            for tag in note.tags:
                by_tag[tag] = by_tag.get(tag, 0) + 1
        return json.dumps(
            {
                "notes": len(store.notes),
                "todo": sum(1 for n in store.notes.values() if n.done is False),
                "done": sum(1 for n in store.notes.values() if n.done is True),
                "tasks": {
                    "open": sum(not t.done for t in store.tasks.values()),
                    "done": sum(t.done for t in store.tasks.values()),
                },
                "byTag": dict(sorted(by_tag.items())),
            }
        )

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def render_chart(by: Literal["tag", "status"] = "tag") -> list[Image | str]:
        """Render a small bar chart (PNG) of notes per tag or per status, with a caption."""
        counts: dict[str, int] = {}
        for note in store.notes.values():
            keys = (
                note.tags
                if by == "tag"
                else ["done" if note.done else "todo" if note.done is False else "note"]
            )
            for key in keys:
                counts[key] = counts.get(key, 0) + 1
        bars = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:CHART_MAX_BARS]
        caption = f"Notes per {by}: " + ", ".join(f"{k} {v}" for k, v in bars)
        return [Image(data=png_bar_chart([v for _, v in bars]), format="png"), caption]

    @app.tool(
        annotations=ToolAnnotations(
            destructive_hint=False, idempotent_hint=True, open_world_hint=True
        )
    )
    def flaky_sync() -> str:
        """Push notes to the sync service. (The demo service is always down: this tool always fails.)"""
        raise ToolError(
            "sync service unreachable: connection to sync.notes.invalid:443 timed out after 3 attempts"
        )

    @app.tool(annotations=READ_ONLY, structured_output=False)
    def summary() -> str:
        """A short prose summary of the notes, for reading rather than parsing."""
        todo = [n.title for n in store.notes.values() if n.done is False]
        tags = sorted({t for n in store.notes.values() for t in n.tags})
        latest = max(store.notes.values(), key=lambda n: n.id, default=None)
        parts = [f"You have {len(store.notes)} notes tagged {', '.join(tags) or 'nothing'}."]
        if todo:
            parts.append(f"Still to do: {'; '.join(todo)}.")
        if latest is not None:
            parts.append(f'The most recent one is "{latest.title}".')
        return " ".join(parts)

    @app.tool(name="export-csv", annotations=READ_ONLY, structured_output=False)
    def export_csv(tag: str | None = None) -> str:
        """Export notes as CSV (id,title,tags,created,done), optionally only one tag."""
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["id", "title", "tags", "created", "done"])
        for note in list_notes(tag):
            done = "" if note.done is None else str(note.done).lower()
            writer.writerow([note.id, note.title, ";".join(note.tags), note.created, done])
        return out.getvalue()

    @app.tool(
        name="tasks.add",
        annotations=ToolAnnotations(
            destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    )
    def tasks_add(
        title: str,
        due: Annotated[
            str | None, Field(description="Due date, YYYY-MM-DD", pattern=r"^\d{4}-\d{2}-\d{2}$")
        ] = None,
    ) -> Task:
        """Add a task to the task list."""
        return store.add_task(title, due)

    @app.tool(name="tasks.list", annotations=READ_ONLY)
    def tasks_list(include_done: bool = True) -> list[Task]:
        """List tasks in creation order."""
        return [t for t in store.tasks.values() if include_done or not t.done]

    return app


def run(app: MCPServer, argv: list[str] | None = None, *, default_port: int = 8765) -> None:
    serve(
        stdio=app.run_stdio_async,
        http=lambda host: app.streamable_http_app(host=host),
        sse=lambda host: app.sse_app(host=host),
        default_port=default_port,
        doc=__doc__,
        argv=argv,
    )


if __name__ == "__main__":
    run(build_server())
