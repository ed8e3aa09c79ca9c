"""The metrics' gauges of one CodeMode host (runs in progress, workers, queued runs, upstream
sessions): read from the host when /metrics is scraped or OTLP exports, through a weak
reference so that the process-wide metrics never keep a closed host alive."""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from codemode_gen.runtime.codemode import CodeMode


def register_gauges(host: CodeMode) -> None:
    """What the metrics' gauges read from this host when scraped (weakly: the metrics do
    not keep a closed host alive)."""
    metrics, ref = host.telemetry.metrics, weakref.ref(host)
    key = f"codemode-{id(host)}"

    def read(
        pick: Callable[[CodeMode], list[tuple[tuple[str, ...], float]]],
    ) -> Callable[[], Any]:
        def source() -> list[tuple[tuple[str, ...], float]]:
            cm = ref()
            return pick(cm) if cm is not None else []

        return source

    def pool(cm: CodeMode) -> Any:
        return cm._sandbox.pool if cm._sandbox is not None else None

    metrics.runs_in_progress.sources[key] = read(lambda cm: [((), cm.runs_in_progress)])
    metrics.workers.sources[key] = read(
        lambda cm: [] if (p := pool(cm)) is None else [(("busy",), p.busy), (("idle",), p.idle)]
    )
    metrics.workers_max.sources[key] = read(
        lambda cm: [] if (p := pool(cm)) is None else [((), p.max_workers)]
    )
    metrics.runs_queued.sources[key] = read(
        lambda cm: [] if (p := pool(cm)) is None else [(("worker",), p.waiting)]
    )
    metrics.upstream_sessions.sources[key] = read(
        lambda cm: [
            ((cid,), 0 if session.closed else 1)
            for cid, session in sorted(cm._connections.connected.items())
        ]
    )
