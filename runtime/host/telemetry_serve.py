"""What `serve` adds to the host's telemetry (docs/observability.md): an HTTP request's trace
context, the trace id on its stderr lines, and warnings as those lines.

serve --http makes a request's W3C `traceparent` the parent of its run's span (`http_context`);
both transports write the runtime's warnings, and the OpenTelemetry SDK's (rate-limited: an
unreachable collector warns on every retry), as their own stderr lines, each carrying the trace
id of the run it belongs to (`install_log_handler`, `log_suffix`); `codemode-gen run` routes the
SDK's warnings alike (`install_export_notices`). None of it is on a run's path.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from opentelemetry.context import Context


def http_context(headers: Iterable[tuple[bytes, bytes]]) -> Any:
    """Make an HTTP request's W3C `traceparent`/`tracestate` headers the current context (serve
    --http: the parent of its run's span, unless the MCP request's `_meta` carries one, which
    the SDK prefers). Returns a token for `end_http_context`, None when there was none."""
    carrier: dict[str, str] = {}
    for name, value in headers:
        if name in (b"traceparent", b"tracestate"):
            carrier[name.decode("latin-1")] = value.decode("latin-1")
    if "traceparent" not in carrier:
        return None
    try:
        from opentelemetry import context as otel_context
        from opentelemetry import trace
        from opentelemetry.propagate import extract
    except ImportError:
        return None
    ctx: Context = extract(carrier)
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return otel_context.attach(ctx)


def end_http_context(token: Any) -> None:
    if token is not None:
        from opentelemetry import context as otel_context

        otel_context.detach(token)


def log_suffix() -> str:
    """` trace_id=<32 hex>` of the current span, for a log line written during a run (serve's
    stderr): the line leads to the run's trace. Empty outside one."""
    try:
        from opentelemetry import trace
    except ImportError:
        return ""
    context = trace.get_current_span().get_span_context()
    return f" trace_id={context.trace_id:032x}" if context.is_valid else ""


#: The OpenTelemetry SDK's own warnings (a collector that cannot be reached: one per export
#: attempt and retry) are told at most once per this many seconds per kind, so an unreachable
#: collector cannot flood serve's stderr (a client's log view).
EXPORT_NOTICE_INTERVAL_S = 60.0
#: Kinds of those warnings remembered (a message's first words): bounds the table.
MAX_EXPORT_NOTICE_KINDS = 64


class LineHandler(logging.Handler):
    """Log records as serve's own stderr lines (`serve.log_line`: prefixed, one line, with the
    trace id of the run they belong to); with a `prefix` and `interval`, each kind of message at
    most once per `interval` seconds."""

    def __init__(
        self, write: Callable[[str], None], *, prefix: str = "", interval: float = 0.0
    ) -> None:
        super().__init__(logging.WARNING)
        self.write = write
        self.prefix = prefix
        self.interval = interval
        self._last: dict[str, float] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if self.interval:
                kind = f"{record.name}:{' '.join(str(record.msg).split()[:4])}"
                now = time.monotonic()
                if now - self._last.get(kind, -math.inf) < self.interval or (
                    kind not in self._last and len(self._last) >= MAX_EXPORT_NOTICE_KINDS
                ):
                    return
                self._last[kind] = now
            self.write(self.prefix + record.getMessage())
        except Exception:
            self.handleError(record)


def install_log_handler(write: Callable[[str], None]) -> None:
    """Route codemode-gen's warnings, and the OpenTelemetry SDK's (rate-limited), through
    `write` (serve's stderr lines; once per process)."""
    _install("codemode_gen", LineHandler(write))
    install_export_notices(write)


def install_export_notices(write: Callable[[str], None]) -> None:
    """Route the OpenTelemetry SDK's warnings (an unreachable collector's, each retry) through
    `write`, marked `telemetry: ` and each kind at most once per EXPORT_NOTICE_INTERVAL_S
    (`codemode-gen run`'s stderr; serve's through install_log_handler)."""
    _install(
        "opentelemetry", LineHandler(write, prefix="telemetry: ", interval=EXPORT_NOTICE_INTERVAL_S)
    )


def _install(name: str, handler: LineHandler) -> None:
    logger = logging.getLogger(name)
    if not any(isinstance(h, LineHandler) for h in logger.handlers):
        logger.addHandler(handler)
        logger.propagate = False
