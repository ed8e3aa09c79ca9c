"""The metrics of a Code Mode host, kept in process: what `serve --http` serves at /metrics in the
Prometheus text format (version 0.0.4), and what OpenTelemetry exports through OTLP when it is
configured (runtime/host/telemetry.py; docs/observability.md says what each metric means).

Written here rather than with prometheus_client or the OpenTelemetry SDK so that /metrics works
without either installed, and a metric costs a dictionary update: every run and tool call
records a few. Label values come from names a script may choose (a tool it calls); the
runtime passes only names its catalog knows (others are UNKNOWN_LABEL), and every family keeps
at most MAX_LABEL_SETS label sets.
"""

from __future__ import annotations

import bisect
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from codemode_gen import __version__

__all__ = [
    "MAX_LABEL_SETS",
    "OTHER_LABEL",
    "UNKNOWN_LABEL",
    "Counter",
    "Gauge",
    "Histogram",
    "Metrics",
]

log = logging.getLogger(__name__)

#: The instrumentation scope of the metrics exported through OpenTelemetry.
SCOPE_NAME = "codemode-gen"
#: Label sets one metric family keeps; past it new ones are counted under OTHER_LABEL, so names
#: that keep changing (servers renamed at run time, a runaway of tool names) cannot grow the
#: host's memory or the scrape without end.
MAX_LABEL_SETS = 1000
OTHER_LABEL = "(other)"
#: The server or tool label of a call to a name the run's catalog does not have: a script
#: chooses such names, and each would be a new time series.
UNKNOWN_LABEL = "(unknown)"
# Histogram buckets (seconds): runs from a millisecond to the hard maximum timeoutMs; queue
# waits and tool calls from a fraction of a millisecond to a minute.
RUN_BUCKETS = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)
WAIT_BUCKETS = (
    0.0005,
    0.001,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


def _escape(value: str) -> str:
    """A label value as the text format writes it (backslash, newline and double quote escaped)."""
    return _escape_help(value).replace('"', '\\"')


def _escape_help(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _number(value: float) -> str:
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value)) if not float(value).is_integer() else f"{value:.1f}"


def _labels(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    parts = [f'{n}="{_escape(v)}"' for n, v in zip(names, values, strict=True)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


class _Family:
    """One metric: its samples by label values (at most MAX_LABEL_SETS sets)."""

    kind = ""

    def __init__(
        self, name: str, help_text: str, labelnames: tuple[str, ...], otel_name: str, unit: str
    ) -> None:
        self.name = name
        self.help = help_text
        self.labelnames = labelnames
        self.otel_name = otel_name
        self.unit = unit
        self.mirror: Any = None  # the OpenTelemetry instrument it is also recorded into

    def _key(
        self, store: Mapping[tuple[str, ...], Any], values: tuple[str, ...]
    ) -> tuple[str, ...]:
        if values in store or len(store) < MAX_LABEL_SETS:
            return values
        return tuple(OTHER_LABEL for _ in values)

    def _attributes(self, values: tuple[str, ...]) -> dict[str, str]:
        return dict(zip(self.labelnames, values, strict=True))


class Counter(_Family):
    kind = "counter"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.values: dict[tuple[str, ...], float] = {}

    def add(self, *labels: str, value: float = 1.0) -> None:
        key = self._key(self.values, labels)
        self.values[key] = self.values.get(key, 0.0) + value
        if self.mirror is not None:
            self.mirror.add(value, self._attributes(key))

    def lines(self) -> Iterator[str]:
        for values, total in sorted(self.values.items()):
            yield f"{self.name}{_labels(self.labelnames, values)} {_number(total)}"


class Histogram(_Family):
    kind = "histogram"

    def __init__(self, *args: Any, buckets: tuple[float, ...]) -> None:
        super().__init__(*args)
        self.buckets = buckets
        self.values: dict[
            tuple[str, ...], tuple[list[int], list[float]]
        ] = {}  # (counts per bucket + inf, [sum])

    def observe(self, value: float, *labels: str) -> None:
        key = self._key(self.values, labels)
        entry = self.values.get(key)
        if entry is None:
            entry = self.values[key] = ([0] * (len(self.buckets) + 1), [0.0])
        entry[0][bisect.bisect_left(self.buckets, value)] += 1
        entry[1][0] += value
        if self.mirror is not None:
            self.mirror.record(value, self._attributes(key))

    def count(self, *labels: str) -> int:
        entry = self.values.get(labels)
        return sum(entry[0]) if entry is not None else 0

    def lines(self) -> Iterator[str]:
        for values, (counts, total) in sorted(self.values.items()):
            running = 0
            for bound, count in zip((*self.buckets, math.inf), counts, strict=True):
                running += count
                le = 'le="' + _number(bound) + '"'
                yield f"{self.name}_bucket{_labels(self.labelnames, values, le)} {_number(running)}"
            yield f"{self.name}_sum{_labels(self.labelnames, values)} {_number(total[0])}"
            yield f"{self.name}_count{_labels(self.labelnames, values)} {_number(running)}"


class Gauge(_Family):
    """A value read when it is scraped: from `sources`, each giving label values → value."""

    kind = "gauge"

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.sources: dict[str, Callable[[], Iterable[tuple[tuple[str, ...], float]]]] = {}

    def read(self) -> list[tuple[tuple[str, ...], float]]:
        out: dict[tuple[str, ...], float] = {}
        for source in list(self.sources.values()):
            try:
                for values, value in source():
                    if values in out or len(out) < MAX_LABEL_SETS:
                        out[values] = out.get(values, 0.0) + float(value)
            except (
                Exception
            ) as exc:  # a gauge that cannot be read is left out, never a failed scrape
                log.debug("gauge %s: %s: %s", self.name, type(exc).__name__, exc)
        return sorted(out.items())

    def lines(self) -> Iterator[str]:
        for values, value in self.read():
            yield f"{self.name}{_labels(self.labelnames, values)} {_number(value)}"


class Metrics:
    """The metrics of one host (a CodeMode, and serve --http around it), kept in process.

    `exposition()` is the Prometheus text format (version 0.0.4) that /metrics serves; with an
    OpenTelemetry meter provider (`mirror_to`) every value is also recorded into OpenTelemetry
    instruments, which its readers export (OTLP). Written for the event loop's thread; the
    OpenTelemetry reader's thread only reads gauges."""

    def __init__(self) -> None:
        def counter(name: str, help_text: str, labels: tuple[str, ...], otel_name: str) -> Counter:
            return self._add(Counter(name, help_text, labels, otel_name, "1"))

        def histogram(
            name: str,
            help_text: str,
            labels: tuple[str, ...],
            otel_name: str,
            buckets: tuple[float, ...],
        ) -> Histogram:
            return self._add(Histogram(name, help_text, labels, otel_name, "s", buckets=buckets))

        def gauge(name: str, help_text: str, labels: tuple[str, ...], otel_name: str) -> Gauge:
            return self._add(Gauge(name, help_text, labels, otel_name, "1"))

        self._families: dict[str, _Family] = {}
        self.runs = counter(
            "codemode_runs_total",
            "Runs answered, by outcome (ok, error, timeout, limit, cancelled, host_error).",
            ("outcome",),
            "codemode.runs",
        )
        self.run_duration = histogram(
            "codemode_run_duration_seconds",
            "Time from a run's start (its arrival, queue included) to its answer.",
            ("outcome",),
            "codemode.run.duration",
            RUN_BUCKETS,
        )
        self.queue_wait = histogram(
            "codemode_queue_wait_seconds",
            "Time runs waited: for admission (serve --http's run slots) or for a sandbox worker.",
            ("queue",),
            "codemode.queue.wait",
            WAIT_BUCKETS,
        )
        self.tool_calls = counter(
            "codemode_tool_calls_total",
            "Tool calls scripts made, by server, tool and "
            "outcome (ok, error, denied, timeout, cancelled).",
            ("server", "tool", "outcome"),
            "codemode.tool_calls",
        )
        self.tool_call_duration = histogram(
            "codemode_tool_call_duration_seconds",
            "Time of each tool call, approval and upstream together, by server.",
            ("server",),
            "codemode.tool_call.duration",
            WAIT_BUCKETS,
        )
        self.approvals = counter(
            "codemode_approval_decisions_total",
            "Approval decisions on tool calls (allowed, approved, approved-for-session, denied).",
            ("decision",),
            "codemode.approval.decisions",
        )
        self.runs_in_progress = gauge(
            "codemode_runs_in_progress",
            "Runs started and not answered yet.",
            (),
            "codemode.runs.in_progress",
        )
        self.runs_queued = gauge(
            "codemode_runs_queued",
            "Runs waiting: for admission (serve --http) or for a sandbox worker.",
            ("queue",),
            "codemode.runs.queued",
        )
        self.workers = gauge(
            "codemode_workers",
            "Sandbox worker processes: busy with a run, or idle and ready.",
            ("state",),
            "codemode.workers",
        )
        self.workers_max = gauge(
            "codemode_workers_max",
            "The most sandbox workers running at once ([sandbox] max_workers, --max-workers).",
            (),
            "codemode.workers.max",
        )
        self.upstream_sessions = gauge(
            "codemode_upstream_sessions",
            "Open sessions to upstream MCP servers, by server (config id).",
            ("server",),
            "codemode.upstream.sessions",
        )
        self._mirrored = False

    def _add(self, family: Any) -> Any:
        self._families[family.name] = family
        return family

    def families(self) -> list[_Family]:
        return list(self._families.values())

    def exposition(self) -> str:
        """Every metric in the Prometheus text format (what GET /metrics answers)."""
        out: list[str] = []
        for family in self._families.values():
            out.append(f"# HELP {family.name} {_escape_help(family.help)}")
            out.append(f"# TYPE {family.name} {family.kind}")
            out.extend(family.lines())  # type: ignore[attr-defined]
        return "\n".join(out) + "\n"

    def mirror_to(self, meter_provider: Any) -> None:
        """Record every value into OpenTelemetry instruments of `meter_provider` as well (once)."""
        if self._mirrored or meter_provider is None:
            return
        self._mirrored = True
        from opentelemetry.metrics import CallbackOptions, Observation

        meter = meter_provider.get_meter(SCOPE_NAME, __version__)
        for family in self._families.values():
            if isinstance(family, Counter):
                family.mirror = meter.create_counter(
                    family.otel_name, unit=family.unit, description=family.help
                )
            elif isinstance(family, Histogram):
                family.mirror = meter.create_histogram(
                    family.otel_name,
                    unit=family.unit,
                    description=family.help,
                    explicit_bucket_boundaries_advisory=list(family.buckets),
                )
            elif isinstance(family, Gauge):

                def observe(
                    options: CallbackOptions, gauge: Gauge = family
                ) -> Iterable[Observation]:
                    return [
                        Observation(value, gauge._attributes(values))
                        for values, value in gauge.read()
                    ]

                meter.create_observable_gauge(
                    family.otel_name, callbacks=[observe], unit=family.unit, description=family.help
                )
