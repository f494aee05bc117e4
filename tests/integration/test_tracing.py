"""OpenTelemetry (slowave.tracing, api.tracing): with tracing on, every RPC is a server span that
continues the caller's W3C `traceparent`, its children cover the database transaction and the
retrieval stages, and the access line carries the trace id; with tracing off no span is made,
and the access line still carries the caller's trace id. Spans are read from an in-memory
exporter on the process's tracer provider."""

from __future__ import annotations

import logging

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from tests.support import claim, new_scope, pb, remember, wait_until

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
PARENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{PARENT_SPAN}-01"


@pytest.fixture(scope="module")
def spans() -> InMemorySpanExporter:
    exporter = InMemorySpanExporter()
    provider = trace.get_tracer_provider()
    if not isinstance(provider, TracerProvider):
        provider = TracerProvider()
        trace.set_tracer_provider(provider)
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return exporter


def _activate(srv, scope: str, task: str) -> pb.ActivateResponse:
    return srv.stub.Activate(
        pb.ActivateRequest(task=task, initial_goal=task, scope=scope),
        metadata=[("traceparent", TRACEPARENT)],
        timeout=30,
    )


def _access_lines(caplog) -> list[dict]:
    return [r.rpc for r in caplog.records if r.name == "slowave.access" and hasattr(r, "rpc")]


def test_an_activate_span_continues_the_callers_trace(make_server, spans, caplog):
    srv = make_server(tracing=True)
    scope = new_scope()
    opener = srv.stub.Activate(pb.ActivateRequest(task="Seed", initial_goal="Seed", scope=scope), timeout=30)
    text = claim("The deploy port is 8443")
    remember(srv.stub, opener.session_id, scope, text)
    spans.clear()
    with caplog.at_level(logging.INFO, logger="slowave.access"):
        reply = _activate(srv, scope, f"Which port? {text}")
    assert [m.content for m in reply.memories] == [text]

    def ours() -> list:
        return [s for s in spans.get_finished_spans() if format(s.context.trace_id, "032x") == TRACE_ID]

    wait_until(lambda: any(s.kind == SpanKind.SERVER for s in ours()), timeout=30, what="the server span")
    finished = ours()
    [server_span] = [s for s in finished if s.kind == SpanKind.SERVER]
    assert server_span.name == "slowave.v1.MemoryService/Activate"
    assert format(server_span.parent.span_id, "016x") == PARENT_SPAN and server_span.parent.is_remote
    assert dict(server_span.attributes) == {
        "rpc.system": "grpc",
        "rpc.service": "slowave.v1.MemoryService",
        "rpc.method": "Activate",
        "rpc.grpc.status_code": 0,
    }
    # Every other span of the trace descends from the server span.
    by_id = {s.context.span_id: s for s in finished}
    for s in finished:
        if s is server_span:
            continue
        ancestor = s
        while ancestor.parent is not None and ancestor.parent.span_id in by_id:
            ancestor = by_id[ancestor.parent.span_id]
        assert ancestor is server_span, s.name
    names = {s.name for s in finished}
    assert {"db.transaction", "retrieval.candidates", "retrieval.learned", "retrieval.page"} <= names, names
    [line] = [line for line in _access_lines(caplog) if line["method"].endswith("/Activate")]
    assert line["trace_id"] == TRACE_ID


def test_without_tracing_no_span_is_made_and_the_log_keeps_the_callers_trace_id(make_server, spans, caplog):
    srv = make_server()
    spans.clear()
    with caplog.at_level(logging.INFO, logger="slowave.access"):
        _activate(srv, new_scope(), "Untraced task")
    assert spans.get_finished_spans() == ()
    [line] = [line for line in _access_lines(caplog) if line["method"].endswith("/Activate")]
    assert line["trace_id"] == TRACE_ID


def test_the_sdk_propagates_the_callers_span(make_server, spans):
    from slowave_client import Client

    srv = make_server(tracing=True)
    spans.clear()
    tracer = trace.get_tracer("an-agent")
    with Client(srv.address) as client, tracer.start_as_current_span("agent step") as step:
        client.activate("Propagated task", "Propagated task", new_scope())
    step_context = step.get_span_context()

    def server_spans() -> list:
        return [s for s in spans.get_finished_spans() if s.kind == SpanKind.SERVER]

    wait_until(lambda: server_spans(), timeout=30, what="the server span")
    [server_span] = server_spans()
    assert server_span.context.trace_id == step_context.trace_id
    assert server_span.parent.span_id == step_context.span_id
