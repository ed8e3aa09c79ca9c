"""Which OpenTelemetry providers and exporters this process uses (docs/observability.md).

The host's telemetry (runtime/host/telemetry.py) makes spans and metrics; where they go is
decided once per process, from codemode.toml's `[telemetry]` and the OTEL_* environment
(`resolve`): an application's global providers when it set them up, else SDK providers made
here once and shared by every CodeMode with the same settings, and flushed within EXIT_FLUSH_S
when the process ends (`shutdown`). Kept apart from the per-run hooks because none of it is on a
run's path, and all of it imports the optional SDK (`codemode-gen[otel]`) only when configured.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from codemode_gen import __version__
from codemode_gen.config import TelemetrySettings

log = logging.getLogger(__name__)

#: service.name unless OTEL_SERVICE_NAME or `[telemetry] service_name` says otherwise.
DEFAULT_SERVICE_NAME = "codemode-gen"


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
    service = (
        environ.get("OTEL_SERVICE_NAME", "").strip()
        or settings.service_name
        or DEFAULT_SERVICE_NAME
    )
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
    return Resolved(
        traces,
        metrics,
        traces_exporter,
        metrics_exporter,
        settings.endpoint,
        service,
        settings.record_content,
    )


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
    _warn_once(
        f"telemetry: {what} is configured but the OpenTelemetry SDK is not installed, so none is "
        "made; install it with `pip install 'codemode-gen[otel]'` (or unset the OTEL_* variables / "
        "[telemetry] in codemode.toml)"
    )


def _global_provider(kind: str) -> Any | None:
    """The tracer (or meter) provider an application set globally, if it did (not the API's
    default proxy): an embedding service's own OpenTelemetry set-up is used as it is."""
    if kind == "trace":
        from opentelemetry import trace

        provider: Any = trace.get_tracer_provider()
        return (
            None
            if isinstance(provider, trace.ProxyTracerProvider | trace.NoOpTracerProvider)
            else provider
        )
    if "opentelemetry.metrics" not in sys.modules and not os.environ.get(
        "OTEL_PYTHON_METER_PROVIDER"
    ):
        # Nothing imported the metrics API, so no application set a provider through it (nor
        # names one for the API to load): none, without importing it (~0.3 MB).
        return None
    from opentelemetry import metrics

    meter_provider: Any = metrics.get_meter_provider()
    proxy = getattr(metrics, "_internal", None)
    proxy_type = getattr(proxy, "_ProxyMeterProvider", None) if proxy is not None else None
    if isinstance(meter_provider, metrics.NoOpMeterProvider) or (
        proxy_type is not None and isinstance(meter_provider, proxy_type)
    ):
        return None
    return meter_provider


def _signal_endpoint(resolved: Resolved, signal: str, environ: Mapping[str, str]) -> str | None:
    """The URL an OTLP/HTTP exporter posts to when codemode.toml names the endpoint and the
    environment does not (the exporters read the environment themselves)."""
    if resolved.endpoint is None:
        return None
    if (
        environ.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
        or environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_ENDPOINT", "").strip()
    ):
        return None
    return f"{resolved.endpoint}/v1/{signal}"


def _grpc_wanted(environ: Mapping[str, str], signal: str) -> bool:
    protocol = (
        (
            environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL")
            or environ.get("OTEL_EXPORTER_OTLP_PROTOCOL")
            or "http/protobuf"
        )
        .strip()
        .lower()
    )
    return protocol == "grpc"


def _grpc_exporter(module: str, name: str) -> Any | None:
    """The gRPC exporter (a package of its own, not in the [otel] extra), if installed."""
    import importlib

    try:
        return getattr(
            importlib.import_module(f"opentelemetry.exporter.otlp.proto.grpc.{module}"), name
        )()
    except ImportError:
        _warn_once(
            "telemetry: OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs opentelemetry-exporter-otlp-proto-grpc "
            "(pip install it), or use http/protobuf (port 4318); sending over http/protobuf instead"
        )
        return None


def _span_exporter(resolved: Resolved, environ: Mapping[str, str]) -> Any | None:
    import sys

    if resolved.traces_exporter == "none":
        return None
    if resolved.traces_exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter(out=sys.stderr)  # stdout is serve's protocol
    if resolved.traces_exporter != "otlp":
        _warn_once(
            f"telemetry: traces exporter {resolved.traces_exporter!r} is not supported (otlp, console, "
            "none); spans are made but not exported"
        )
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
        _warn_once(
            f"telemetry: metrics exporter {resolved.metrics_exporter!r} is not supported (otlp, console, "
            "none); metrics are not exported"
        )
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
    key = (
        resolved.traces_exporter if need_traces else None,
        resolved.metrics_exporter if need_metrics else None,
        resolved.endpoint,
        resolved.service_name,
    )
    with _PROCESS_LOCK:
        made = _PROCESS.get(key)
        if made is None:
            made = _make_providers(resolved, environ, need_traces, need_metrics)
            _PROCESS[key] = made
    return traces if traces is not None else made[0], meters if meters is not None else made[1]


def _make_providers(
    resolved: Resolved, environ: Mapping[str, str], traces: bool, metrics: bool
) -> tuple[Any, Any]:
    try:
        from opentelemetry.sdk.resources import Resource
    except ImportError:
        _sdk_missing("tracing" if traces else "metrics export")
        return None, None
    # Resource.create reads OTEL_RESOURCE_ATTRIBUTES and OTEL_SERVICE_NAME itself.
    resource = Resource.create(
        {"service.name": resolved.service_name, "service.version": __version__}
    )
    tracer_provider = meter_provider = None
    try:
        if traces:
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            tracer_provider = TracerProvider(
                resource=resource, shutdown_on_exit=False
            )  # `shutdown` is ours
            span_exporter = _span_exporter(resolved, environ)
            if span_exporter is not None:
                tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
                _EXPORTERS.append(span_exporter)
        if metrics:
            from opentelemetry.sdk.metrics import MeterProvider
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            metric_exporter = _metric_exporter(resolved, environ)
            readers = (
                [PeriodicExportingMetricReader(metric_exporter)]
                if metric_exporter is not None
                else []
            )
            meter_provider = MeterProvider(
                metric_readers=readers, resource=resource, shutdown_on_exit=False
            )
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
