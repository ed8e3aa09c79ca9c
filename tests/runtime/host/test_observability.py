"""Observability (docs/observability.md, runtime/host/telemetry.py, runtime/host/metrics.py): OpenTelemetry
spans of runs and tool calls, W3C trace context carried to the upstream servers, and the
Prometheus metrics of `serve --http`.

Everything runs for real: QuickJS, MCP server processes over stdio (tests/servers/meta_echo.py
records the `_meta` each call arrives with; tests/servers/slow.py), the OpenTelemetry SDK's
in-memory exporter for the Python API, a real `codemode-gen serve --http` exporting OTLP/HTTP to
a receiver on 127.0.0.1 that decodes the protobuf with the official `opentelemetry-proto`
types, and prometheus_client's parser for /metrics.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import signal
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import anyio
import pytest

from codemode_gen.codemode_toml import load_settings
from codemode_gen.config import Settings, TelemetrySettings
from codemode_gen.errors import UserError
from codemode_gen.runtime.host import telemetry, telemetry_serve
from codemode_gen.runtime.host.approval_request import FOR_RUN
from codemode_gen.runtime.host.metrics import MAX_LABEL_SETS, OTHER_LABEL, Metrics
from codemode_gen.runtime.host.otel_setup import resolve
from codemode_gen.runtime.host.telemetry import Telemetry
from tests.conftest import PROMPT_S
from tests.runtime.frontends.test_serve_http import TOKEN, http_get, in_client, start_serve
from tests.runtime_support import (
    PYTHON,
    RUN_TIMEOUT,
    HostThread,
    against_serve,
    assert_ok,
    codes,
    script,
    stdio,
)

SECRET = "meta-secret-4b1d93c7"  # meta_echo's META_SECRET: quoted by its `reject` tool
INPUT_MARKER = "INPUT-MARKER-7f3a"  # sent as a tool input
OUTPUT_MARKER = "OUTPUT-MARKER-c41e"  # comes back as a tool output
# A client's W3C trace context (version 00, sampled).
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_ID}-01"
OTHER_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
OTHER_TRACEPARENT = f"00-{OTHER_TRACE_ID}-b7ad6b7169203331-01"


def _trace_id(traceparent: Any) -> str:
    assert isinstance(traceparent, str), traceparent
    return traceparent.split("-")[1]


def _all_attribute_text(spans: list[Any]) -> str:
    """Every attribute value and status description of `spans`, as one text."""
    parts: list[str] = []
    for span in spans:
        parts += [
            json.dumps(list(v) if isinstance(v, tuple) else v)
            for v in (span.attributes or {}).values()
        ]
        parts.append(span.status.description or "")
        parts += [str(event.attributes) for event in span.events]
    return "\n".join(parts)


# --------------------------------------------------------------------------- Python API: span tree


CONNECT_SCRIPT = 'import * as meta from "@codemode/servers/meta";\nimport * as slow from "@codemode/servers/slow";'
TREE_SCRIPT = f"""
import * as meta from "@codemode/servers/meta";
import * as slow from "@codemode/servers/slow";
await meta.meta({{}});
let failed = null;
try {{ await meta.reject({{}}); }} catch (e) {{ failed = e.name; }}
await meta.publish({{text: "{INPUT_MARKER}"}});
const echoed = await slow.echo({{value: "{OUTPUT_MARKER}"}});
console.log(failed, echoed.value);
await slow.sleep({{ms: 60000}});
"""


def _traced_host(tmp_path: Path, *, record_content: bool = False) -> tuple[HostThread, Any]:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    configs = {
        "meta": stdio(
            "meta",
            "meta_echo",
            "--record",
            str(tmp_path / "meta.jsonl"),
            env={"META_SECRET": SECRET},
        ),
        "slow": stdio("slow", "slow"),
    }
    # Connected by the first run (its imports name both), so their connect spans are its own.
    host = HostThread(
        configs,
        tmp_path / "out",
        tmp_path / "logs",
        connect=False,
        telemetry=Telemetry(tracer_provider=provider, record_content=record_content),
    )
    return host, exporter


@pytest.mark.slow
def test_span_tree_of_a_run_with_two_servers_a_failing_call_an_approval_and_a_timeout(
    tmp_path: Path,
) -> None:
    host, exporter = _traced_host(tmp_path)
    asked: list[str] = []

    async def approve(request: Any) -> bool:
        asked.append(f"{request.server_id}.{request.tool_name}")
        return True

    try:
        # The first run connects both servers (a cold start is no part of the tree under test).
        assert_ok(host.run(CONNECT_SCRIPT))
        connected = exporter.get_finished_spans()
        exporter.clear()
        response = host.run(TREE_SCRIPT, limits={"timeoutMs": 4000}, approve=approve)
    finally:
        host.close()
    (first,) = [s for s in connected if s.name == "codemode.run"]
    connects = [s for s in connected if s.name == "codemode.connect"]
    assert sorted(str((s.attributes or {})["codemode.server"]) for s in connects) == [
        "meta",
        "slow",
    ]
    assert all(s.parent is not None and s.parent.span_id == first.context.span_id for s in connects)
    assert asked == ["meta.publish"]
    assert "SANDBOX_LIMIT" in codes(response, "error")  # the run timed out in slow.sleep
    assert response["logs"][0]["message"] == f"ToolCallError {OUTPUT_MARKER}"

    spans = exporter.get_finished_spans()
    by_id = {span.context.span_id: span for span in spans}

    def children(span: Any, name: str | None = None) -> list[Any]:
        found = [
            s for s in spans if s.parent is not None and s.parent.span_id == span.context.span_id
        ]
        return [s for s in found if name is None or s.name.startswith(name)]

    (run,) = [s for s in spans if s.name == "codemode.run"]
    assert run.parent is None  # nothing was current: the run is the trace's root
    assert {s.context.trace_id for s in spans} == {run.context.trace_id}
    attrs = run.attributes or {}
    assert attrs["codemode.run.outcome"] == "timeout"
    assert "SANDBOX_LIMIT" in attrs["codemode.diagnostics.codes"]
    assert attrs["codemode.limits.timeout_ms"] == 4000
    assert attrs["codemode.script.chars"] == len(TREE_SCRIPT)
    assert attrs["codemode.script.sha256"] == hashlib.sha256(TREE_SCRIPT.encode()).hexdigest()
    assert attrs["codemode.tool_calls"] == 5
    assert run.status.status_code.name == "ERROR" and run.status.description == "SANDBOX_LIMIT"

    assert not children(run, "codemode.connect")  # connected already
    (execute,) = children(run, "codemode.execute")
    calls = {s.name: s for s in children(execute, "codemode.tool_call")}
    assert sorted(calls) == [
        f"codemode.tool_call {n}"
        for n in ("meta.meta", "meta.publish", "meta.reject", "slow.echo", "slow.sleep")
    ]
    outcome = {
        name.split(" ")[1]: (s.attributes or {})["codemode.call.outcome"]
        for name, s in calls.items()
    }
    assert outcome == {
        "meta.meta": "ok",
        "meta.reject": "error",
        "meta.publish": "ok",
        "slow.echo": "ok",
        "slow.sleep": "cancelled",
    }
    approval = {
        name.split(" ")[1]: (s.attributes or {})["codemode.approval"] for name, s in calls.items()
    }
    assert approval["meta.publish"] == "approved" and approval["meta.meta"] == "allowed"
    for span in calls.values():
        assert (span.attributes or {})["codemode.server"] in ("meta", "slow")
        assert isinstance((span.attributes or {})["codemode.call.duration_ms"], float)

    # The failing call: its class, the server's JSON-RPC code, the server's message redacted.
    reject = calls["codemode.tool_call meta.reject"]
    assert (reject.attributes or {})["error.type"] == "ToolCallError"
    assert (reject.attributes or {})["codemode.call.error_code"] == "-32010"
    assert "upstream refused token <redacted:META_SECRET>" in (reject.status.description or "")
    # The call the timeout cut short.
    sleep = calls["codemode.tool_call slow.sleep"]
    assert sleep.status.status_code.name == "ERROR" and "run ended" in (
        sleep.status.description or ""
    )
    # The approval wait: a child of its call, with the decision.
    (waited,) = children(calls["codemode.tool_call meta.publish"], "codemode.approval")
    assert (waited.attributes or {})["codemode.approval"] == "approved"
    assert not [s for s in spans if s.name == "codemode.approval" and s is not waited]
    assert all(s.parent is None or s.parent.span_id in by_id for s in spans)  # one tree, no orphan

    # Never the script text, a tool input or output, or a server's secret in any attribute.
    text = _all_attribute_text(spans)
    for leaked in (INPUT_MARKER, OUTPUT_MARKER, SECRET, "slow.sleep({ms"):
        assert leaked not in text

    # The call carried the current context upstream: its _meta traceparent is this trace, and
    # its parent is the tool call's span.
    traceparent = _recorded(tmp_path / "meta.jsonl", "meta")[0]["traceparent"]
    assert _trace_id(traceparent) == f"{run.context.trace_id:032x}"
    assert (
        traceparent.split("-")[2] == f"{calls['codemode.tool_call meta.meta'].context.span_id:016x}"
    )


@pytest.mark.slow
def test_an_answer_for_the_rest_of_the_run_is_one_approval_wait(tmp_path: Path) -> None:
    host, exporter = _traced_host(tmp_path)
    asked: list[str] = []

    async def approve(request: Any) -> Any:
        asked.append(f"{request.server_id}.{request.tool_name}")
        return FOR_RUN

    code = (
        'import * as meta from "@codemode/servers/meta";\n'
        'for (const text of ["a", "b", "c"]) await meta.publish({text});'
    )
    try:
        assert_ok(host.run(code, approve=approve))
        metrics = host.cm.telemetry.metrics
    finally:
        host.close()
    assert asked == ["meta.publish"]
    spans = exporter.get_finished_spans()
    calls = sorted(
        (s for s in spans if s.name == "codemode.tool_call meta.publish"),
        key=lambda s: s.start_time or 0,
    )
    assert [(s.attributes or {})["codemode.approval"] for s in calls] == [
        "approved",
        "approved-for-run",
        "approved-for-run",
    ]
    # One wait, under the call that asked; it says the yes covered the rest of the run.
    (waited,) = [s for s in spans if s.name == "codemode.approval"]
    assert waited.parent is not None and waited.parent.span_id == calls[0].context.span_id
    assert (waited.attributes or {})["codemode.approval"] == "approved"
    assert (waited.attributes or {})["codemode.approval.for_run"] is True
    assert metrics.approvals.values == {("approved",): 1.0, ("approved-for-run",): 2.0}


@pytest.mark.slow
def test_record_content_puts_the_script_and_tool_data_into_spans_redacted(tmp_path: Path) -> None:
    host, exporter = _traced_host(tmp_path, record_content=True)
    code = (
        'import * as slow from "@codemode/servers/slow";\n'
        f'globalThis.__codemode_result__ = (await slow.echo({{value: "{OUTPUT_MARKER} {SECRET}"}})).value;'
    )
    try:
        response = host.run(code, limits={"typecheck": True})
    finally:
        host.close()
    assert response["result"] == f"{OUTPUT_MARKER} {SECRET}", response["diagnostics"]
    spans = exporter.get_finished_spans()
    (run,) = [s for s in spans if s.name == "codemode.run"]
    assert (run.attributes or {})["codemode.script"] == code
    # The type check the run asked for is a span of its own (checked, or skipped: it is the run's).
    (checked,) = [s for s in spans if s.name == "codemode.typecheck"]
    assert checked.parent is not None and checked.parent.span_id == run.context.span_id
    assert isinstance((checked.attributes or {})["codemode.typecheck.diagnostics"], int)
    (call,) = [s for s in spans if s.name == "codemode.tool_call slow.echo"]
    assert OUTPUT_MARKER in str((call.attributes or {})["codemode.call.input"])
    assert OUTPUT_MARKER in str((call.attributes or {})["codemode.call.output"])
    # slow has no secrets of its own; the meta server's would be redacted (Bridge.redact_text).


def test_tracing_off_makes_no_span_and_costs_no_provider() -> None:
    off = Telemetry.from_settings(Settings(), environ={})
    assert off.tracer is None and not off.tracing
    with off.run("1", None) as scope:
        assert scope.span is None and telemetry.current() is scope
        scope.finish({"diagnostics": []})
    assert telemetry.current() is None
    assert off.metrics.runs.values == {("ok",): 1.0}


# --------------------------------------------------------------------------- settings


@pytest.mark.parametrize(
    ("toml", "environ", "traces", "exporter"),
    [
        ({}, {}, False, "otlp"),
        ({}, {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, True, "otlp"),
        (
            {},
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"},
            True,
            "otlp",
        ),
        ({"endpoint": "http://collector:4318"}, {}, True, "otlp"),
        ({}, {"OTEL_TRACES_EXPORTER": "console"}, True, "console"),
        ({"traces": True, "exporter": "none"}, {}, True, "none"),
        (
            {"traces": False},
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"},
            False,
            "otlp",
        ),
        # The environment is the deployment's word: it turns tracing off whatever the file says.
        ({"traces": True}, {"OTEL_TRACES_EXPORTER": "none"}, False, "none"),
        ({"traces": True}, {"OTEL_SDK_DISABLED": "true"}, False, "none"),
    ],
)
def test_tracing_is_enabled_by_otel_variables_or_codemode_toml(
    toml: dict[str, Any], environ: dict[str, str], traces: bool, exporter: str
) -> None:
    resolved = resolve(TelemetrySettings(**toml), environ)
    assert (resolved.traces, resolved.traces_exporter) == (traces, exporter)


def test_service_name_comes_from_otel_service_name_then_codemode_toml() -> None:
    assert resolve(TelemetrySettings(), {}).service_name == "codemode-gen"
    assert resolve(TelemetrySettings(service_name="agents"), {}).service_name == "agents"
    assert (
        resolve(
            TelemetrySettings(service_name="agents"), {"OTEL_SERVICE_NAME": "prod"}
        ).service_name
        == "prod"
    )


def test_telemetry_table_of_codemode_toml_is_checked(tmp_path: Path) -> None:
    path = tmp_path / "codemode.toml"
    path.write_text(
        '[telemetry]\ntraces = true\nendpoint = "http://collector:4318/"\nrecord_content = true\n'
    )
    settings = load_settings(path)
    assert settings.telemetry == TelemetrySettings(
        traces=True, endpoint="http://collector:4318", record_content=True
    )
    for bad, says in (
        ('traces = "yes"', "must be true or false"),
        ('exporter = "jaeger"', "must be one of"),
        ('endpoint = "collector"', "http(s) URL"),
        ("sampler = 1", "sampler"),
    ):
        path.write_text(f"[telemetry]\n{bad}\n")
        with pytest.raises(UserError) as raised:
            load_settings(path)
        assert "codemode.toml:2" in raised.value.message and says in raised.value.message


def test_tracing_configured_without_the_sdk_says_how_to_install_it(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "opentelemetry.sdk.resources", None)  # as if not installed
    settings = Settings(
        telemetry=TelemetrySettings(traces=True, endpoint="http://127.0.0.1:9/no-sdk")
    )
    with caplog.at_level("WARNING"):
        configured = Telemetry.from_settings(settings, environ={})
    assert configured.tracer is None  # runs go on without spans
    assert "pip install 'codemode-gen[otel]'" in caplog.text


def test_public_metrics_only_applies_with_http() -> None:
    from click.testing import CliRunner

    from codemode_gen.cli.serve import serve

    result = CliRunner().invoke(serve, ["--public-metrics"])
    assert result.exit_code == 2 and "--public-metrics only applies with --http" in result.output


# --------------------------------------------------------------------------- metrics (unit)


def test_metrics_exposition_is_the_prometheus_text_format() -> None:
    from prometheus_client.parser import text_string_to_metric_families

    metrics = Metrics()
    metrics.runs.add("ok")
    metrics.runs.add("ok")
    metrics.tool_calls.add('we"ird\\name\n', "t", "ok")  # escaped, not broken
    metrics.run_duration.observe(0.02, "ok")
    metrics.run_duration.observe(7.0, "ok")
    metrics.workers.sources["test"] = lambda: [(("busy",), 2)]
    families = {f.name: f for f in text_string_to_metric_families(metrics.exposition())}
    runs = {s.labels["outcome"]: s.value for s in families["codemode_runs"].samples}
    assert runs == {"ok": 2.0}
    (call,) = families["codemode_tool_calls"].samples
    assert call.labels["server"] == 'we"ird\\name\n'
    duration = {
        (s.name, s.labels.get("le")): s.value
        for s in families["codemode_run_duration_seconds"].samples
    }
    assert duration[("codemode_run_duration_seconds_bucket", "0.025")] == 1.0
    assert duration[("codemode_run_duration_seconds_bucket", "+Inf")] == 2.0
    assert duration[("codemode_run_duration_seconds_count", None)] == 2.0
    assert duration[("codemode_run_duration_seconds_sum", None)] == pytest.approx(7.02)
    assert [(s.labels, s.value) for s in families["codemode_workers"].samples] == [
        ({"state": "busy"}, 2.0)
    ]


def test_metric_label_sets_are_bounded() -> None:
    metrics = Metrics()
    for i in range(MAX_LABEL_SETS + 50):
        metrics.tool_calls.add("s", f"tool{i}", "ok")
    assert len(metrics.tool_calls.values) == MAX_LABEL_SETS + 1
    assert metrics.tool_calls.values[("s", f"tool{MAX_LABEL_SETS - 1}", "ok")] == 1.0
    assert metrics.tool_calls.values[(OTHER_LABEL,) * 3] == 50.0


def test_log_lines_during_a_span_carry_its_trace_id() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    assert telemetry_serve.log_suffix() == ""
    tracer = TracerProvider().get_tracer("test")
    with tracer.start_as_current_span("x") as span:
        assert telemetry_serve.log_suffix() == f" trace_id={span.get_span_context().trace_id:032x}"


def test_an_unreachable_collector_is_told_once_a_minute_not_per_retry() -> None:
    import logging

    lines: list[str] = []
    logger = logging.getLogger("opentelemetry.test-exporter")
    handler = telemetry_serve.LineHandler(
        lines.append, prefix="telemetry: ", interval=telemetry_serve.EXPORT_NOTICE_INTERVAL_S
    )
    logger.addHandler(handler)
    logger.propagate = False
    try:
        for delay in (1.0, 1.7, 4.6):
            logger.warning(
                "Transient error %s encountered while exporting spans batch, retrying in %.2fs.",
                "Connection refused",
                delay,
            )
        logger.warning("Failed to export spans batch due to timeout, max retries or shutdown.")
    finally:
        logger.removeHandler(handler)
    assert lines == [
        "telemetry: Transient error Connection refused encountered while exporting spans batch, retrying in 1.00s.",
        "telemetry: Failed to export spans batch due to timeout, max retries or shutdown.",
    ]


# --------------------------------------------------------------------------- propagation over stdio


def _meta_project(base: Path, record: Path) -> Path:
    (base / ".mcp.json").write_text(
        json.dumps(
            {
                "mcpServers": {
                    "meta": {
                        "command": PYTHON,
                        "args": [script("meta_echo"), "--record", str(record)],
                        "env": {"META_SECRET": SECRET},
                    },
                }
            }
        )
    )
    return base


def _recorded(record: Path, tool: str) -> list[dict[str, Any]]:
    lines = record.read_text().splitlines() if record.is_file() else []
    return [entry["meta"] for entry in map(json.loads, lines) if entry["tool"] == tool]


@pytest.mark.slow
def test_a_clients_traceparent_reaches_the_upstream_server_with_tracing_off(tmp_path: Path) -> None:
    record = tmp_path / "meta.jsonl"
    project = _meta_project(tmp_path, record)
    code = 'import * as meta from "@codemode/servers/meta";\nglobalThis.__codemode_result__ = (await meta.meta({})).meta;'

    async def body(client: Any) -> Any:
        plain = await client.call_tool("codemode.run", {"code": code})
        traced = await client.call_tool(
            "codemode.run", {"code": code}, meta={"traceparent": TRACEPARENT}
        )
        return plain.structured_content, traced.structured_content

    plain, traced = against_serve(project, body)  # no OTEL_* variable: tracing is off
    assert "traceparent" not in assert_ok(plain)  # nothing to carry
    assert _trace_id(assert_ok(traced)["traceparent"]) == TRACE_ID
    upstream = _recorded(record, "meta")
    assert len(upstream) == 2 and _trace_id(upstream[1]["traceparent"]) == TRACE_ID


# --------------------------------------------------------------------------- serve --http: OTLP


class OtlpReceiver:
    """An OTLP/HTTP collector on 127.0.0.1: decodes what it is sent with opentelemetry-proto."""

    def __init__(self) -> None:
        from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
            ExportMetricsServiceRequest,
        )
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
        )

        self.spans: list[tuple[dict[str, Any], Any]] = []  # (resource attributes, span)
        self.metrics: list[Any] = []  # metric protos
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                if self.path == "/v1/traces":
                    request: Any = ExportTraceServiceRequest()
                    request.ParseFromString(body)
                    with receiver.lock:
                        for resource_spans in request.resource_spans:
                            resource = {
                                a.key: a.value.string_value
                                for a in resource_spans.resource.attributes
                            }
                            for scope_spans in resource_spans.scope_spans:
                                receiver.spans += [(resource, span) for span in scope_spans.spans]
                elif self.path == "/v1/metrics":
                    request = ExportMetricsServiceRequest()
                    request.ParseFromString(body)
                    with receiver.lock:
                        for resource_metrics in request.resource_metrics:
                            for scope_metrics in resource_metrics.scope_metrics:
                                receiver.metrics += list(scope_metrics.metrics)
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def wait_for(self, found: Any, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                value = found()
            if value:
                return value
            time.sleep(0.05)
        with self.lock:
            return found()


@pytest.fixture
def receiver() -> Iterator[OtlpReceiver]:
    got = OtlpReceiver()
    try:
        yield got
    finally:
        got.close()


@pytest.mark.slow
def test_spans_and_metrics_arrive_over_otlp_from_a_real_serve_http(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    record = tmp_path / "meta.jsonl"
    project = _meta_project(tmp_path, record)
    served = start_serve(
        project,
        "--public-metrics",
        extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_SERVICE_NAME": "codemode-test",
            # Export promptly (the defaults batch for 5 s and 60 s).
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "300",
        },
    )
    code = (
        'import * as meta from "@codemode/servers/meta";\n'
        "const seen = (await meta.meta({})).meta;\n"
        "try { await meta.reject({}); } catch (e) {}\n"
        "globalThis.__codemode_result__ = seen;"
    )
    try:

        async def body(client: Any) -> Any:
            plain = (await client.call_tool("codemode.run", {"code": code})).structured_content
            in_meta = await client.call_tool(
                "codemode.run", {"code": code}, meta={"traceparent": OTHER_TRACEPARENT}
            )
            return plain, in_meta.structured_content

        # The W3C headers of the HTTP request parent the run (its _meta carries none) ...
        response, in_meta = anyio.run(
            lambda: in_client(served.url, body, headers={"traceparent": TRACEPARENT})
        )
        assert _trace_id(assert_ok(response)["traceparent"]) == TRACE_ID
        assert _trace_id(_recorded(record, "meta")[0]["traceparent"]) == TRACE_ID
        # ... unless the request's _meta carries one: MCP's own convention wins.
        assert _trace_id(assert_ok(in_meta)["traceparent"]) == OTHER_TRACE_ID
        assert _trace_id(_recorded(record, "meta")[1]["traceparent"]) == OTHER_TRACE_ID

        def run_spans() -> list[Any]:
            return [
                span
                for _, span in receiver.spans
                if span.name == "codemode.run" and span.trace_id.hex() == TRACE_ID
            ]

        (run,) = receiver.wait_for(run_spans, RUN_TIMEOUT)
        assert run.trace_id.hex() == TRACE_ID
        names = receiver.wait_for(
            lambda: (
                {
                    s.name
                    for _, s in receiver.spans
                    if s.trace_id == run.trace_id and s.name.startswith("codemode.tool_call")
                }
                or None
            ),
            PROMPT_S,
        )
        assert names == {"codemode.tool_call meta.meta", "codemode.tool_call meta.reject"}
        resources = {resource.get("service.name") for resource, _ in receiver.spans}
        assert resources == {"codemode-test"}
        # The client's span is the run's parent; the MCP SDK's own spans are not exported (their
        # status would carry the upstream's error text unredacted: the secret below).
        assert run.parent_span_id.hex() == PARENT_ID
        (meta_run,) = receiver.wait_for(
            lambda: [
                s
                for _, s in receiver.spans
                if s.name == "codemode.run" and s.trace_id.hex() == OTHER_TRACE_ID
            ],
            RUN_TIMEOUT,
        )
        assert meta_run.parent_span_id.hex() == OTHER_TRACEPARENT.split("-")[2]
        kinds = {s.name.split(" ")[0] for _, s in receiver.spans}
        assert {"codemode.run", "codemode.execute", "codemode.tool_call"} <= kinds
        assert kinds <= {
            "codemode.run",
            "codemode.queue",
            "codemode.connect",
            "codemode.execute",
            "codemode.tool_call",
        }
        attrs = {a.key: a.value for a in run.attributes}
        assert attrs["codemode.run.outcome"].string_value == "ok"
        assert attrs["codemode.run.tool"].string_value == "codemode.run"
        for _, span in receiver.spans:  # no secret, no tool output in any attribute
            assert SECRET not in str(span.attributes) and SECRET not in span.status.message

        metric_names = receiver.wait_for(
            lambda: {m.name for m in receiver.metrics} >= {"codemode.runs"}, RUN_TIMEOUT
        )
        assert metric_names

        # serve's stderr: the run's line leads to its trace.
        log = served.log.read_text()
        assert "run ok in" in log and f"trace_id={TRACE_ID}" in log
        # --public-metrics: no token needed for /metrics (still for everything else).
        assert http_get(served.base + "/metrics").status_code == 200
        assert http_get(served.base + "/mcp").status_code == 401
    finally:
        served.stop()


@pytest.mark.slow
def test_an_unreachable_collector_delays_no_run_and_not_the_shutdown(tmp_path: Path) -> None:
    from tests.runtime.frontends.test_serve_http import STOP_TIMEOUT_S, project

    closed = "http://127.0.0.1:9"  # the discard port: nothing listens, connections are refused
    served = start_serve(
        project(tmp_path),
        extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": closed,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "300",
        },
    )
    code = "import { get_note } from '@codemode/servers/notes';\nglobalThis.__codemode_result__ = (await get_note({id: 2})).title;"
    try:

        async def body(client: Any) -> list[Any]:
            return [
                (await client.call_tool("codemode.run", {"code": code})).structured_content
                for _ in range(3)
            ]

        assert [assert_ok(r) for r in anyio.run(lambda: in_client(served.url, body))] == [
            "Groceries"
        ] * 3
    finally:
        served.proc.send_signal(signal.SIGTERM)
        try:  # the exporters' retries (10 s a batch) are cut at EXIT_FLUSH_S: no kill needed
            returncode = served.proc.wait(timeout=STOP_TIMEOUT_S)
        finally:
            served.stop()
    assert returncode == 0
    told = [
        line for line in served.log.read_text().splitlines() if "telemetry: Transient error" in line
    ]
    assert 1 <= len(told) <= 2 * 2  # traces and metrics: once each a minute, not once per retry


@pytest.mark.slow
def test_run_with_an_unreachable_collector_answers_and_tells_it_once_per_kind(
    tmp_path: Path,
) -> None:
    import subprocess
    import sys

    from tests.runtime.frontends.test_serve_http import env, project

    proj = project(tmp_path)
    (proj / "note.js").write_text(
        "import { get_note } from '@codemode/servers/notes';\nglobalThis.__codemode_result__ = (await get_note({id: 2})).title;"
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codemode_gen",
            "run",
            "--config",
            str(proj / ".mcp.json"),
            str(proj / "note.js"),
        ],
        cwd=proj,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT * 2,  # the run, then EXIT_FLUSH_S at most
        env=env(OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9", OTEL_BSP_SCHEDULE_DELAY="100"),
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["result"] == "Groceries"
    told = [line for line in done.stderr.splitlines() if "Transient error" in line]
    # Marked as telemetry's, and once per kind (traces, metrics), not once per export retry.
    assert 1 <= len(told) <= 2 and all(
        line.startswith("codemode-gen run: telemetry: ") for line in told
    ), done.stderr
    assert "Traceback" not in done.stderr


@pytest.mark.slow
def test_a_run_that_asks_through_input_required_is_counted_as_such_and_its_retry_makes_the_call(
    tmp_path: Path, receiver: OtlpReceiver
) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from tests.runtime.frontends.test_serve_input_required import (
        RECORD_THEN_TRANSFER,
        User,
        http_client,
        make_project,
        run,
    )

    base, ledger = make_project(tmp_path / "project")
    served = start_serve(
        base,
        "--trace",
        "full",
        extra_env={
            "OTEL_EXPORTER_OTLP_ENDPOINT": receiver.endpoint,
            "OTEL_BSP_SCHEDULE_DELAY": "100",
        },
    )
    user = User("accept")
    try:
        # The SDK's driver: the first round ends with input_required, the retry resumes the run.
        response = anyio.run(
            http_client, served.url, lambda client: run(client, RECORD_THEN_TRANSFER), user
        )
        scraped = http_get(served.base + "/metrics", Authorization=f"Bearer {TOKEN}")

        def run_spans() -> list[Any]:
            found = [s for _, s in receiver.spans if s.name == "codemode.run"]
            return found if len(found) >= 2 else []

        runs = receiver.wait_for(run_spans, RUN_TIMEOUT)

        def transfers() -> list[Any]:
            found = [s for _, s in receiver.spans if s.name == "codemode.tool_call ledger.transfer"]
            return found if len(found) >= 2 else []

        calls = receiver.wait_for(transfers, PROMPT_S)
        waits = [s for _, s in receiver.spans if s.name == "codemode.approval"]
    finally:
        served.stop()
    assert response["result"]["moved"]["to"] == "bob" and len(user.asked) == 1
    assert ledger.tools() == ["record", "transfer"]  # each sent once

    def attributes(span: Any) -> dict[str, str]:
        return {a.key: a.value.string_value for a in span.attributes}

    # Two runs: the first ended to ask (not an error, not "ok"), the retry finished it.
    assert sorted(attributes(s)["codemode.run.outcome"] for s in runs) == ["input_required", "ok"]
    assert all(s.status.code != 2 for s in runs)  # STATUS_CODE_ERROR
    # transfer: asked in the first run's span, made in the retry's; record: made once, replayed after.
    assert sorted(attributes(s)["codemode.call.outcome"] for s in calls) == ["input_required", "ok"]
    assert sorted(attributes(s)["codemode.approval"] for s in calls) == [
        "approved",
        "input_required",
    ]
    assert "input_required" in [attributes(s)["codemode.approval"] for s in waits]

    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(scraped.text)
        for s in family.samples
    }
    counted = {k[1]: v for k, v in samples.items() if k[0] == "codemode_runs_total"}
    assert counted == {(("outcome", "input_required"),): 1.0, (("outcome", "ok"),): 1.0}
    made = {
        dict(k[1])["tool"]: v for k, v in samples.items() if k[0] == "codemode_tool_calls_total"
    }
    assert made == {
        "record": 1.0,
        "transfer": 1.0,
    }  # the call the first run waited on is counted once
    decided = {
        dict(k[1])["decision"]: v
        for k, v in samples.items()
        if k[0] == "codemode_approval_decisions_total"
    }
    assert decided == {"allowed": 1.0, "approved": 1.0}  # no "denied" for the wait


# --------------------------------------------------------------------------- serve --http: /metrics

CLIENTS = 8
RUNS_PER_CLIENT = 5


@pytest.mark.slow
def test_metrics_count_the_runs_of_eight_clients_and_need_the_token(tmp_path: Path) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    from tests.runtime.frontends.test_serve_http import project

    served = start_serve(project(tmp_path))
    code = (
        "import { get_note } from '@codemode/servers/notes';\n"
        "globalThis.__codemode_result__ = (await get_note({id: 2})).title;"
    )
    try:

        async def one_client(results: list[Any]) -> None:
            async def body(client: Any) -> None:
                for _ in range(RUNS_PER_CLIENT):
                    results.append(
                        (await client.call_tool("codemode.run", {"code": code})).structured_content
                    )

            await in_client(served.url, body)

        async def load() -> list[Any]:
            results: list[Any] = []
            async with anyio.create_task_group() as tg:
                for _ in range(CLIENTS):
                    tg.start_soon(one_client, results)
            return results

        results = anyio.run(load)
        assert [assert_ok(r) for r in results] == ["Groceries"] * CLIENTS * RUNS_PER_CLIENT
        runs = CLIENTS * RUNS_PER_CLIENT

        refused = http_get(served.base + "/metrics")
        assert refused.status_code == 401 and refused.headers["www-authenticate"].startswith(
            "Bearer"
        )
        scraped = http_get(served.base + "/metrics", Authorization=f"Bearer {TOKEN}")
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain; version=0.0.4")
        samples = {
            (s.name, tuple(sorted(s.labels.items()))): s.value
            for family in text_string_to_metric_families(scraped.text)
            for s in family.samples
        }
    finally:
        served.stop()

    def value(name: str, **labels: str) -> float:
        return samples[(name, tuple(sorted(labels.items())))]

    assert value("codemode_runs_total", outcome="ok") == runs
    assert not [
        k for k in samples if k[0] == "codemode_runs_total" and k[1] != (("outcome", "ok"),)
    ]
    assert value("codemode_run_duration_seconds_count", outcome="ok") == runs
    assert value("codemode_tool_calls_total", server="notes", tool="get_note", outcome="ok") == runs
    assert value("codemode_tool_call_duration_seconds_count", server="notes") == runs
    assert value("codemode_approval_decisions_total", decision="allowed") == runs
    assert value("codemode_queue_wait_seconds_count", queue="admission") == runs
    assert value("codemode_queue_wait_seconds_count", queue="worker") == runs
    assert value("codemode_runs_in_progress") == 0
    assert value("codemode_runs_queued", queue="admission") == 0
    assert value("codemode_workers", state="busy") == 0
    assert value("codemode_workers_max") >= 1
    assert value("codemode_upstream_sessions", server="notes") == 1
