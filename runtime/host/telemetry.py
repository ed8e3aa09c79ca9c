"""Observability: OpenTelemetry traces of runs and tool calls, and metrics (docs/observability.md).

A team that serves Code Mode to its agents needs to see what scripts did, in the tools it already
has: which tools were called, how long each took, where a run's time went (queue, connect,
approval, upstream), and why it failed. Three outputs, all from the hooks in this module:

- **Traces** (OpenTelemetry): one `codemode.run` span per run, with child spans for its queue
  waits, server connects, type check, the script's execution, each tool call and each approval
  wait (`SPAN_*` below). Attributes say what happened (names, limits, outcome, diagnostic codes,
  script size and hash), never what the script or a tool said: no script text, tool input or
  tool output unless `[telemetry] record_content = true` (then redacted like fixtures and cut at
  MAX_CONTENT_CHARS). A failed call's error text is the trace entry's (runtime/host/bridge.py
  `trace_error`: the server's secrets and codemode.toml's `redact` patterns replaced), except a
  tool's own isError text, which is tool output.
- **Metrics** (`Metrics`): counters, histograms and gauges kept in process by every CodeMode,
  served by `serve --http` at /metrics in the Prometheus text format and, when configured,
  exported through OTLP as well.
- **Context propagation**: a run's span is the child of whatever context is current when it
  starts. The MCP SDK's server already makes a request's `_meta` traceparent current (its
  OpenTelemetryMiddleware), serve --http adds the HTTP headers' (`http_context`), and the SDK's
  client injects the current context into every upstream request's `_meta`, so traces join
  across servers. Without an SDK the API's no-op spans still carry an incoming context through,
  so propagation works with tracing off.

Cost: the OpenTelemetry API comes with the MCP SDK; the SDK and exporters are the optional extra
`codemode-gen[otel]`. With tracing off (the default: nothing configured) no span is made and
nothing of the SDK is imported; each run and tool call costs a few dictionary updates for the
metrics (bench/serve.py measures the warm empty run with tracing off, on with no exporter, and
on with OTLP, side by side).

Hooks are module-level functions that find the run they belong to through a context variable
(`RUN_SCOPE`, set for the duration of `CodeMode.run`), so the places that call them (runtime/codemode/,
bridge.py through runtime/host/telemetry_calls.py) need one line each and no new parameters;
with no run current they do nothing. The sandbox pool, which must not import the host, times its
worker waits through runtime/waits.py, whose observer the run's scope is.

This module owns the run's scope and those hooks; where spans and metrics are exported is
runtime/host/otel_setup.py's, what serve adds (HTTP trace context, log lines) is
runtime/host/telemetry_serve.py's.
"""

from __future__ import annotations

import contextlib
import contextvars
import hashlib
import os
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from codemode_gen import __version__
from codemode_gen.config import Settings
from codemode_gen.runtime import diagnostics as diag
from codemode_gen.runtime import waits
from codemode_gen.runtime.host.metrics import Metrics
from codemode_gen.runtime.host.otel_setup import _env_flag, _global_provider, _providers, resolve

if TYPE_CHECKING:
    from opentelemetry.trace import Span, Tracer

    from codemode_gen.runtime.limits import Limits

__all__ = [
    "Metrics",
    "Telemetry",
]

T = TypeVar("T")

#: The instrumentation scope of every span and metric made here.
SCOPE_NAME = "codemode-gen"

# Span names (docs/observability.md says what each means).
SPAN_RUN = "codemode.run"
SPAN_QUEUE = "codemode.queue"
SPAN_TYPECHECK = "codemode.typecheck"
SPAN_CONNECT = "codemode.connect"
SPAN_EXECUTE = "codemode.execute"
SPAN_TOOL_CALL = "codemode.tool_call"
SPAN_APPROVAL = "codemode.approval"

# Run outcomes (span attribute codemode.run.outcome and the `outcome` label).
OK, ERROR, TIMEOUT, LIMIT, CANCELLED, HOST_ERROR = (
    "ok",
    "error",
    "timeout",
    "limit",
    "cancelled",
    "host_error",
)
# A run that ended to ask the client's user through an input_required result (runtime/host/resume.py),
# and the calls it asked about: the retry is a run of its own, where those calls are made.
INPUT_REQUIRED = "input_required"
# Tool call outcomes beyond ok / error.
DENIED = "denied"

#: Diagnostic codes listed on a run span: a run reports few kinds, but a script can log many
#: diagnostics of one kind; the attribute stays small.
MAX_DIAGNOSTIC_CODES = 20
#: Bounds the script text and each tool input or output recorded with `record_content`: span
#: attributes travel to the collector in every export batch.
MAX_CONTENT_CHARS = 4096
#: A queue wait shorter than this is no wait worth a span (an idle worker handed over at once);
#: it is still observed by the queue-wait histogram.
MIN_QUEUE_SPAN_S = 0.001


# --------------------------------------------------------------------------- the host's telemetry


class Telemetry:
    """What one host (a CodeMode) emits: spans through `tracer` (None: tracing off), metrics into
    `metrics` (always kept; exported where configured).

    `Telemetry.from_settings` decides from codemode.toml's [telemetry] and the OTEL_* variables;
    an application embedding CodeMode may pass its own: `Telemetry(tracer_provider=...,
    meter_provider=...)`."""

    def __init__(
        self,
        *,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        metrics: Metrics | None = None,
        record_content: bool = False,
        redact_patterns: Iterable[str] = (),
    ) -> None:
        self.tracer: Tracer | None = (
            tracer_provider.get_tracer(SCOPE_NAME, __version__)
            if tracer_provider is not None
            else None
        )
        self.metrics = metrics if metrics is not None else Metrics()
        if meter_provider is not None:
            self.metrics.mirror_to(meter_provider)
        self.record_content = record_content
        self.redact_patterns = tuple(redact_patterns)
        #: The MCP tool name runs are served as (serve sets it; None for the Python API).
        self.tool_name: str | None = None
        #: Told one line per run when tracing is on (serve: stderr, with the trace id).
        self.run_log: Callable[[str], None] | None = None

    @classmethod
    def from_settings(
        cls, settings: Settings, environ: Mapping[str, str] | None = None
    ) -> Telemetry:
        environ = os.environ if environ is None else environ
        resolved = resolve(settings.telemetry, environ)
        tracer_provider = meter_provider = None
        if resolved.traces or resolved.metrics:
            tracer_provider, meter_provider = _providers(resolved, environ)
        elif not _env_flag(
            environ, "OTEL_SDK_DISABLED"
        ):  # the application's own set-up, if it made one
            tracer_provider, meter_provider = _global_provider("trace"), _global_provider("metrics")
        return cls(
            tracer_provider=tracer_provider,
            meter_provider=meter_provider,
            record_content=resolved.record_content,
            redact_patterns=settings.redact_patterns,
        )

    @property
    def tracing(self) -> bool:
        return self.tracer is not None

    def run(self, code: str, started: float | None) -> RunScope:
        """The scope of one run (`with` it around the run; `finish` with its response)."""
        return RunScope(self, code, started)

    @contextlib.contextmanager
    def span(self, name: str, attributes: Mapping[str, Any] | None = None) -> Iterator[Span | None]:
        """A span `name`, current while the block runs, child of the current one (a run's, or
        none: a root span for the host's own work, such as connecting at start-up); None and
        nothing made with tracing off. An exception marks it failed and goes on."""
        tracer = self.tracer
        if tracer is None:
            yield None
            return
        with tracer.start_as_current_span(
            name,
            attributes=dict(attributes or {}),
            record_exception=False,
            set_status_on_exception=False,
        ) as span:
            try:
                yield span
            except BaseException as exc:
                kind = CANCELLED if not isinstance(exc, Exception) else type(exc).__name__
                set_error(span, kind, kind)
                raise

    def redact(self, text: str) -> str:
        """codemode.toml's `redact` patterns replaced in recorded content (record_content)."""
        if not self.redact_patterns:
            return text
        from codemode_gen.generator.redact import Redactor

        return Redactor(None, self.redact_patterns).text(text)


RUN_SCOPE: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar(
    "codemode_run", default=None
)


def _wall_ns(monotonic_s: float) -> int:
    """A `time.monotonic()` instant as the wall-clock nanoseconds spans are stamped with."""
    return time.time_ns() - int((time.monotonic() - monotonic_s) * 1e9)


def cut_attribute(text: str) -> str:
    return (
        text
        if len(text) <= MAX_CONTENT_CHARS
        else text[:MAX_CONTENT_CHARS] + f"…[+{len(text) - MAX_CONTENT_CHARS} chars]"
    )


def set_error(span: Span, description: str, error_type: str | None = None) -> None:
    from opentelemetry.trace import Status, StatusCode

    if error_type:
        span.set_attribute("error.type", error_type)
    span.set_status(Status(StatusCode.ERROR, description))


class RunScope:
    """One run as telemetry sees it: its span (when tracing) and its metrics."""

    def __init__(self, telemetry: Telemetry, code: str, started: float | None) -> None:
        self.telemetry = telemetry
        self.code = code
        now = time.monotonic()
        self.called = now
        self.started = now if started is None else min(started, now)
        self.queued = started is not None  # it waited for admission before the run was called
        self.span: Span | None = None
        self._token: contextvars.Token[RunScope | None] | None = None
        self._wait_token: contextvars.Token[waits.WaitObserver | None] | None = None
        self._otel_token: Any = None
        self._response: Mapping[str, Any] | None = None
        # Whether the run is ending to ask through input_required (its journal's word).
        self.paused: Callable[[], bool] | None = None

    def is_paused(self) -> bool:
        return self.paused is not None and self.paused()

    def __enter__(self) -> RunScope:
        self._token = RUN_SCOPE.set(self)
        self._wait_token = waits.OBSERVER.set(
            self
        )  # the sandbox pool's worker waits (runtime/waits.py)
        tracer = self.telemetry.tracer
        waited = self.called - self.started
        if tracer is not None:
            from opentelemetry import context as otel_context
            from opentelemetry import trace

            attributes: dict[str, Any] = {
                "codemode.script.chars": len(self.code),
                "codemode.script.sha256": hashlib.sha256(
                    self.code.encode("utf-8", "surrogatepass")
                ).hexdigest(),
            }
            if self.telemetry.tool_name:
                attributes["codemode.run.tool"] = self.telemetry.tool_name
            if self.telemetry.record_content:
                attributes["codemode.script"] = cut_attribute(self.telemetry.redact(self.code))
            start = _wall_ns(self.started)
            self.span = tracer.start_span(SPAN_RUN, attributes=attributes, start_time=start)
            self._otel_token = otel_context.attach(trace.set_span_in_context(self.span))
            if waited >= MIN_QUEUE_SPAN_S:
                # Waiting before the run was called (serve --http's admission queue) counts
                # within its timeoutMs (§3.2.4): a child span from its arrival to now.
                queued = tracer.start_span(
                    SPAN_QUEUE, attributes={"codemode.queue": "admission"}, start_time=start
                )
                queued.end(time.time_ns())
        if self.queued:
            self.telemetry.metrics.queue_wait.observe(waited, "admission")
        return self

    def limits(self, limits: Limits) -> None:
        if self.span is not None:
            self.span.set_attributes(
                {
                    "codemode.limits.timeout_ms": limits.timeoutMs,
                    "codemode.limits.max_memory_bytes": limits.maxMemoryBytes,
                    "codemode.limits.max_log_bytes": limits.maxLogBytes,
                    "codemode.limits.max_tool_calls": limits.maxToolCalls,
                    "codemode.limits.max_concurrent_calls": limits.maxConcurrentCalls,
                }
            )

    def finish(self, response: T) -> T:
        """The run's response (the scope's end reads its outcome from it); returned as is."""
        self._response = response if isinstance(response, Mapping) else None
        return response

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any
    ) -> None:
        response = self._response
        diagnostics = [d for d in (response or {}).get("diagnostics", []) if isinstance(d, Mapping)]
        if response is not None:
            errors = [d for d in diagnostics if d.get("severity") == "error"]
            if self.is_paused():
                outcome = INPUT_REQUIRED
            elif not errors:
                outcome = OK
            elif diag.hit_limit(errors, "timeoutMs"):
                outcome = TIMEOUT
            elif any(d.get("code") == diag.DiagnosticCode.SANDBOX_LIMIT for d in errors):
                outcome = LIMIT
            else:
                outcome = ERROR
        elif exc is not None and not isinstance(exc, Exception):
            outcome = (
                CANCELLED  # the caller cancelled the run (the client's notifications/cancelled)
            )
        else:
            outcome = HOST_ERROR
        elapsed = time.monotonic() - self.started
        metrics = self.telemetry.metrics
        metrics.runs.add(outcome)
        metrics.run_duration.observe(elapsed, outcome)
        span = self.span
        try:
            if span is not None:
                codes: list[str] = []
                for d in diagnostics:
                    code = str(d.get("code", ""))
                    if code and code not in codes and len(codes) < MAX_DIAGNOSTIC_CODES:
                        codes.append(code)
                trace = (response or {}).get("toolTrace")
                summary = (response or {}).get("toolSummary")
                attributes: dict[str, Any] = {
                    "codemode.run.outcome": outcome,
                    "codemode.diagnostics.codes": codes,
                }
                if isinstance(summary, Mapping) and isinstance(summary.get("calls"), int):
                    attributes["codemode.tool_calls"] = summary["calls"]
                elif isinstance(trace, list):
                    attributes["codemode.tool_calls"] = len(trace)
                span.set_attributes(attributes)
                if outcome not in (OK, INPUT_REQUIRED):
                    # The code only: a diagnostic's message can quote what the script threw.
                    first = next((d for d in diagnostics if d.get("severity") == "error"), None)
                    kind = str(first.get("code")) if first is not None else outcome
                    set_error(span, kind, kind)
                if exc is not None and outcome == HOST_ERROR:
                    span.record_exception(exc)
                if self.telemetry.run_log is not None:
                    shown = f" ({', '.join(codes)})" if codes and outcome != OK else ""
                    self.telemetry.run_log(f"run {outcome}{shown} in {round(elapsed * 1000)} ms")
                span.end()
        finally:
            if self._otel_token is not None:
                from opentelemetry import context as otel_context

                otel_context.detach(self._otel_token)
            if self._wait_token is not None:
                waits.OBSERVER.reset(self._wait_token)
            if self._token is not None:
                RUN_SCOPE.reset(self._token)

    def queue_waited(self, queue: str, began: float, waited: float) -> None:
        """Time spent waiting in `queue` (a sandbox worker, runtime/waits.py `queue_wait`): the
        queue-wait histogram and, when it was a wait worth one, a span."""
        self.telemetry.metrics.queue_wait.observe(waited, queue)
        tracer = self.telemetry.tracer
        if tracer is not None and self.span is not None and waited >= MIN_QUEUE_SPAN_S:
            span = tracer.start_span(
                SPAN_QUEUE, attributes={"codemode.queue": queue}, start_time=_wall_ns(began)
            )
            span.end()


# --------------------------------------------------------------------------- hooks


def current() -> RunScope | None:
    """The run the calling task belongs to (None outside a run)."""
    return RUN_SCOPE.get()


def pause_when(paused: Callable[[], bool]) -> None:
    """The current run may end to ask through input_required, which `paused` then says
    (runtime/codemode/run.py, a resumable run): its outcome, and its waiting calls', say so."""
    scope = RUN_SCOPE.get()
    if scope is not None:
        scope.paused = paused


def note_limits(limits: Limits) -> None:
    """The run's limits, once known (runtime/codemode/run.py)."""
    scope = RUN_SCOPE.get()
    if scope is not None:
        scope.limits(limits)


async def traced(awaitable: Awaitable[T], name: str, **attributes: Any) -> T:
    """`await awaitable` inside a `phase` span: tasks it starts inherit the span."""
    scope = RUN_SCOPE.get()
    if scope is None or scope.span is None:
        return await awaitable
    with scope.telemetry.span(name, attributes) as span:
        result = await awaitable
        if span is not None and name == SPAN_TYPECHECK and isinstance(result, list):
            span.set_attribute("codemode.typecheck.diagnostics", len(result))
        return result


def detached_context() -> contextvars.Context | None:
    """A context for a task that outlives the run starting it (a background connection): no
    current span, so its spans do not count as the run's. None (the caller's context, as usual)
    when no traced run is current."""
    scope = RUN_SCOPE.get()
    if scope is None or scope.span is None:
        return None
    from opentelemetry import context as otel_context

    ctx = contextvars.copy_context()
    ctx.run(otel_context.attach, otel_context.Context())
    ctx.run(RUN_SCOPE.set, None)
    ctx.run(waits.OBSERVER.set, None)
    return ctx
