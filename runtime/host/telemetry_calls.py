"""Tool calls and approval waits as a run's telemetry sees them (docs/observability.md).

Each tool call a traced run makes gets a `codemode.tool_call` span (current while the upstream
request is made, so the MCP SDK's client injects it into the request's `_meta`) and the
tool-call metrics; a call that waits for a person gets a `codemode.approval` span carrying the
decision. The bridge (runtime/host/bridge.py) wraps its call and its approval gate in
`traced_call` / `traced_approval` and says `approval_asked`; outside a run they only await. Kept
apart from the run's scope (runtime/host/telemetry.py) because a call's outcome, labels and
recorded content are rules of their own.
"""

from __future__ import annotations

import contextvars
import json
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from codemode_gen.runtime.host.metrics import UNKNOWN_LABEL
from codemode_gen.runtime.host.telemetry import (
    CANCELLED,
    DENIED,
    ERROR,
    INPUT_REQUIRED,
    OK,
    RUN_SCOPE,
    SPAN_APPROVAL,
    SPAN_TOOL_CALL,
    TIMEOUT,
    RunScope,
    Telemetry,
    cut_attribute,
    set_error,
)
from codemode_gen.runtime.sandbox.protocol import HostReply

if TYPE_CHECKING:
    from opentelemetry.trace import Span

T = TypeVar("T")

_CALL: contextvars.ContextVar[_ToolCall | None] = contextvars.ContextVar(
    "codemode_tool_call", default=None
)


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

        self.approval = tracer.start_span(
            SPAN_APPROVAL, context=trace.set_span_in_context(self.span)
        )

    def decided(self, decision: str, for_run: bool = False) -> None:
        if self.approval is not None:
            self.approval.set_attribute("codemode.approval", decision)
            if for_run:
                # The answer approved this tool's further calls of the run too: those calls
                # are "approved-for-run" without a wait of their own.
                self.approval.set_attribute("codemode.approval.for_run", True)
            if decision == "denied":
                set_error(self.approval, "denied", DENIED)
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
    call: Awaitable[HostReply],
    server: str,
    tool: str,
    gate: Mapping[str, str],
    request: Mapping[str, Any],
    redact: Callable[[str], str] | None = None,
) -> HostReply:
    """`await call` (the bridge's `_call` of one tool call) as the run's telemetry sees it: a
    span current while it runs (the SDK's client injects it into the upstream request's
    `_meta`), the tool-call metrics, the approval decision. `server` and `tool` are the
    sanitised names; `gate` the bridge's approval record of this call; `request` the sandbox's
    (its `input` is recorded only with record_content, through `redact`)."""
    scope = RUN_SCOPE.get()
    if scope is None:
        return await call
    telemetry = scope.telemetry
    tracer = telemetry.tracer
    span: Span | None = None
    otel_token = None
    if tracer is not None and scope.span is not None:
        from opentelemetry import context as otel_context
        from opentelemetry import trace

        span = tracer.start_span(
            f"{SPAN_TOOL_CALL} {server}.{tool}",
            attributes={"codemode.server": server, "codemode.tool": tool},
        )
        otel_token = otel_context.attach(trace.set_span_in_context(span))
    record = _ToolCall(scope, span)
    token = _CALL.set(record)
    began = time.monotonic()
    reply: HostReply | None = None
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
                span.set_attributes(
                    {"codemode.call.outcome": INPUT_REQUIRED, "codemode.approval": INPUT_REQUIRED}
                )
                span.end()
        else:
            _finish_call(
                scope,
                record,
                span,
                server,
                tool,
                gate,
                request,
                reply,
                time.monotonic() - began,
                redact,
            )
        if otel_token is not None:
            from opentelemetry import context as otel_context

            otel_context.detach(otel_token)


def _finish_call(
    scope: RunScope,
    record: _ToolCall,
    span: Span | None,
    server: str,
    tool: str,
    gate: Mapping[str, str],
    request: Mapping[str, Any],
    reply: HostReply | None,
    elapsed: float,
    redact: Callable[[str], str] | None,
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
    tool_label = (
        UNKNOWN_LABEL if error_class in ("ServerNotFoundError", "ToolNotFoundError") else tool
    )
    metrics = telemetry.metrics
    metrics.tool_calls.add(server_label, tool_label, outcome)
    metrics.tool_call_duration.observe(elapsed, server_label)
    if decision and decision != "pending":
        metrics.approvals.add(decision)
    if span is not None:
        _finish_call_span(
            span, telemetry, outcome, elapsed, decision, error, request, reply, redact
        )


def _finish_call_span(
    span: Span,
    telemetry: Telemetry,
    outcome: str,
    elapsed: float,
    decision: str | None,
    error: Any,
    request: Mapping[str, Any],
    reply: HostReply | None,
    redact: Callable[[str], str] | None,
) -> None:
    from codemode_gen.runtime.host.call_replies import trace_error

    attributes: dict[str, Any] = {
        "codemode.call.outcome": outcome,
        "codemode.call.duration_ms": round(elapsed * 1000, 3),
    }
    if decision:
        attributes["codemode.approval"] = decision
    if isinstance(error, Mapping) and error.get("code") is not None:
        attributes["codemode.call.error_code"] = str(error["code"])
    span.set_attributes(attributes)
    if telemetry.record_content:
        clean = redact or telemetry.redact
        if "input" in request:
            span.set_attribute("codemode.call.input", cut_attribute(clean(_json(request["input"]))))
        if reply is not None and reply.get("ok"):
            span.set_attribute(
                "codemode.call.output", cut_attribute(clean(_json(reply.get("value"))))
            )
    if outcome == CANCELLED:
        set_error(span, "cancelled when the run ended", CANCELLED)
    elif isinstance(error, Mapping):
        error_class = str(error.get("errorClass") or "ToolCallError")
        if "content" in error and not telemetry.record_content:
            # A tool's isError text is its output: not in telemetry unless record_content.
            description = f"{error_class}: the tool reported an error (isError)"
        else:
            description = trace_error(str(error.get("_summary") or error_class))
        set_error(span, description, error_class)
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
