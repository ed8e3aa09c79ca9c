"""Demo MCP server: a small calendar, the second server of the chaining example.

Run:  python examples/servers/calendar_server.py [stdio|http|sse] [--port N] [--host 127.0.0.1]

Written with the SDK's low-level `Server` API and hand-written JSON Schemas, as many real
servers are. Events can point at a note of the notes server (`noteId`), so one script can
chain both. One seeded event was imported from a legacy system and `get_event` returns its
`id` as a string although the declared outputSchema says integer (plus an undeclared
`importedFrom` field): real servers drift from their schemas, and codemode-gen must report it.

State lives in memory and starts from the same seed every time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from typing import Any

import mcp_types as types
from _serving import run as serve
from jsonschema import Draft202012Validator
from mcp import MCPError
from mcp.server import NotificationOptions, Server, ServerRequestContext
from mcp.server.sse import SseServerTransport
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route

VERSION = "1.0.0"

MAX_EVENTS = 1_000  # bounds in-memory state against a runaway create_event loop
MAX_ATTENDEES = 50  # bounds one event's size
MAX_RANGE_DAYS = 366  # list_events over a longer range is almost surely a mistake
WORKDAY = (9, 17)  # free_slots searches 09:00-17:00 UTC

DATE = {"type": "string", "format": "date", "pattern": r"^\d{4}-\d{2}-\d{2}$"}
DATETIME = {
    "type": "string",
    "format": "date-time",
    "description": "ISO 8601 UTC timestamp, e.g. 2026-03-03T10:00:00Z",
    "pattern": r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})?Z$",
}
EVENT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "title": {"type": "string"},
        "start": DATETIME,
        "end": DATETIME,
        "attendees": {"type": "array", "items": {"type": "string", "format": "email"}},
        "noteId": {
            "type": ["integer", "null"],
            "description": "Id of a related note on the notes server",
        },
        "location": {"type": ["string", "null"]},
    },
    "required": ["id", "title", "start", "end", "attendees", "noteId"],
}
SLOT_SCHEMA = {
    "type": "object",
    "properties": {"start": DATETIME, "end": DATETIME},
    "required": ["start", "end"],
}


def _tool(
    name: str,
    description: str,
    input_schema: dict[str, Any],
    output_schema: dict[str, Any],
    *,
    read_only: bool,
    title: str,
) -> types.Tool:
    return types.Tool(
        name=name,
        title=title,
        description=description,
        input_schema=input_schema,
        output_schema=output_schema,
        annotations=types.ToolAnnotations(
            read_only_hint=read_only,
            destructive_hint=False,
            idempotent_hint=read_only,
            open_world_hint=False,
        ),
    )


TOOLS: list[types.Tool] = [
    _tool(
        "list_events",
        "List events that start within an optional date range (inclusive), earliest first.",
        {
            "type": "object",
            "properties": {
                "from": {**DATE, "description": "First day, YYYY-MM-DD"},
                "to": {**DATE, "description": "Last day, YYYY-MM-DD"},
            },
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {"events": {"type": "array", "items": EVENT_SCHEMA}},
            "required": ["events"],
        },
        read_only=True,
        title="List events",
    ),
    _tool(
        "get_event",
        "Fetch one event by id.",
        {
            "type": "object",
            "properties": {"id": {"type": "integer", "minimum": 1}},
            "required": ["id"],
            "additionalProperties": False,
        },
        EVENT_SCHEMA,
        read_only=True,
        title="Get event",
    ),
    _tool(
        "create_event",
        "Create an event. Use noteId to link the note it is about.",
        {
            "type": "object",
            "properties": {
                "title": {"type": "string", "minLength": 1, "maxLength": 200},
                "start": DATETIME,
                "end": DATETIME,
                "attendees": {
                    "type": "array",
                    "items": {"type": "string", "format": "email"},
                    "maxItems": MAX_ATTENDEES,
                    "default": [],
                },
                "noteId": {"type": "integer", "minimum": 1},
                "location": {"type": "string", "maxLength": 200},
            },
            "required": ["title", "start", "end"],
            "additionalProperties": False,
            "examples": [
                {
                    "title": "Roadmap review",
                    "start": "2026-03-03T14:00:00Z",
                    "end": "2026-03-03T14:30:00Z",
                    "attendees": ["dana@example.com"],
                    "noteId": 1,
                }
            ],
        },
        EVENT_SCHEMA,
        read_only=False,
        title="Create event",
    ),
    _tool(
        "free_slots",
        "Free slots of at least durationMinutes on one day, within working hours (09:00-17:00 UTC).",
        {
            "type": "object",
            "properties": {
                "date": {**DATE, "description": "Day to search, YYYY-MM-DD"},
                "durationMinutes": {"type": "integer", "minimum": 5, "maximum": 480},
            },
            "required": ["date", "durationMinutes"],
            "additionalProperties": False,
        },
        {
            "type": "object",
            "properties": {
                "date": {"type": "string"},
                "slots": {"type": "array", "items": SLOT_SCHEMA},
            },
            "required": ["date", "slots"],
        },
        read_only=True,
        title="Find free slots",
    ),
]
VALIDATORS = {t.name: Draft202012Validator(t.input_schema) for t in TOOLS}


class CalendarError(Exception):
    """A caller mistake, reported as a tool error (isError) the model can read and fix."""


def _parse_time(value: str, field: str) -> datetime:
    try:
        return datetime.strptime(value.replace("Z", "+0000"), "%Y-%m-%dT%H:%M:%S%z")
    except ValueError:
        try:
            return datetime.strptime(value.replace("Z", "+0000"), "%Y-%m-%dT%H:%M%z")
        except ValueError:
            raise CalendarError(
                f"{field}: {value!r} is not an ISO 8601 UTC time like 2026-03-03T10:00:00Z"
            ) from None


def _parse_date(value: str, field: str) -> date:
    try:
        return date.fromisoformat(value)
    except ValueError:
        raise CalendarError(f"{field}: {value!r} is not a date like 2026-03-03") from None


def _fmt(value: datetime) -> str:
    return value.strftime("%Y-%m-%dT%H:%M:%SZ")


SEED_EVENTS: list[dict[str, Any]] = [
    {
        "title": "Q2 planning review",
        "start": "2026-03-02T10:00:00Z",
        "end": "2026-03-02T11:00:00Z",
        "attendees": ["dana@example.com", "lee@example.com"],
        "noteId": 1,
        "location": "Room 4",
    },
    {
        "title": "Search latency sync",
        "start": "2026-03-02T13:30:00Z",
        "end": "2026-03-02T14:00:00Z",
        "attendees": ["sam@example.com"],
        "noteId": 3,
        "location": None,
    },
    {
        "title": "Dentist",
        "start": "2026-03-03T08:30:00Z",
        "end": "2026-03-03T09:30:00Z",
        "attendees": [],
        "noteId": None,
        "location": "12 High Street",
    },
    {
        # Imported from the old iCal feed: its id is stored as text (see get_event).
        "title": "Release go/no-go",
        "start": "2026-03-03T15:00:00Z",
        "end": "2026-03-03T15:45:00Z",
        "attendees": ["dana@example.com", "ops@example.com"],
        "noteId": 5,
        "location": None,
        "importedFrom": "ical",
    },
    {
        "title": "Book club",
        "start": "2026-03-14T18:00:00Z",
        "end": "2026-03-14T20:00:00Z",
        "attendees": ["priya@example.com"],
        "noteId": 4,
        "location": "Priya's",
    },
]


class Calendar:
    def __init__(self) -> None:
        self.events: dict[int, dict[str, Any]] = {}
        for seed in SEED_EVENTS:
            event = {"id": len(self.events) + 1, **seed}
            self.events[event["id"]] = event

    def public(self, event: dict[str, Any]) -> dict[str, Any]:
        """The normalised view every listing returns."""
        return {key: event[key] for key in EVENT_SCHEMA["properties"] if key in event}

    def list_events(self, args: dict[str, Any]) -> dict[str, Any]:
        first = _parse_date(args["from"], "from") if "from" in args else date.min
        last = _parse_date(args["to"], "to") if "to" in args else date.max
        if first > last:
            raise CalendarError(f"from ({first}) is after to ({last})")
        if "from" in args and "to" in args and (last - first).days > MAX_RANGE_DAYS:
            raise CalendarError(f"range is longer than {MAX_RANGE_DAYS} days; narrow it")
        chosen = [
            e
            for e in self.events.values()
            if first <= _parse_time(e["start"], "start").date() <= last
        ]
        chosen.sort(key=lambda e: (e["start"], e["id"]))
        return {"events": [self.public(e) for e in chosen]}

    def get_event(self, args: dict[str, Any]) -> dict[str, Any]:
        event = self.events.get(args["id"])
        if event is None:
            raise CalendarError(f"event {args['id']} not found (ids 1..{max(self.events)})")
        if "importedFrom" in event:
            # The legacy import path: id as text plus an undeclared field (schema drift).
            return {
                **self.public(event),
                "id": str(event["id"]),
                "importedFrom": event["importedFrom"],
            }
        return self.public(event)

    def create_event(self, args: dict[str, Any]) -> dict[str, Any]:
        if len(self.events) >= MAX_EVENTS:
            raise CalendarError(f"event limit reached ({MAX_EVENTS})")
        start, end = _parse_time(args["start"], "start"), _parse_time(args["end"], "end")
        if end <= start:
            raise CalendarError(f"end ({args['end']}) must be after start ({args['start']})")
        event = {
            "id": max(self.events, default=0) + 1,
            "title": args["title"].strip(),
            "start": _fmt(start),
            "end": _fmt(end),
            "attendees": sorted(set(args.get("attendees", []))),
            "noteId": args.get("noteId"),
            "location": args.get("location"),
        }
        self.events[event["id"]] = event
        return self.public(event)

    def free_slots(self, args: dict[str, Any]) -> dict[str, Any]:
        """Gaps between events within the working day that are at least durationMinutes long."""
        day = _parse_date(args["date"], "date")
        duration = timedelta(minutes=args["durationMinutes"])
        cursor = datetime(day.year, day.month, day.day, WORKDAY[0], tzinfo=UTC)
        close_at = cursor.replace(hour=WORKDAY[1])
        busy = sorted(
            (_parse_time(e["start"], "start"), _parse_time(e["end"], "end"))
            for e in self.events.values()
        )
        slots: list[dict[str, str]] = []
        for busy_start, busy_end in [*busy, (close_at, close_at)]:
            gap_end = min(busy_start, close_at)
            if gap_end - cursor >= duration:
                slots.append({"start": _fmt(cursor), "end": _fmt(gap_end)})
            cursor = max(cursor, busy_end)
            if cursor >= close_at:
                break
        return {"date": day.isoformat(), "slots": slots}


def build_server() -> Server[Any]:
    """A fresh low-level server with fresh seed state."""
    calendar = Calendar()
    handlers: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
        "list_events": calendar.list_events,
        "get_event": calendar.get_event,
        "create_event": calendar.create_event,
        "free_slots": calendar.free_slots,
    }

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=TOOLS)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        handler = handlers.get(params.name)
        if handler is None:
            raise MCPError(types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        args = dict(params.arguments or {})
        problems = sorted(VALIDATORS[params.name].iter_errors(args), key=lambda e: list(e.path))
        try:
            if problems:
                where = "/".join(str(p) for p in problems[0].path) or "(root)"
                raise CalendarError(f"invalid arguments at {where}: {problems[0].message}")
            value = handler(args)
        except CalendarError as exc:
            return types.CallToolResult(
                content=[types.TextContent(type="text", text=str(exc))], is_error=True
            )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(value))],
            structured_content=value,
        )

    return Server(
        "calendar",
        version=VERSION,
        instructions=(
            "A small calendar. Times are ISO 8601 UTC strings. Events may link a note of the "
            "notes server through noteId. free_slots searches working hours, 09:00-17:00 UTC."
        ),
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


# --- transports the low-level Server needs assembled (MCPServer has its own) ------------


def _security() -> TransportSecuritySettings:
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
        allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
    )


def sse_app(server: Server[Any], options: NotificationOptions) -> Starlette:
    """Legacy HTTP+SSE transport: GET /sse opens the stream, POST /messages/ carries requests."""
    transport = SseServerTransport("/messages/", security_settings=_security())

    async def handle_sse(request: Request) -> Response:
        async with transport.connect_sse(request.scope, request.receive, request._send) as streams:
            await server.run(streams[0], streams[1], server.create_initialization_options(options))
        return Response()

    return Starlette(
        routes=[
            Route("/sse", endpoint=handle_sse, methods=["GET"]),
            Mount("/messages/", app=transport.handle_post_message),
        ]
    )


async def serve_stdio(server: Server[Any], options: NotificationOptions) -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options(options))


def run(server: Server[Any], argv: list[str] | None = None, *, default_port: int = 8766) -> None:
    options = NotificationOptions()
    serve(
        stdio=lambda: serve_stdio(server, options),
        http=lambda host: server.streamable_http_app(host=host),
        sse=lambda host: sse_app(server, options),
        default_port=default_port,
        doc=__doc__,
        argv=argv,
    )


if __name__ == "__main__":
    run(build_server())
