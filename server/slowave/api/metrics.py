"""Every metric the service exports, recorded in one place (Prometheus, `/metrics`).

The gRPC server metrics use the go-grpc-prometheus names so existing dashboards and alerts work;
the `slowave_*` families describe how well memory serves agents. No label carries a tenant,
session or memory id (cardinality stays bounded).
"""
from __future__ import annotations

import time
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from slowave.domain.errors import DomainError


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        labels = ("grpc_type", "grpc_service", "grpc_method")
        self.started = Counter("grpc_server_started_total", "RPCs started on the server.", labels, registry=r)
        self.handled = Counter("grpc_server_handled_total", "RPCs completed on the server, by status code.",
                               (*labels, "grpc_code"), registry=r)
        self.latency = Histogram("grpc_server_handling_seconds", "Time to handle an RPC, until the response is sent.",
                                 labels, registry=r,
                                 buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10))
        self.open_sessions = Gauge("slowave_open_sessions", "Sessions currently open.", registry=r)
        self.commits = Counter("slowave_commits_total", "Successful commits, by outcome and operation.",
                               ("outcome", "operation", "verification_status"), registry=r)
        self.gate_blocked = Counter("slowave_commit_gate_blocked_total",
                                    "Commits refused because exposed targets lacked feedback.", registry=r)
        self.reaped = Counter("slowave_reaped_sessions_total", "Sessions closed by the idle-session reaper.", registry=r)
        self.assessments = Counter("slowave_feedback_assessments_total",
                                   "Accepted explicit feedback assessments, by target kind and value.",
                                   ("target_kind", "value"), registry=r)
        self.rejected = Counter("slowave_feedback_rejected_total", "Feedback entries recorded as rejected, by reason.",
                                ("reason",), registry=r)
        self.implicit = Counter("slowave_feedback_implicit_total",
                                "Targets implicitly assessed by a complete coverage declaration.", registry=r)
        self.missing = Counter("slowave_knowledge_gaps_reported_total", "`missing` entries reported in feedback.",
                               registry=r)
        self.exposed = Counter("slowave_exposed_targets_total", "Memories and procedures exposed by retrievals.",
                               ("target_kind",), registry=r)
        self.remembered = Counter("slowave_remembered_total", "Claims stored by Remember, by disposition.",
                                  ("disposition",), registry=r)
        self.refused = Counter("slowave_requests_refused_total", "Requests refused as a whole, by ErrorInfo reason.",
                               ("reason",), registry=r)

    def serve(self, addr: str) -> Any:
        host, _, port = addr.rpartition(":")
        server, _thread = start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)
        return server

    # -- recorded by the servicer after each use case

    def request_refused(self, error: DomainError) -> None:
        self.refused.labels(error.reason).inc()
        if error.reason == "INCOMPLETE_FEEDBACK":
            self.gate_blocked.inc()

    def retrieval(self, result: Any) -> None:
        self.exposed.labels("memory").inc(len(result.memories))
        self.exposed.labels("procedure").inc(len(result.procedures))

    def stored_claims(self, results: list) -> None:
        for res in results:
            disposition = getattr(res, "disposition", None)
            if disposition:
                self.remembered.labels(disposition).inc()

    def feedback(self, cmd: Any, results: list) -> None:
        for item, res in zip(cmd.items, results):
            if not hasattr(res, "accepted_event_ids"):
                continue
            rejected_ids = {(x.target_kind, x.target_id) for x in res.rejected}
            for e in item.memory_feedback:
                if ("memory", e.memory_id) not in rejected_ids:
                    self.assessments.labels("memory", e.assessment).inc()
            for e in item.procedure_feedback:
                if ("procedure", e.procedure_id) not in rejected_ids:
                    self.assessments.labels("procedure", f"{e.use}/{e.effect}").inc()
            for x in res.rejected:
                self.rejected.labels(x.reason).inc()
            self.implicit.inc(len(res.implicitly_assessed.memory_ids) + len(res.implicitly_assessed.procedure_ids))
            self.missing.inc(len(res.missing))

    def committed(self, result: Any) -> None:
        self.commits.labels(result.outcome, result.operation, result.verification_status).inc()


class MetricsInterceptor(grpc.ServerInterceptor):
    """Records started / handled / latency for every unary RPC; the final code is read from the
    context after the handler returns or aborts."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics

    def intercept_service(self, continuation, handler_call_details):  # noqa: ANN001, ANN201
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        service, _, method = handler_call_details.method.lstrip("/").partition("/")
        behavior = handler.unary_unary
        m = self.m

        def wrapped(request, context):  # noqa: ANN001, ANN202
            m.started.labels("unary", service, method).inc()
            start = time.perf_counter()
            code = grpc.StatusCode.UNKNOWN
            try:
                response = behavior(request, context)
                code = context.code() or grpc.StatusCode.OK
                return response
            except Exception:
                code = context.code() or grpc.StatusCode.UNKNOWN
                raise
            finally:
                m.handled.labels("unary", service, method, code.name).inc()
                m.latency.labels("unary", service, method).observe(time.perf_counter() - start)

        return grpc.unary_unary_rpc_method_handler(
            wrapped, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
