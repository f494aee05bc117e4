"""The drain of a graceful shutdown (api.drain): once it begins, health is NOT_SERVING and a new
call gets UNAVAILABLE with ErrorInfo `internal_error`, retryable, and RetryInfo (a client retries
it elsewhere) instead of the CANCELLED grpcio gives calls that race with its own stop; the calls
admitted before it finish, and the refused call stores nothing."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import grpc
from google.rpc import error_details_pb2
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from slowave.storage.database import Database
from tests.support import activate, check_error, details_of, new_scope, pb, res, wait_until


def test_calls_arriving_during_the_drain_are_unavailable_and_retryable(make_server):
    srv = make_server()
    scope = new_scope()
    a = activate(srv.stub, scope, task="Drain drill")
    drain = srv.running.drain
    holder = Database(srv.database_url)
    stopper = threading.Thread(target=lambda: srv.running.stop(grace=60), name="stopper")

    def remember() -> pb.RememberResponse:
        return srv.stub.Remember(
            pb.RememberRequest(
                session_id=a.session_id,
                scope=scope,
                content="The drain drill claim is durable.",
                type=res.MEMORY_TYPE_FACT,
            ),
            timeout=120,
        )

    with ThreadPoolExecutor(max_workers=1) as pool:
        # Every Remember of the session needs this lock (SQLite: the write lock; PostgreSQL: the
        # session row), so the call is provably in flight when the drain begins.
        with holder.transaction() as held:
            held.sessions.get("local", a.session_id, lock=True)
            in_flight = pool.submit(remember)
            wait_until(lambda: drain.in_flight == 1, timeout=60, what="the Remember to be admitted")
            stopper.start()
            wait_until(lambda: drain.draining, timeout=30, what="the drain to begin")

            health = health_pb2_grpc.HealthStub(srv.channel).Check(
                health_pb2.HealthCheckRequest(service="slowave.v1.MemoryService"), timeout=30
            )
            assert health.status == health_pb2.HealthCheckResponse.NOT_SERVING
            sessions_before = held.table_counts()["sessions"]
            try:
                srv.stub.Activate(pb.ActivateRequest(task="Too late", initial_goal="Too late", scope=scope), timeout=30)
                raise AssertionError("a call arriving during the drain was served")
            except grpc.RpcError as exc:
                err = details_of(exc)
                status = rpc_status.from_call(exc)
            check_error(err, grpc.StatusCode.UNAVAILABLE, "INTERNAL_ERROR", "internal_error", True)
            assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details), status
        # The admitted call finishes once the lock is released, and so does the shutdown.
        reply = in_flight.result(timeout=120)
    assert reply.memory.disposition == pb.DISPOSITION_CREATED
    stopper.join(timeout=120)
    assert not stopper.is_alive()
    with holder.transaction() as uow:
        assert uow.memories.get("local", int(reply.memory.memory_id[len("sch_") :])) is not None
        assert uow.table_counts()["sessions"] == sessions_before  # the refused Activate opened none
    holder.engine.dispose()
