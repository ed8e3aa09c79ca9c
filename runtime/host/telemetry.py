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
(`_RUN`, set for the duration of `CodeMode.run`), so the places that call them (runtime/codemode/,
bridge.py, sandbox.py) need one line each and no new parameters; with no run current they do
nothing.
"""

from __future__ import annotations

import atexit
import contextlib
import contextvars
import hashlib
import json
import logging
import math
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from codemode_gen import __version__
from codemode_gen.config import Settings, TelemetrySettings
from codemode_gen.runtime import response as resp
from codemode_gen.runtime.host.metrics import UNKNOWN_LABEL, Metrics

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span, Tracer

    from codemode_gen.runtime.limits import Limits

__all__ = [
    "Metrics",
    "Telemetry",
    "http_context",
    "log_suffix",
    "queue_wait",
    "resolve",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: The instrumentation scope of every span and metric made here.
SCOPE_NAME = "codemode-gen"
#: service.name unless OTEL_SERVICE_NAME or `[telemetry] service_name` says otherwise.
DEFAULT_SERVICE_NAME = "codemode-gen"

# Span names (docs/observability.md says what each means).
SPAN_RUN = "codemode.run"
SPAN_QUEUE = "codemode.queue"
SPAN_TYPECHECK = "codemode.typecheck"
SPAN_CONNECT = "codemode.connect"
SPAN_EXECUTE = "codemode.execute"
SPAN_TOOL_CALL = "codemode.tool_call"
SPAN_APPROVAL = "codemode.approval"

# Run outcomes (span attribute codemode.run.outcome and the `outcome` label).
OK, ERROR, TIMEOUT, LIMIT, CANCELLED, HOST_ERROR = "ok", "error", "timeout", "limit", "cancelled", "host_error"
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

# --------------------------------------------------------------------------- configuration


@dataclass(frozen=True)
class Resolved:
    """What `[telemetry]` and the OTEL_* environment decide together (`resolve`)."""

    traces: bool
    metrics: bool  # OTLP export of the metrics (/metrics is serve --http's, always)
    traces_exporter: str  # otlp | console | none
    metrics_exporter: str
    endpoint: str | None  # from codemode.toml only: the environment's is read by the exporters
    service_name: str
    record_content: bool


def _env_flag(environ: Mapping[str, str], name: str) -> bool:
    return environ.get(name, "").strip().lower() == "true"


def _env_exporter(environ: Mapping[str, str], name: str) -> str | None:
    """The first exporter an OTEL_*_EXPORTER variable names (a comma-separated list), if set."""
    value = environ.get(name, "").strip().lower()
    return value.split(",")[0].strip() or None if value else None


def resolve(settings: TelemetrySettings, environ: Mapping[str, str]) -> Resolved:
    """Tracing is on when codemode.toml says `traces = true`, else when an OTLP endpoint is
    configured (OTEL_EXPORTER_OTLP_ENDPOINT, OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, `endpoint`) or
    OTEL_TRACES_EXPORTER names an exporter; OTEL_TRACES_EXPORTER=none and OTEL_SDK_DISABLED=true
    turn it off whatever the file says (the environment is the deployment's word). Metrics alike,
    with OTEL_METRICS_EXPORTER and OTEL_EXPORTER_OTLP_METRICS_ENDPOINT."""
    service = environ.get("OTEL_SERVICE_NAME", "").strip() or settings.service_name or DEFAULT_SERVICE_NAME
    if _env_flag(environ, "OTEL_SDK_DISABLED"):
        return Resolved(False, False, "none", "none", None, service, settings.record_content)
    any_endpoint = bool(environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or settings.endpoint)

    def decide(signal: str, configured: bool | None) -> tuple[bool, str]:
        named = _env_exporter(environ, f"OTEL_{signal}_EXPORTER")
        if named == "none":
            return False, "none"
        exporter = named or settings.exporter or "otlp"
        if configured is not None:
            return configured, exporter
        own_endpoint = bool(environ.get(f"OTEL_EXPORTER_OTLP_{signal}_ENDPOINT", "").strip())
        return named is not None or any_endpoint or own_endpoint, exporter

    traces, traces_exporter = decide("TRACES", settings.traces)
    metrics, metrics_exporter = decide("METRICS", settings.metrics)
    return Resolved(traces, metrics, traces_exporter, metrics_exporter, settings.endpoint, service,
                    settings.record_content)


# The providers this process set up (one per process, as OpenTelemetry's globals are): keyed by
# what was resolved, so a second CodeMode with the same settings shares them.
_PROCESS_LOCK = threading.Lock()
_PROCESS: dict[tuple[Any, ...], tuple[Any, Any]] = {}
_EXPORTERS: list[Any] = []  # theirs: `shutdown` aborts an export still retrying
_SHUT_DOWN: list[bool] = []
_WARNED: set[str] = set()
#: Bounds how long a process that is ending waits for its last spans and metrics to reach the
#: collector (serve after SIGTERM, `run` at exit): an unreachable one would hold it for the
#: exporters' retries, OTEL_EXPORTER_OTLP_TIMEOUT (10 s) per batch and signal, past a process
#: manager's stop timeout. What is not sent by then is dropped.
EXIT_FLUSH_S = 5.0


def _warn_once(message: str) -> None:
    if message not in _WARNED:
        _WARNED.add(message)
        log.warning("%s", message)


def _sdk_missing(what: str) -> None:
    _warn_once(f"telemetry: {what} is configured but the OpenTelemetry SDK is not installed, so none is "
               "made; install it with `pip install 'codemode-gen[otel]'` (or unset the OTEL_* variables / "
               "[telemetry] in codemode.toml)")


def _global_provider(kind: str) -> Any | None:
    """The tracer (or meter) provider an application set globally, if it did (not the API's
    default proxy): an embedding service's own OpenTelemetry set-up is used as it is."""
    if kind == "trace":
        from opentelemetry import trace

        provider: Any = trace.get_tracer_provider()
        return None if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider) else provider
    from opentelemetry import metrics

    meter_provider: Any = metrics.get_meter_provider()
    proxy = getattr(metrics, "_internal", None)
    proxy_type = getattr(proxy, "_ProxyMeterProvider", None) if proxy is not None else None
    if isinstance(meter_provider, metrics.NoOpMeterProvider) or (proxy_type is not None and isinstance(meter_provider, proxy_type)):
        return None
    return meter_provider


def _signal_endpoint(resolved: Resolved, signal: str, environ: Mapping[str, str]) -> str | None:
    """The URL an OTLP/HTTP exporter posts to when codemode.toml names the endpoint and the
    environment does not (the exporters read the environment themselves)."""
    if resolved.endpoint is None:
        return None
    if environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip() or environ.get(
            f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip():
        return None
    return f"{resolved.endpoint}/v1/{signal}"


def _grpc_wanted(environ: Mapping[str, str], signal: str) -> bool:
    protocol = (environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or
                environ.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip().lower()
    return protocol == "grpc"


def _grpc_exporter(module: str, name: str) -> Any | None:
    """The gRPC exporter (a package of its own, not in the [otel] extra), if installed."""
    import importlib

    try:
        return getattr(importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{module}"), name)()
    except ImportError:
        _warn_once("telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
                   "(pip install it), or use http/protobuf (port 4318); sending over http/protobuf instead")
        return None


def _span_exporter(resolved: Resolved, environ: Mapping[str, str]) -> Any | None:
    import sys

    if resolved.traces_exporter == "none":
        return None
    if resolved.traces_exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout is serve's protocol
    if resolved.traces_exporter != "otlp":
        _warn_once(f"telemetry: traces exporter {resolved.traces_exporter!r} is not supported (otlp, console, "
                   "none); spans are made but not exported")
        return None
    if _grpc_wanted(environ, "traces"):
        grpc = _grpc_exporter("trace_exporter", "OTLPSpanExporter")
        if grpc is not None:
            return grpc
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    endpoint = _signal_endpoint(resolved, "traces", environ)
    return OTLPSpanExporter(endpoint=endpoint) if endpoint else OTLPSpanExporter()


def _metric_exporter(resolved: Resolved, environ: Mapping[str, str]) -> Any | None:
    import sys

    if resolved.metrics_exporter == "none":
        return None
    if resolved.metrics_exporter == "console":
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter(out=sys.stderr)
    if resolved.metrics_exporter != "otlp":
        _warn_once(f"telemetry: metrics exporter {resolved.metrics_exporter!r} is not supported (otlp, console, "
                   "none); metrics are not exported")
        return None
    if _grpc_wanted(environ, "metrics"):
        grpc = _grpc_exporter("metric_exporter", "OTLPMetricExporter")
        if grpc is not None:
            return grpc
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    endpoint = _signal_endpoint(resolved, "metrics", environ)
    return OTLPMetricExporter(endpoint=endpoint) if endpoint else OTLPMetricExporter()


def _providers(resolved: Resolved, environ: Mapping[str, str]) -> tuple[Any, Any]:
    """(tracer provider, meter provider) for `resolved`, None where that signal is off: the
    application's global ones when it set them, else SDK providers made here once per process.

    Those are not made the process's global providers: the MCP SDK records spans of its own
    through the global one, and its client spans carry an upstream server's error message as
    their status, unredacted (a secret the server echoed would reach the collector). Without
    them nothing is lost: the SDK's no-op spans still carry the incoming `_meta` context to the
    run's span and the run's context into the upstream requests."""
    traces = _global_provider("trace") if resolved.traces else None
    meters = _global_provider("metrics") if resolved.metrics else None
    need_traces = resolved.traces and traces is None
    need_metrics = resolved.metrics and meters is None
    if not need_traces and not need_metrics:
        return traces, meters
    key = (resolved.traces_exporter if need_traces else None, resolved.metrics_exporter if need_metrics else None,
           resolved.endpoint, resolved.service_name)
    with _PROCESS_LOCK:
        made = _PROCESS.get(key)
        if made is None:
            made = _make_providers(resolved, environ, need_traces, need_metrics)
            _PROCESS[key] = made
    return traces if traces is not None else made[0], meters if meters is not None else made[1]


def _make_providers(resolved: Resolved, environ: Mapping[str, str], traces: bool, metrics: bool) -> tuple[Any, Any]:
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        _sdk_missing("tracing" if traces else "metrics export")
        return None, None
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME itself.
    resource = Resource.create({"service.name": resolved.service_name, "service.version": __version__})
    tracer_provider = meter_provider = None
    try:
        if traces:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)  # `shutdown` is ours
            span_exporter = _span_exporter(resolved, environ)
            if span_exporter is not None:
                tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
                _EXPORTERS.append(span_exporter)
        if metrics:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            metric_exporter = _metric_exporter(resolved, environ)
            readers = [PeriodicExportingMetricReader(metric_exporter)] if metric_exporter is not None else []
            meter_provider = MeterProvider(metric_readers=readers, resource=resource, shutdown_on_exit=False)
            if metric_exporter is not None:
                _EXPORTERS.append(metric_exporter)
    except ImportError as exc:
        _sdk_missing(f"{'tracing' if traces else 'metrics export'} ({exc.name} missing)")
    if tracer_provider is not None or meter_provider is not None:
        atexit.register(shutdown)
    return tracer_provider, meter_provider


def shutdown(timeout_s: float = EXIT_FLUSH_S) -> None:
    """Export what the providers made here still hold, waiting at most `timeout_s`, then stop
    their exporters (an export still retrying gives up): a process about to exit, its last
    runs' spans. Once per process; providers an application set up are the application's."""
    with _PROCESS_LOCK:
        if _SHUT_DOWN:
            return
        _SHUT_DOWN.append(True)
        providers = [p for pair in _PROCESS.values() for p in pair if p is not None]
        exporters = list(_EXPORTERS)
    if not providers:
        return

    def flush_all() -> None:
        for provider in providers:
            with contextlib.suppress(Exception):
                provider.force_flush(int(timeout_s * 1000))

    flushing = threading.Thread(target=flush_all, name="codemode-telemetry-flush", daemon=True)
    flushing.start()
    flushing.join(timeout_s)
    for exporter in exporters:
        with contextlib.suppress(Exception):
            exporter.shutdown()


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
            tracer_provider.get_tracer(SCOPE_NAME, __version__) if tracer_provider is not None else None
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
    def from_settings(cls, settings: Settings, environ: Mapping[str, str] | None = None) -> Telemetry:
        environ = os.environ if environ is None else environ
        resolved = resolve(settings.telemetry, environ)
        tracer_provider = meter_provider = None
        if resolved.traces or resolved.metrics:
            tracer_provider, meter_provider = _providers(resolved, environ)
        elif not _env_flag(environ, "OTEL_SDK_DISABLED"):  # the application's own set-up, if it made one
            tracer_provider, meter_provider = _global_provider("trace"), _global_provider("metrics")
        return cls(tracer_provider=tracer_provider, meter_provider=meter_provider,
                   record_content=resolved.record_content, redact_patterns=settings.redact_patterns)

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
        with tracer.start_as_current_span(name, attributes=dict(attributes or {}), record_exception=False,
                                          set_status_on_exception=False) as span:
            try:
                yield span
            except BaseException as exc:
                kind = CANCELLED if not isinstance(exc, Exception) else type(exc).__name__
                _set_error(span, kind, kind)
                raise

    def redact(self, text: str) -> str:
        """codemode.toml's `redact` patterns replaced in recorded content (record_content)."""
        if not self.redact_patterns:
            return text
        from codemode_gen.generator.redact import Redactor

        return Redactor(None, self.redact_patterns).text(text)


_RUN: contextvars.ContextVar[RunScope | None] = contextvars.ContextVar("codemode_run", default=None)
_CALL: contextvars.ContextVar[_ToolCall | None] = contextvars.ContextVar("codemode_tool_call", default=None)


def _wall_ns(monotonic_s: float) -> int:
    """A `time.monotonic()` instant as the wall-clock nanoseconds spans are stamped with."""
    return time.time_ns() - int((time.monotonic() - monotonic_s) * 1e9)


def _cut(text: str) -> str:
    return text if len(text) <= MAX_CONTENT_CHARS else text[:MAX_CONTENT_CHARS] + f"…[+{len(text) - MAX_CONTENT_CHARS} chars]"


def _set_error(span: Span, description: str, error_type: str | None = None) -> None:
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
        self._otel_token: Any = None
        self._response: Mapping[str, Any] | None = None
        # Whether the run is ending to ask through input_required (its journal's word).
        self.paused: Callable[[], bool] | None = None

    def is_paused(self) -> bool:
        return self.paused is not None and self.paused()

    def __enter__(self) -> RunScope:
        self._token = _RUN.set(self)
        tracer = self.telemetry.tracer
        waited = self.called - self.started
        if tracer is not None:
            from opentelemetry import context as otel_context
            from opentelemetry import trace

            attributes: dict[str, Any] = {
                "codemode.script.chars": len(self.code),
                "codemode.script.sha256": hashlib.sha256(self.code.encode("utf-8", "surrogatepass")).hexdigest(),
            }
            if self.telemetry.tool_name:
                attributes["codemode.run.tool"] = self.telemetry.tool_name
            if self.telemetry.record_content:
                attributes["codemode.script"] = _cut(self.telemetry.redact(self.code))
            start = _wall_ns(self.started)
            self.span = tracer.start_span(SPAN_RUN, attributes=attributes, start_time=start)
            self._otel_token = otel_context.attach(trace.set_span_in_context(self.span))
            if waited >= MIN_QUEUE_SPAN_S:
                # Waiting before the run was called (serve --http's admission queue) counts
                # within its timeoutMs (§3.2.4): a child span from its arrival to now.
                queued = tracer.start_span(SPAN_QUEUE, attributes={"codemode.queue": "admission"}, start_time=start)
                queued.end(time.time_ns())
        if self.queued:
            self.telemetry.metrics.queue_wait.observe(waited, "admission")
        return self

    def limits(self, limits: Limits) -> None:
        if self.span is not None:
            self.span.set_attributes({
                "codemode.limits.timeout_ms": limits.timeoutMs,
                "codemode.limits.max_memory_bytes": limits.maxMemoryBytes,
                "codemode.limits.max_log_bytes": limits.maxLogBytes,
                "codemode.limits.max_tool_calls": limits.maxToolCalls,
                "codemode.limits.max_concurrent_calls": limits.maxConcurrentCalls,
            })

    def finish(self, response: T) -> T:
        """The run's response (the scope's end reads its outcome from it); returned as is."""
        self._response = response if isinstance(response, Mapping) else None
        return response

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        response = self._response
        diagnostics = [d for d in (response or {}).get("diagnostics", []) if isinstance(d, Mapping)]
        if response is not None:
            errors = [d for d in diagnostics if d.get("severity") == "error"]
            if self.is_paused():
                outcome = INPUT_REQUIRED
            elif not errors:
                outcome = OK
            elif resp.hit_limit(errors, "timeoutMs"):
                outcome = TIMEOUT
            elif any(d.get("code") == resp.SANDBOX_LIMIT for d in errors):
                outcome = LIMIT
            else:
                outcome = ERROR
        elif exc is not None and not isinstance(exc, Exception):
            outcome = CANCELLED  # the caller cancelled the run (the client's notifications/cancelled)
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
                attributes: dict[str, Any] = {"codemode.run.outcome": outcome, "codemode.diagnostics.codes": codes}
                if isinstance(summary, Mapping) and isinstance(summary.get("calls"), int):
                    attributes["codemode.tool_calls"] = summary["calls"]
                elif isinstance(trace, list):
                    attributes["codemode.tool_calls"] = len(trace)
                span.set_attributes(attributes)
                if outcome not in (OK, INPUT_REQUIRED):
                    # The code only: a diagnostic's message can quote what the script threw.
                    first = next((d for d in diagnostics if d.get("severity") == "error"), None)
                    kind = str(first.get("code")) if first is not None else outcome
                    _set_error(span, kind, kind)
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
            if self._token is not None:
                _RUN.reset(self._token)



# --------------------------------------------------------------------------- hooks


def current() -> RunScope | None:
    """The run the calling task belongs to (None outside a run)."""
    return _RUN.get()


def pause_when(paused: Callable[[], bool]) -> None:
    """The current run may end to ask through input_required, which `paused` then says
    (runtime/codemode/run.py, a resumable run): its outcome, and its waiting calls', say so."""
    scope = _RUN.get()
    if scope is not None:
        scope.paused = paused


def note_limits(limits: Limits) -> None:
    """The run's limits, once known (runtime/codemode/run.py)."""
    scope = _RUN.get()
    if scope is not None:
        scope.limits(limits)


async def traced(awaitable: Awaitable[T], name: str, **attributes: Any) -> T:
    """`await awaitable` inside a `phase` span: tasks it starts inherit the span."""
    scope = _RUN.get()
    if scope is None or scope.span is None:
        return await awaitable
    with scope.telemetry.span(name, attributes) as span:
        result = await awaitable
        if span is not None and name == SPAN_TYPECHECK and isinstance(result, list):
            span.set_attribute("codemode.typecheck.diagnostics", len(result))
        return result


class queue_wait:  # lower case: used as a function, `with queue_wait("worker"):`
    """Time spent waiting in `queue` (a sandbox worker): the queue-wait histogram and, when it
    was a wait worth one, a span. (A class, not a generator: it is on every run's path.)"""

    __slots__ = ("began", "queue", "scope")

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.scope = _RUN.get()
        self.began = 0.0

    def __enter__(self) -> None:
        self.began = time.monotonic()

    def __exit__(self, *exc: object) -> None:
        scope = self.scope
        if scope is None:
            return
        waited = time.monotonic() - self.began
        scope.telemetry.metrics.queue_wait.observe(waited, self.queue)
        tracer = scope.telemetry.tracer
        if tracer is not None and scope.span is not None and waited >= MIN_QUEUE_SPAN_S:
            span = tracer.start_span(SPAN_QUEUE, attributes={"codemode.queue": self.queue},
                                     start_time=_wall_ns(self.began))
            span.end()


def detached_context() -> contextvars.Context | None:
    """A context for a task that outlives the run starting it (a background connection): no
    current span, so its spans do not count as the run's. None (the caller's context, as usual)
    when no traced run is current."""
    scope = _RUN.get()
    if scope is None or scope.span is None:
        return None
    from opentelemetry import context as otel_context

    ctx = contextvars.copy_context()
    ctx.run(otel_context.attach, otel_context.Context())
    ctx.run(_RUN.set, None)
    return ctx


class _ToolCall:
    """One tool call of a traced run: its span, and its approval wait's."""

    def __init__(self, scope: RunScope, span: Span | None) -> None:
        self.scope = scope
        self.span = span
        self.approval: Span | None = None

    def asked(self) -> None:
        tracer = self.scope.telemetry.tracer
        if tracer is None or self.span is None or self.approval is not None:
            return
        from opentelemetry import trace

        self.approval = tracer.start_span(SPAN_APPROVAL, context=trace.set_span_in_context(self.span))

    def decided(self, decision: str, for_run: bool = False) -> None:
        if self.approval is not None:
            self.approval.set_attribute("codemode.approval", decision)
            if for_run:
                # The answer approved this tool's further calls of the run too: those calls
                # are "approved-for-run" without a wait of their own.
                self.approval.set_attribute("codemode.approval.for_run", True)
            if decision == "denied":
                _set_error(self.approval, "denied", DENIED)
            self.approval.end()
            self.approval = None


def _call_outcome(error: Mapping[str, Any] | None) -> str:
    if error is None:
        return OK
    code = error.get("code")
    if code == "APPROVAL_DENIED":
        return DENIED
    if code == "timeout":
        return TIMEOUT
    return ERROR


async def traced_call(
    call: Awaitable[dict[str, Any]],
    server: str,
    tool: str,
    gate: Mapping[str, str],
    request: Mapping[str, Any],
    redact: Callable[[str], str] | None = None,
) -> dict[str, Any]:
    """`await call` (the bridge's `_call` of one tool call) as the run's telemetry sees it: a
    span current while it runs (the SDK's client injects it into the upstream request's
    `_meta`), the tool-call metrics, the approval decision. `server` and `tool` are the
    sanitised names; `gate` the bridge's approval record of this call; `request` the sandbox's
    (its `input` is recorded only with record_content, through `redact`)."""
    scope = _RUN.get()
    if scope is None:
        return await call
    telemetry = scope.telemetry
    tracer = telemetry.tracer
    span: Span | None = None
    otel_token = None
    if tracer is not None and scope.span is not None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        span = tracer.start_span(f"{SPAN_TOOL_CALL} {server}.{tool}",
                                 attributes={"codemode.server": server, "codemode.tool": tool})
        otel_token = otel_context.attach(trace.set_span_in_context(span))
    record = _ToolCall(scope, span)
    token = _CALL.set(record)
    began = time.monotonic()
    reply: dict[str, Any] | None = None
    try:
        reply = await call
        return reply
    finally:
        _CALL.reset(token)
        if reply is None and gate.get("approval") == "pending" and scope.is_paused():
            # Asked through input_required: the run ends to wait, and its retry makes the call
            # (counted there); here only the span, and the wait's, say so.
            record.decided(INPUT_REQUIRED)
            if span is not None:
                span.set_attributes({"codemode.call.outcome": INPUT_REQUIRED, "codemode.approval": INPUT_REQUIRED})
                span.end()
        else:
            _finish_call(scope, record, span, server, tool, gate, request, reply, time.monotonic() - began, redact)
        if otel_token is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(otel_token)


def _finish_call(
    scope: RunScope, record: _ToolCall, span: Span | None, server: str, tool: str, gate: Mapping[str, str],
    request: Mapping[str, Any], reply: dict[str, Any] | None, elapsed: float, redact: Callable[[str], str] | None,
) -> None:
    """A tool call's metrics and span, once it has ended (`reply` None: the run ended first)."""
    telemetry = scope.telemetry
    error = reply.get("error") if reply is not None and not reply.get("ok") else None
    decision = gate.get("approval")
    if reply is None:
        outcome = CANCELLED
        if decision == "pending":
            decision = "denied"  # never sent: the run ended before an answer (as the trace says)
    else:
        outcome = _call_outcome(error if isinstance(error, Mapping) else None)
    record.decided(decision or "")  # an approval wait the end of the run cut short
    error_class = str(error.get("errorClass", "")) if isinstance(error, Mapping) else ""
    # Names the catalog does not know are the script's choice: one label for all of them.
    server_label = UNKNOWN_LABEL if error_class == "ServerNotFoundError" else server
    tool_label = UNKNOWN_LABEL if error_class in ("ServerNotFoundError", "ToolNotFoundError") else tool
    metrics = telemetry.metrics
    metrics.tool_calls.add(server_label, tool_label, outcome)
    metrics.tool_call_duration.observe(elapsed, server_label)
    if decision and decision != "pending":
        metrics.approvals.add(decision)
    if span is not None:
        _finish_call_span(span, telemetry, outcome, elapsed, decision, error, request, reply, redact)


def _finish_call_span(
    span: Span, telemetry: Telemetry, outcome: str, elapsed: float, decision: str | None,
    error: Any, request: Mapping[str, Any], reply: Mapping[str, Any] | None, redact: Callable[[str], str] | None,
) -> None:
    from codemode_gen.runtime.host.bridge import trace_error

    attributes: dict[str, Any] = {"codemode.call.outcome": outcome, "codemode.call.duration_ms": round(elapsed * 1000, 3)}
    if decision:
        attributes["codemode.approval"] = decision
    if isinstance(error, Mapping) and error.get("code") is not None:
        attributes["codemode.call.error_code"] = str(error["code"])
    span.set_attributes(attributes)
    if telemetry.record_content:
        clean = redact or telemetry.redact
        if "input" in request:
            span.set_attribute("codemode.call.input", _cut(clean(_json(request["input"]))))
        if reply is not None and reply.get("ok"):
            span.set_attribute("codemode.call.output", _cut(clean(_json(reply.get("value")))))
    if outcome == CANCELLED:
        _set_error(span, "cancelled when the run ended", CANCELLED)
    elif isinstance(error, Mapping):
        error_class = str(error.get("errorClass") or "ToolCallError")
        if "content" in error and not telemetry.record_content:
            # A tool's isError text is its output: not in telemetry unless record_content.
            description = f"{error_class}: the tool reported an error (isError)"
        else:
            description = trace_error(str(error.get("_summary") or error_class))
        _set_error(span, description, error_class)
    span.end()


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def approval_asked() -> None:
    """A person is about to be asked about the current tool call: its approval wait begins."""
    record = _CALL.get()
    if record is not None:
        record.asked()


async def traced_approval(decide: Awaitable[T], for_run: Callable[[], bool] | None = None) -> T:
    """`await decide` (the approval gate's decision on the current tool call); an approval wait
    `approval_asked` opened ends with it, carrying the decision, and whether a yes was for the
    rest of the run (`for_run`, asked only after a yes)."""
    record = _CALL.get()
    if record is None:
        return await decide
    outcome = await decide
    decision = str(getattr(outcome, "decision", ""))
    record.decided(decision, decision == "approved" and for_run is not None and for_run())
    return outcome


# --------------------------------------------------------------------------- serve


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

    def __init__(self, write: Callable[[str], None], *, prefix: str = "", interval: float = 0.0) -> None:
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
                        kind not in self._last and len(self._last) >= MAX_EXPORT_NOTICE_KINDS):
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
    _install("opentelemetry", LineHandler(write, prefix="telemetry: ", interval=EXPORT_NOTICE_INTERVAL_S))


def _install(name: str, handler: LineHandler) -> None:
    logger = logging.getLogger(name)
    if not any(isinstance(h, LineHandler) for h in logger.handlers):
        logger.addHandler(handler)
        logger.propagate = False
