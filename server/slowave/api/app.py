"""The server process: gRPC (MemoryService, health, reflection), metrics, reaper, consolidator."""

from __future__ import annotations

import dataclasses
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from slowave import dense_graph_files, tracing
from slowave.api import allocator, blas, collector, port_claim, supervisor
from slowave.api.access_log import AccessLogInterceptor, configure_logging
from slowave.api.auth import StartupRefused, prepare_security
from slowave.api.drain import DrainInterceptor
from slowave.api.metrics import Metrics, MetricsInterceptor
from slowave.api.request_budget import RequestBudgetInterceptor
from slowave.api.servicer import MemoryServicer
from slowave.api.tracing import TracingInterceptor
from slowave.api.undecodable import UndecodableRequestInterceptor
from slowave.background import Periodic
from slowave.clock import Clock, DatabaseClock, SystemClock
from slowave.config import Settings
from slowave.domain.api_keys import KeyConfigError
from slowave.embedding import load_semantic_channel
from slowave.service.consolidation import Consolidator
from slowave.service.context import ServiceContext
from slowave.service.reaper import Reaper
from slowave.service.retrieval import policy_version
from slowave.service.shape_backfill import backfill_shapes
from slowave.service.vector_backfill import backfill
from slowave.service.warm_up import warm_up
from slowave.storage.database import Database, WalCheckpointer
from slowave.storage.index_merger import IndexMerger
from slowave.v1 import memory_service_pb2 as pb

log = logging.getLogger("slowave")
SERVICE_NAME = pb.DESCRIPTOR.services_by_name["MemoryService"].full_name
MAX_REQUEST_BYTES = 8 * 1024 * 1024

# Keepalive and connection age: behind an L4 balancer one HTTP/2 connection would pin a client to
# a pod forever; a bounded age makes clients re-resolve and rebalance.
_SERVER_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_REQUEST_BYTES),
    ("grpc.keepalive_time_ms", 60_000),
    ("grpc.keepalive_timeout_ms", 20_000),
    ("grpc.http2.min_ping_interval_without_data_ms", 10_000),
    ("grpc.max_connection_idle_ms", 300_000),
    ("grpc.max_connection_age_ms", 600_000),
    ("grpc.max_connection_age_grace_ms", 30_000),
    # Several server processes bind one port (api.supervisor); the kernel spreads connections.
    ("grpc.so_reuseport", 1),
]


@dataclass
class RunningServer:
    server: grpc.Server
    port: int
    ctx: ServiceContext
    metrics: Metrics
    health: health.HealthServicer
    drain: DrainInterceptor
    request_budget: RequestBudgetInterceptor
    reaper: Reaper
    consolidator: Consolidator
    gauges: GaugeRefresher
    checkpointer: WalCheckpointer | None = None
    index_merger: IndexMerger | None = None
    backfilled: int = 0
    """Memories embedded at start (service.vector_backfill)."""
    metrics_port: int | None = None
    _metrics_http: object | None = None

    def stop(self, grace: float | None = None) -> None:
        """Graceful: health NOT_SERVING and new calls UNAVAILABLE (api.drain), in-flight calls
        finish within `grace`, then gRPC stops, then the workers and the pool."""
        grace = grace if grace is not None else self.ctx.settings.shutdown_grace_seconds
        deadline = time.monotonic() + grace
        self.health.enter_graceful_shutdown()
        self.drain.begin()
        self.drain.wait_idle(grace)
        self.server.stop(max(0.0, deadline - time.monotonic())).wait()
        if self.ctx.settings.background_work:
            self.reaper.stop()
            self.consolidator.stop()
            self.gauges.stop()
        if self.checkpointer is not None:
            self.checkpointer.stop()
        if self.index_merger is not None:
            self.index_merger.stop()
        if self._metrics_http is not None:
            self._metrics_http.shutdown()  # type: ignore[attr-defined]
        self.ctx.db.dispose()
        if self.ctx.settings.tracing:
            tracing.shutdown()


def start_server(settings: Settings, clock: Clock | None = None) -> RunningServer:
    if settings.tracing:
        tracing.configure_exporter()
    db = Database(settings.database_url, settings.pool)
    db.migrate()
    if clock is None:
        clock = DatabaseClock(db) if db.dialect == "postgresql" else SystemClock()
    ctx = ServiceContext(db=db, settings=settings, clock=clock, semantic=load_semantic_channel(settings.semantic))
    if ctx.semantic is not None:
        ctx.semantic.index.files = dense_graph_files.for_store(settings, db)
        # One process of the server extends and saves the graphs; the others take them.
        ctx.semantic.index.follower = not settings.background_work
        # The dense index's products run on numpy's BLAS: one thread in the serving process (a
        # supervisor, which serves nothing, never loads numpy).
        limited = blas.one_thread()
        log.info(
            "BLAS threads per process: %s (%s)", blas.threads(), "api.blas" if limited else "as the environment sets"
        )
    metrics = Metrics()
    metrics.instrument_database(db.engine)
    drain, request_budget = DrainInterceptor(), RequestBudgetInterceptor()
    consolidator = Consolidator(ctx, idle=drain.wait_idle)
    reaper = Reaper(ctx, on_reaped=metrics.reaper_sweep)
    try:
        security = prepare_security(ctx, on_refused=metrics.request_refused)
    except Exception:
        db.dispose()
        raise

    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=settings.max_workers, thread_name_prefix="slowave-rpc"),
        # The first runs outermost: the access line covers every call, authentication refusals included.
        interceptors=[
            *([TracingInterceptor()] if settings.tracing else []),
            AccessLogInterceptor(),
            MetricsInterceptor(metrics),
            security.interceptor,
            drain,
            request_budget,
            UndecodableRequestInterceptor(),
        ],
        options=_SERVER_OPTIONS,
        maximum_concurrent_rpcs=settings.max_concurrent_rpcs,
    )
    from slowave.v1 import memory_service_pb2_grpc as pb_grpc

    pb_grpc.add_MemoryServiceServicer_to_server(MemoryServicer(ctx, metrics, on_commit=consolidator.notify), server)
    health_servicer = health.HealthServicer(experimental_non_blocking=True)
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        (SERVICE_NAME, health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME), server
    )
    port = security.add_port(server, settings.listen_addr)
    if port == 0:
        raise RuntimeError(f"could not bind {settings.listen_addr}")
    backfilled = backfill(ctx) if settings.background_work else 0  # before serving: see vector_backfill
    if settings.background_work:
        backfill_shapes(ctx)
    warm_up(ctx, settings.warm_scopes)  # before serving: see service.warm_up
    server.start()
    for name in ("", SERVICE_NAME):
        health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    gauges = GaugeRefresher(ctx, metrics, settings.gauge_refresh_seconds)
    checkpointer = index_merger = None
    if settings.background_work:
        reaper.start()
        consolidator.start()
        gauges.start()
        checkpointer = db.background_checkpoints(settings.wal_checkpoint_seconds)
        if db.sqlite_path is not None:
            index_merger = IndexMerger(db, settings.index_merge_seconds).start()
    running = RunningServer(
        server,
        port,
        ctx,
        metrics,
        health_servicer,
        drain,
        request_budget,
        reaper,
        consolidator,
        gauges,
        checkpointer=checkpointer,
        index_merger=index_merger,
        backfilled=backfilled,
    )
    if settings.metrics_addr:
        running._metrics_http = metrics.serve(settings.metrics_addr)
        running.metrics_port = running._metrics_http.server_port  # type: ignore[attr-defined]
    return running


class GaugeRefresher:
    """Refreshes database-derived gauges in the background, so a scrape never waits on the database."""

    def __init__(self, ctx: ServiceContext, metrics: Metrics, interval: float = 5.0) -> None:
        self.ctx, self.metrics, self.interval = ctx, metrics, interval
        self._loop = Periodic(
            "slowave-gauges",
            interval,
            self._refresh,
            at_start=True,
            on_error=lambda exc: log.debug("gauge refresh failed", exc_info=exc),
        )

    def start(self) -> None:
        self._loop.start()

    def _refresh(self) -> None:
        with self.ctx.db.transaction() as uow:
            self.metrics.open_sessions.set(uow.sessions.count_open())

    def stop(self) -> None:
        self._loop.stop()


def main() -> None:
    """`slowave-server`: one process per core by default (api.supervisor), or a single one."""
    allocator.cap_arenas()  # before the process starts its threads
    configure_logging()  # SLOWAVE_LOG_FORMAT (json | text), SLOWAVE_LOG_LEVEL
    try:
        settings = Settings.from_env()
        if supervisor.PROCESS_INDEX_ENV in os.environ:
            _serve_as_one_of_many(settings, int(os.environ[supervisor.PROCESS_INDEX_ENV]))
        else:
            claim = _claim_port(settings.listen_addr)
            try:
                if settings.processes > 1:
                    _supervise(settings)
                else:
                    _serve(settings, start_server(settings))
            finally:
                if claim is not None:
                    claim.release()
    except (StartupRefused, KeyConfigError) as exc:
        log.error("not starting: %s", exc)
        sys.exit(2)


def _claim_port(addr: str) -> port_claim.PortClaim | None:
    """Refuses a start on a port another server serves or is starting on (api.port_claim): with
    SO_REUSEPORT both would bind it and the kernel would split the connections between them."""
    host, port = supervisor.split_addr(addr)
    try:
        claim = port_claim.claim_port(host, port)
    except port_claim.PortTaken as exc:
        raise StartupRefused(f"{addr} is already served by another process (SLOWAVE_LISTEN_ADDR): {exc}") from None
    if supervisor.already_served(addr):  # a server started before claims existed, or another program
        if claim is not None:
            claim.release()
        raise StartupRefused(
            f"{addr} is already served by another process (SLOWAVE_LISTEN_ADDR): "
            "with SO_REUSEPORT both would bind it and split the connections between them"
        )
    return claim


def _settle() -> None:
    """A serving process has loaded all it needs: the garbage collector never walks it again."""
    log.info("garbage collector: %d objects frozen at start (api.collector)", collector.settle())


def _serve(settings: Settings, running: RunningServer) -> None:
    _settle()
    _log_serving(settings, running.port, running.metrics_port, policy_version(running.ctx.semantic, settings.limits))
    _until_signal(settings, running.stop)


def _serve_as_one_of_many(settings: Settings, index: int) -> None:
    supervisor.die_with_supervisor()
    one = dataclasses.replace(settings, processes=1, background_work=index == 0)
    running = start_server(one)
    _settle()
    supervisor.signal_ready(running.port, policy_version(running.ctx.semantic, one.limits))
    log.info("server process %d (pid %d) serving on port %d", index, os.getpid(), running.port)
    _until_signal(settings, running.stop)


def _supervise(settings: Settings) -> None:
    # Migrations and the configuration checks once, before any process serves: a refused
    # configuration stops here with its message instead of once per process.
    db = Database(settings.database_url, settings.pool)
    try:
        db.migrate()
        ctx = ServiceContext(db=db, settings=settings, semantic=load_semantic_channel(settings.semantic))
        prepare_security(ctx)
        backfill(ctx)
        backfill_shapes(ctx)
    finally:
        db.dispose()
    supervised = supervisor.Supervisor(settings)

    def on_signal(signum: int, _frame: object) -> None:
        log.info(
            "signal %d: draining %d processes (grace %.0fs)",
            signum,
            settings.processes,
            settings.shutdown_grace_seconds,
        )
        supervised.request_stop()

    # Before the processes start: a SIGTERM while they do drains them once they serve.
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        supervised.start()
    except supervisor.StartFailed as exc:
        log.error("not starting: %s", exc)
        sys.exit(exc.code or 1)
    _log_serving(settings, supervised.port, supervised.metrics_port, supervised.policy, settings.processes)
    supervised.run()
    supervised.stop()
    log.info("stopped")


def _log_serving(settings: Settings, port: int, metrics_port: int | None, policy: str, processes: int = 1) -> None:
    log.info(
        "slowave serving %s on port %d (%d process%s, database %s, metrics port %s, idle timeout %ss, "
        "retrieval policy %s)",
        SERVICE_NAME,
        port,
        processes,
        "" if processes == 1 else "es",
        settings.database_url.split("@")[-1],
        metrics_port or "off",
        settings.session_idle_timeout,
        policy,
    )


def _until_signal(settings: Settings, stop: Callable[[], None]) -> None:
    done = threading.Event()

    def on_signal(signum: int, _frame: object) -> None:
        log.info("signal %d: draining (grace %.0fs)", signum, settings.shutdown_grace_seconds)
        stop()
        done.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    done.wait()
    log.info("stopped")


if __name__ == "__main__":
    main()
