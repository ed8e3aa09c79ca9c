"""One live, initialized MCP connection (`McpSession`): raw tools/list and tools/call, with bounds.

After the (envelope-only) handshake every request goes through the SDK's
`JSONRPCDispatcher.send_raw_request`, so results are verbatim wire JSON and a tool the SDK's
models would reject costs only itself (see client/sessions.py for why). This module owns what
one request does: the pages of tools/list (bounded, a too-deep page salvaged tool by tool),
the call, the mapping of the dispatcher's outcomes to the `CallError` family, and
`cancel_once`, which makes a cancelled caller cancel its request exactly once.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.to_thread

from codemode_gen.client.session_errors import (
    CONNECTION_CLOSED,
    BadFrameError,
    CallAuthError,
    CallError,
    CallTimeout,
    SessionLost,
)
from codemode_gen.config import ServerConfig

__all__ = [
    "CANCEL_NOTICE_WAIT",
    "HANDSHAKE_VERSION",
    "PROTOCOL_HEADER",
    "McpSession",
    "cancel_once",
]

T = TypeVar("T")

# Bounds a server that pages tools/list forever (or loops on the same cursor).
MAX_TOOL_PAGES = 1000
# Bounds memory spent on one server's tool list (a hostile server could send millions).
MAX_TOOLS = 10_000
# Bounds how long a cancelled request's caller waits for its notifications/cancelled to be
# written (microseconds normally) before it goes on: a server that stopped reading its stdin must
# not hold up a run's response; the write goes on in the background (the SDK bounds it at 5 s).
CANCEL_NOTICE_WAIT = 0.25

# JSON-RPC code the SDK's dispatcher uses for a request that timed out.
_REQUEST_TIMEOUT = -32001
HANDSHAKE_VERSION = "2025-11-25"  # what we offer in initialize (the SDK's LATEST_HANDSHAKE_VERSION)
PROTOCOL_HEADER = "mcp-protocol-version"


# Tasks started by `cancel_once` that have not ended: the event loop keeps only weak references,
# and a caller that stopped waiting no longer holds one.
_RUNNING: set[asyncio.Future[Any]] = set()


async def cancel_once(work: Awaitable[T], *, grace: float) -> T:
    """Await `work` in a task of its own that the caller's cancellation cancels exactly once.

    A cancelled caller cancels the task, waits at most `grace` seconds for it to wind down (its
    own cleanup: a notifications/cancelled to write, a worker to kill) and re-raises. Cancelled
    again meanwhile, as an anyio cancel scope does on every await until the task leaves it, the
    caller stops waiting at once, but the task is not cancelled a second time, so its cleanup
    still runs to the end, in the background.
    """
    loop = asyncio.get_running_loop()
    outcome: asyncio.Future[T] = loop.create_future()

    async def carry() -> None:
        # The task hands the work's outcome over itself, as it ends: the caller resumes one loop
        # turn sooner than through the task's done callbacks (as with asyncio.shield). Once the
        # caller stopped waiting (`outcome` cancelled), an outcome is dropped, as shield drops it.
        try:
            result = await work
        except BaseException as exc:
            if not outcome.done():
                if isinstance(exc, asyncio.CancelledError):
                    outcome.cancel()
                else:
                    outcome.set_exception(exc)
            if not isinstance(exc, Exception):
                raise  # cancellation, KeyboardInterrupt, SystemExit: the task and loop see them
        else:
            if not outcome.done():
                outcome.set_result(result)

    task = loop.create_task(carry())
    _RUNNING.add(task)
    task.add_done_callback(_RUNNING.discard)
    try:
        return await outcome
    except asyncio.CancelledError:
        task.cancel()
        await asyncio.wait([task], timeout=grace)
        raise


class McpSession:
    """One live, initialized connection. Create through `SessionManager.get`."""

    def __init__(
        self,
        config: ServerConfig,
        dispatcher: Any,
        server_json: dict[str, Any],
        log_path: Path,
    ) -> None:
        self.server_id = config.id
        self.config = config
        self.server_json = server_json
        self.tools_changed = False
        self.closed = False
        self.log_path = log_path
        # Tools dropped from the list (not an object / no string name) and other oddities.
        self.warnings: list[str] = []
        self._dispatcher = dispatcher
        self._tools: tuple[dict[str, Any], ...] | None = None
        self._auth_failed: Callable[[], int | None] = lambda: None
        self._auth_problem: Callable[[], Any] = lambda: (
            None
        )  # client/oauth_provider.AuthProblem | None
        self._session_lost: Callable[[], bool] = lambda: False

    @property
    def protocol_version(self) -> str:
        return str(self.server_json.get("protocolVersion", HANDSHAKE_VERSION))

    async def list_tools(self, *, refresh: bool = False) -> list[dict[str, Any]]:
        """All pages of tools/list, verbatim wire JSON sorted by name; cached until the server
        says the list changed (or `refresh`)."""
        return copy.deepcopy(list(await self.tools_snapshot(refresh=refresh)))  # callers may mutate

    async def tools_snapshot(self, *, refresh: bool = False) -> tuple[dict[str, Any], ...]:
        """The same tools as `list_tools`, not copied: read-only by contract.

        The same tuple object is returned until the list is refreshed, so a caller that runs
        often (the runtime, once per run) can reuse work keyed by its identity instead of
        deep-copying every tool definition each time."""
        if self._tools is None or self.tools_changed or refresh:
            self._tools = tuple(await self._list_all(self.config.call_timeout))
        return self._tools

    async def _list_all(self, timeout: float | None) -> list[dict[str, Any]]:
        # Cleared first: a change notification that arrives while we page re-arms it.
        self.tools_changed = False
        tools: dict[str, dict[str, Any]] = {}
        cursor: Any = None
        seen_cursors: set[str] = set()
        warnings: list[str] = []
        for page_no in range(MAX_TOOL_PAGES):
            params = {"cursor": cursor} if cursor is not None else None
            try:
                page = await self._request("tools/list", params, timeout, keep_frame=True)
            except BadFrameError as exc:
                if exc.kind != "too-deep":
                    raise
                page = await self._salvage_page(exc, page_no, warnings)
            items = page.get("tools")
            if not isinstance(items, list):
                raise CallError(None, f'tools/list page {page_no + 1} has no "tools" array')
            for item in items:
                name = item.get("name") if isinstance(item, dict) else None
                if not isinstance(name, str) or not name:
                    warnings.append(
                        f"ignored a tools/list entry without a string name: {str(item)[:120]}"
                    )
                elif name in tools:
                    warnings.append(f"tool {name!r} listed twice; kept the first definition")
                elif len(tools) >= MAX_TOOLS:
                    raise CallError(None, f"server lists more than {MAX_TOOLS} tools")
                else:
                    tools[name] = item
            cursor = page.get("nextCursor")
            if cursor is None or cursor == "":
                break
            key = repr(cursor)
            if key in seen_cursors:
                warnings.append("tools/list repeated a cursor; stopped paging")
                break
            seen_cursors.add(key)
        else:
            raise CallError(None, f"tools/list did not finish within {MAX_TOOL_PAGES} pages")
        self.warnings = warnings
        return [tools[name] for name in sorted(tools)]

    async def _salvage_page(
        self, exc: BadFrameError, page_no: int, warnings: list[str]
    ) -> dict[str, Any]:
        """A tools/list page nested too deeply: keep every tool, turning the schema (or other
        field) that holds the too-deep part into `{}` (unknown), with a warning per tool."""
        from codemode_gen.client.stdio import MAX_FRAME_DEPTH, MAX_SALVAGE_BYTES, parse_pruned

        frame, exc.frame = exc.frame, None
        if frame is None:
            raise BadFrameError(
                exc.code,
                f"{exc.message}; the page is larger than {MAX_SALVAGE_BYTES // 2**20} MiB, "
                "too large to salvage its other tools",
                kind=exc.kind,
            ) from None
        try:
            # a pure-Python walk over every token: off the event loop, so other sessions go on
            message, marker = await anyio.to_thread.run_sync(parse_pruned, frame, MAX_FRAME_DEPTH)
        except ValueError:
            raise BadFrameError(
                exc.code, f"{exc.message}; the page is not JSON either", kind=exc.kind
            ) from None
        del frame
        result = message.get("result") if isinstance(message, dict) else None
        if not isinstance(result, dict) or not isinstance(result.get("tools"), list):
            raise BadFrameError(
                exc.code, f"{exc.message}; no tools could be salvaged", kind=exc.kind
            ) from None
        for key in [k for k in result if k != "tools" and _holds(result[k], marker)]:
            del result[key]
            warnings.append(
                f"tools/list page {page_no + 1}: dropped its {key!r}, nested too deeply"
            )
        for tool in result["tools"]:
            if not isinstance(tool, dict) or not _holds(tool, marker):
                continue
            typed = [
                k for k in ("inputSchema", "outputSchema") if k in tool and _holds(tool[k], marker)
            ]
            dropped = [k for k in tool if k not in typed and _holds(tool[k], marker)]
            for key in typed:
                tool[key] = {}
            for key in dropped:
                del tool[key]
            name = tool.get("name")
            parts = (
                [
                    f"{' and '.join(typed)} nested deeper than {MAX_FRAME_DEPTH} levels: typed as unknown"
                ]
                if typed
                else []
            )
            parts += [f"dropped {', '.join(dropped)} (nested too deeply)"] if dropped else []
            warnings.append(f"tool {name!r}: {'; '.join(parts)}")
        return result

    async def call_tool(
        self, name: str, arguments: Any, *, timeout: float | None = None
    ) -> dict[str, Any]:
        """Raw CallToolResult wire JSON (`isError` results are results, not exceptions).

        Cancelling the awaiting task abandons the request and sends notifications/cancelled.
        """
        params: dict[str, Any] = {"name": name}
        if arguments is not None:
            params["arguments"] = arguments
        return await self._request(
            "tools/call", params, timeout if timeout is not None else self.config.call_timeout
        )

    async def _request(
        self,
        method: str,
        params: dict[str, Any] | None,
        timeout: float | None,
        *,
        keep_frame: bool = False,
    ) -> dict[str, Any]:
        """One request and its result; cancelling the caller (any number of times) abandons it
        and sends notifications/cancelled once (`cancel_once`)."""
        return await cancel_once(
            self._send(method, params, timeout, keep_frame), grace=CANCEL_NOTICE_WAIT
        )

    async def _send(
        self, method: str, params: dict[str, Any] | None, timeout: float | None, keep_frame: bool
    ) -> dict[str, Any]:
        from mcp.shared.exceptions import MCPError

        from codemode_gen.client.stdio import BadFrame

        opts: dict[str, Any] = {"headers": {PROTOCOL_HEADER: self.protocol_version}}
        if timeout is not None:
            opts["timeout"] = timeout
        try:
            result = await self._dispatcher.send_raw_request(method, params, opts)
        except MCPError as exc:
            code = exc.error.code
            bad = exc.error.data
            if isinstance(bad, BadFrame):  # the transport's own verdict, not the server's error
                if bad.kind == "unsendable":
                    text = f"cannot send {method} to server '{self.server_id}': {bad.reason}"
                else:
                    text = f"server '{self.server_id}' answered {method} with {bad.reason}"
                raise BadFrameError(
                    code, text, kind=bad.kind, frame=bad.text if keep_frame else None
                ) from None
            if code == _REQUEST_TIMEOUT:
                raise CallTimeout(
                    code, f"{method} to {self.server_id} timed out after {timeout:g}s"
                ) from None
            if code == CONNECTION_CLOSED:
                self.closed = True
                raise CallError(
                    code, f"connection to {self.server_id} closed (see {self.log_path})"
                ) from None
            if self._session_lost():
                self.closed = True
                raise SessionLost(
                    code, f"server '{self.server_id}' no longer knows this session (HTTP 404)"
                ) from None
            status = self._auth_failed()
            if status is not None:
                problem = self._auth_problem()
                text = (
                    problem.message
                    if problem is not None
                    else f"{self.server_id} rejected the credentials (HTTP {status})"
                )
                raise CallAuthError(
                    code,
                    text,
                    exc.error.data,
                    status=status,
                    hint=problem.hint if problem is not None else None,
                ) from None
            raise CallError(code, exc.error.message, exc.error.data) from None
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            self.closed = True
            raise CallError(CONNECTION_CLOSED, f"connection to {self.server_id} closed") from None
        if not isinstance(result, dict):  # pragma: no cover - the dispatcher only yields dicts
            raise CallError(None, f"{method} returned {type(result).__name__}, not an object")
        return result


def _holds(value: Any, marker: str) -> bool:
    """Whether `marker` occurs anywhere in `value` (depth is bounded by the pruning)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and item == marker:
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False
