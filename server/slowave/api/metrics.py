"""Every metric the service exports, recorded in one place (Prometheus, `/metrics`).

The gRPC server metrics use the go-grpc-prometheus names so existing dashboards and alerts work;
the `slowave_*` families describe how well memory serves agents (what retrievals expose, how agents
assess it, what is left unassessed), how tasks end, and how long units of work hold the database.
No label carries a tenant, session or memory id: every label value comes from a closed set (an
enum of the contract, a registered RPC, a fixed list of background workers), so cardinality stays
bounded whatever the traffic.

Ratios are left to PromQL so they aggregate across replicas, e.g. exposure-to-use:

    sum(rate(slowave_feedback_assessments_total{target_kind="memory",value="used"}[1h]))
      / sum(rate(slowave_exposed_targets_total{target_kind="memory"}[1h]))

(`deploy/prometheus/slowave-rules.yaml` records it as `slowave:memory_use_per_exposure:ratio_rate1h`).
"""

from __future__ import annotations

import threading
import time
from contextvars import ContextVar
from typing import Any

import grpc
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from sqlalchemy import Engine, event

from slowave.domain.errors import DomainError
from slowave.service.messages import enum_word, enum_words
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res

MEMORY_ASSESSMENTS = enum_words(pb.MemoryAssessment.DESCRIPTOR)
STALE_REASONS = enum_words(pb.StaleReason.DESCRIPTOR)
EFFECTS = enum_words(res.Effect.DESCRIPTOR)
TARGET_KINDS = ("memory", "procedure")

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

# The unit of work's `operation` label: the RPC being served (set by MetricsInterceptor), else the
# background worker whose thread runs it, else "other" (admin commands, tests, migrations).
_operation: ContextVar[str | None] = ContextVar("slowave_db_operation", default=None)
_BACKGROUND_THREADS = {
    "slowave-reaper": "reaper",
    "slowave-consolidator": "consolidation",
    "slowave-gauges": "gauges",
    "slowave-index-merge": "index_merge",
}
_T0 = "slowave_checkout_t0"


def current_operation() -> str:
    op = _operation.get()
    if op is not None:
        return op
    return _BACKGROUND_THREADS.get(threading.current_thread().name, "other")


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        labels = ("grpc_type", "grpc_service", "grpc_method")
        # -- gRPC server (go-grpc-prometheus names)
        self.started = Counter("grpc_server_started_total", "RPCs started on the server.", labels, registry=r)
        self.handled = Counter(
            "grpc_server_handled_total",
            "RPCs completed on the server, by status code.",
            (*labels, "grpc_code"),
            registry=r,
        )
        self.latency = Histogram(
            "grpc_server_handling_seconds",
            "Time to handle an RPC, until the response is sent.",
            labels,
            registry=r,
            buckets=_LATENCY_BUCKETS,
        )
        # CPU, not wall time: what a call costs the server whatever it waited for. The serving thread's
        # CPU time from the handler's start to its end (interceptors inside this one included; request
        # parsing, response serialisation and gRPC core's own threads not).
        self.cpu = Histogram(
            "slowave_rpc_cpu_seconds",
            "CPU time of the thread serving an RPC, by method.",
            labels,
            registry=r,
            buckets=_LATENCY_BUCKETS,
        )
        # -- sessions and commits
        # Only the process running the background work sets it (api.supervisor); the others export 0.
        self.open_sessions = Gauge(
            "slowave_open_sessions", "Sessions currently open.", registry=r, multiprocess_mode="livemax"
        )
        self.commits = Counter(
            "slowave_commits_total",
            "Successful commits, by outcome, operation and verification status.",
            ("outcome", "operation", "verification_status"),
            registry=r,
        )
        self.gate_blocked = Counter(
            "slowave_commit_gate_blocked_total", "Commits refused because exposed targets lacked feedback.", registry=r
        )
        self.reaped = Counter(
            "slowave_reaped_sessions_total", "Sessions closed by the idle-session reaper.", registry=r
        )
        self.unassessed_at_reap = Counter(
            "slowave_reaped_unassessed_exposures_total",
            "Exposed memories and procedures still without any accepted feedback when the reaper closed their session.",
            ("target_kind",),
            registry=r,
        )
        # -- retrieval quality: what is exposed, and how agents assess it
        self.exposed = Counter(
            "slowave_exposed_targets_total",
            "Memories and procedures exposed by retrievals.",
            ("target_kind",),
            registry=r,
        )
        self.assessments = Counter(
            "slowave_feedback_assessments_total",
            "Accepted explicit feedback assessments, by target kind and value "
            "(memory: the assessment; procedure: use/effect).",
            ("target_kind", "value"),
            registry=r,
        )
        self.stale = Counter(
            "slowave_memory_stale_assessments_total",
            "Accepted explicit `stale` memory assessments, by stale reason.",
            ("stale_reason",),
            registry=r,
        )
        self.procedure_effects = Counter(
            "slowave_procedure_effects_total",
            "Accepted explicit feedback on procedures the agent used, by effect.",
            ("effect",),
            registry=r,
        )
        self.rejected = Counter(
            "slowave_feedback_rejected_total",
            "Feedback entries recorded as rejected, by reason.",
            ("reason",),
            registry=r,
        )
        self.implicit = Counter(
            "slowave_feedback_implicit_total",
            "Targets implicitly assessed by a complete coverage declaration.",
            registry=r,
        )
        self.missing = Counter(
            "slowave_knowledge_gaps_reported_total", "`missing` entries reported in feedback.", registry=r
        )
        self.remembered = Counter(
            "slowave_remembered_total", "Claims stored by Remember, by disposition.", ("disposition",), registry=r
        )
        self.refused = Counter(
            "slowave_requests_refused_total",
            "Requests refused as a whole, by ErrorInfo reason.",
            ("reason",),
            registry=r,
        )
        # -- storage
        self.db_transaction = Histogram(
            "slowave_db_transaction_seconds",
            "Time a unit of work holds its database connection (lock waits, statements, commit), by operation: "
            "the RPC served or the background worker.",
            ("operation",),
            registry=r,
            buckets=_LATENCY_BUCKETS,
        )
        self._db_children: dict[str, Any] = {}

        # Bounded label sets are exported from the start (at 0), so rates and ratios exist before
        # the first event and dashboards never show "no data" for a quiet value.
        for kind in TARGET_KINDS:
            self.exposed.labels(kind)
            self.unassessed_at_reap.labels(kind)
        for value in MEMORY_ASSESSMENTS:
            self.assessments.labels("memory", value)
        for reason in STALE_REASONS:
            self.stale.labels(reason)
        for effect in EFFECTS:
            self.procedure_effects.labels(effect)

    def serve(self, addr: str) -> Any:
        host, _, port = addr.rpartition(":")
        server, _thread = start_http_server(int(port), addr=host or "0.0.0.0", registry=self.registry)
        return server

    # -- the database: one observation per unit of work, from pool events (no per-statement cost)

    def instrument_database(self, engine: Engine) -> None:
        """Times every connection checkout → checkin of `engine`: one unit of work (Database.transaction,
        a migration, an admin command) from its first statement's connection to its commit or rollback."""
        children = self._db_children
        histogram = self.db_transaction

        def on_checkout(_dbapi_connection, record, _proxy) -> None:
            record.info[_T0] = time.perf_counter()

        def on_checkin(_dbapi_connection, record) -> None:
            t0 = record.info.pop(_T0, None) if record is not None else None
            if t0 is None:
                return
            op = current_operation()
            child = children.get(op)
            if child is None:
                child = children[op] = histogram.labels(op)
            child.observe(time.perf_counter() - t0)

        event.listen(engine, "checkout", on_checkout)
        event.listen(engine, "checkin", on_checkin)

    # -- recorded by the servicer after each use case

    def request_refused(self, error: DomainError) -> None:
        self.refused.labels(error.reason).inc()
        if error.reason == "INCOMPLETE_FEEDBACK":
            self.gate_blocked.inc()

    def retrieval(self, result: Any) -> None:
        self.exposed.labels("memory").inc(len(result.memories))
        self.exposed.labels("procedure").inc(len(result.procedures))

    def stored_claims(self, results: list) -> None:
        for result in results:
            if isinstance(result, pb.RememberResult):
                self.remembered.labels(enum_word(pb.Disposition.DESCRIPTOR, result.disposition)).inc()

    def feedback(self, cmd: Any, results: list) -> None:
        for item, res_ in zip(cmd.items, results):
            if not isinstance(res_, pb.FeedbackRecord):
                continue
            rejected_ids = {(enum_word(pb.TargetKind.DESCRIPTOR, x.target_kind), x.target_id) for x in res_.rejected}
            for e in item.memory_feedback:
                if ("memory", e.memory_id) in rejected_ids:
                    continue
                self.assessments.labels("memory", e.assessment).inc()
                if e.assessment == "stale":
                    self.stale.labels(e.stale_reason if e.stale_reason in STALE_REASONS else "other").inc()
            for e in item.procedure_feedback:
                if ("procedure", e.procedure_id) in rejected_ids:
                    continue
                self.assessments.labels("procedure", f"{e.use}/{e.effect}").inc()
                if e.use == "used":
                    self.procedure_effects.labels(e.effect if e.effect in EFFECTS else "other").inc()
            for x in res_.rejected:
                self.rejected.labels(x.reason).inc()
            self.implicit.inc(len(res_.implicitly_assessed.memory_ids) + len(res_.implicitly_assessed.procedure_ids))
            self.missing.inc(len(res_.missing))

    def committed(self, result: Any) -> None:
        self.commits.labels(
            enum_word(res.Outcome.DESCRIPTOR, result.outcome),
            enum_word(pb.CommitOperation.DESCRIPTOR, result.operation),
            enum_word(res.VerificationStatus.DESCRIPTOR, result.verification_status),
        ).inc()

    # -- recorded by the reaper after each sweep

    def reaper_sweep(self, sweep: Any) -> None:
        """`sweep`: a `slowave.service.reaper.Sweep` (sessions reaped, exposures left unassessed)."""
        self.reaped.inc(len(sweep.session_ids))
        for kind, n in sweep.unassessed.items():
            self.unassessed_at_reap.labels(kind).inc(n)


class MetricsInterceptor(grpc.ServerInterceptor):
    """Records started / handled / latency for every unary RPC; the final code is read from the
    context after the handler returns or aborts. Names the unit-of-work operation for the database
    histogram while the handler runs."""

    def __init__(self, metrics: Metrics) -> None:
        self.m = metrics
        self._children: dict[str, tuple] = {}  # method path -> its metric children (labels() is slow)

    def _method(self, path: str) -> tuple:
        children = self._children.get(path)
        if children is None:
            service, _, method = path.lstrip("/").partition("/")
            m = self.m
            children = self._children[path] = (
                method,
                m.started.labels("unary", service, method),
                m.latency.labels("unary", service, method),
                {},
                m.cpu.labels("unary", service, method),
                (service, method),
            )
        return children

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None:
            return handler
        method, started, latency, handled, cpu, names = self._method(handler_call_details.method)
        behavior = handler.unary_unary
        counter = self.m.handled

        def wrapped(request, context):
            started.inc()
            token = _operation.set(method)
            start, cpu_start = time.perf_counter(), time.thread_time()
            code = grpc.StatusCode.UNKNOWN
            try:
                response = behavior(request, context)
                code = context.code() or grpc.StatusCode.OK
                return response
            except Exception:
                code = context.code() or grpc.StatusCode.UNKNOWN
                raise
            finally:
                child = handled.get(code)
                if child is None:
                    child = handled[code] = counter.labels("unary", *names, code.name)
                child.inc()
                latency.observe(time.perf_counter() - start)
                cpu.observe(time.thread_time() - cpu_start)
                _operation.reset(token)

        return grpc.unary_unary_rpc_method_handler(
            wrapped, request_deserializer=handler.request_deserializer, response_serializer=handler.response_serializer
        )
