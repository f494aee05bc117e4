"""Overload and deadlines (issue #7): a bounded number of RPCs in flight, and abandoned calls do no work.

The server is made busy deterministically, never by timing: the test holds the database lock the
service's writes need (`hold_write_lock`: SQLite's write lock, or on PostgreSQL the row lock of the
session the calls name), so calls wait inside the server for exactly as long as the test decides.

* Concurrency bound (`max_concurrent_rpcs`, env `SLOWAVE_MAX_CONCURRENT_RPCS`): once that many
  RPCs are in flight, further calls are answered RESOURCE_EXHAUSTED at once by grpcio itself
  (they never queue: a queued call could not finish while the lock is held, and would run into its
  deadline instead). grpcio rejects them in its polling thread, before any interceptor or handler
  runs, with no trailing metadata — so, like the other statuses gRPC produces itself, this one
  carries no `google.rpc.ErrorInfo` (docs/behaviour.md documents it).
* Deadlines: a call whose client deadline passes while it waits commits nothing, even when the
  server gets to run it later (`servicer._run` + `Database.transaction`).
"""

from __future__ import annotations

import re
import uuid
from concurrent.futures import ThreadPoolExecutor

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from slowave.storage import tables
from tests.support import (
    activate,
    assert_serving,
    commit_request,
    hold_write_lock,
    metric_value,
    new_database_url,
    new_scope,
    pb,
    remember,
    res,
    seed_memories,
    start_server_process,
    used,
    wait_until,
)

LIMIT = 4
LONG = 120  # seconds: the deadline of calls that must outlive the held lock on a loaded machine
DEADLINE = 4  # seconds: a deadline that passes while the call waits for the held lock
SERVICE = "slowave.v1.MemoryService"
STATE = tables.sessions.c.keys().index("state")


def _code(future) -> grpc.StatusCode:
    try:
        future.result()
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        return err.code()


def _health_code(channel: grpc.Channel) -> grpc.StatusCode:
    try:
        health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=30)
        return grpc.StatusCode.OK
    except grpc.RpcError as err:
        return err.code()


def test_concurrency_bound_answers_resource_exhausted_and_recovers(make_server):
    srv = make_server(max_concurrent_rpcs=LIMIT)
    stub, scope = srv.stub, new_scope()
    a = activate(stub, scope)
    other = activate(stub, scope)  # a session the held lock does not block (PostgreSQL)
    before = srv.snapshot()
    started = _started(srv, "Remember")
    pool = ThreadPoolExecutor(max_workers=4 * LIMIT)
    try:
        with hold_write_lock(srv.database_url, a.session_id):
            contents = [f"Held claim {i} {uuid.uuid4().hex}" for i in range(LIMIT)]
            held = [
                pool.submit(
                    stub.Remember,
                    pb.RememberRequest(session_id=a.session_id, scope=scope, content=c, type=res.MEMORY_TYPE_FACT),
                    timeout=LONG,
                )
                for c in contents
            ]
            # In flight once their handlers have started (/metrics is HTTP, so watching it takes
            # no RPC slot); then the bound is full and even a health check is refused.
            wait_until(
                lambda: _started(srv, "Remember") >= started + LIMIT, timeout=60, what=f"{LIMIT} held calls to start"
            )
            assert _health_code(srv.channel) == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert not any(f.done() for f in held), [_code(f) for f in held if f.done()]
            # More calls than the bound, of every RPC: all refused at once, none queued (a queued
            # call could not finish while the lock is held and would end DEADLINE_EXCEEDED).
            extra = [
                pool.submit(
                    stub.Remember,
                    pb.RememberRequest(
                        session_id=other.session_id, scope=scope, content="Never stored", type=res.MEMORY_TYPE_FACT
                    ),
                    timeout=LONG,
                ),
                pool.submit(stub.Activate, pb.ActivateRequest(task="t", initial_goal="g", scope=scope), timeout=LONG),
                pool.submit(
                    stub.Recall, pb.RecallRequest(session_id=other.session_id, scope=scope, query="q"), timeout=LONG
                ),
                pool.submit(
                    stub.Feedback,
                    pb.FeedbackRequest(retrieval_id=other.retrieval_id, coverage=pb.COVERAGE_COMPLETE),
                    timeout=LONG,
                ),
                pool.submit(stub.Commit, commit_request(other.session_id), timeout=LONG),
            ] + [
                pool.submit(
                    stub.Remember,
                    pb.RememberRequest(
                        session_id=a.session_id, scope=scope, content=f"Refused {i}", type=res.MEMORY_TYPE_FACT
                    ),
                    timeout=LONG,
                )
                for i in range(2 * LIMIT)
            ]
            codes = [_code(f) for f in extra]
            assert codes == [grpc.StatusCode.RESOURCE_EXHAUSTED] * len(extra), codes
            assert not any(f.done() for f in held), "a held call finished while the lock was held"
        # Released: every admitted call completes and is stored; the server serves again.
        results = [f.result().memory for f in held]
        assert all(r.disposition == pb.DISPOSITION_CREATED for r in results)
        assert_serving(srv.channel)
        after = srv.snapshot()
        assert after["counts"]["memories"] == before["counts"]["memories"] + LIMIT
        assert after["ledger"] == before["ledger"], "a refused Feedback wrote to the ledger"
        state = {row[0]: row[STATE] for row in after["sessions"]}
        assert state[other.session_id] == "open", "the refused Commit closed the session"
        found = stub.Recall(
            pb.RecallRequest(session_id=a.session_id, scope=scope, query=" ".join(contents), page_size=10), timeout=LONG
        )
        assert sorted(m.memory_id for m in found.memories) == sorted(r.memory_id for r in results)
        assert remember(stub, other.session_id, scope, "Never stored").disposition == pb.DISPOSITION_CREATED
    finally:
        pool.shutdown(wait=True)


def _started(srv, method: str) -> float:
    return metric_value(srv.running.metrics_port, "grpc_server_started_total", grpc_service=SERVICE, grpc_method=method)


def test_the_bound_comes_from_the_environment_of_the_real_server(tmp_path):
    """SLOWAVE_MAX_CONCURRENT_RPCS configures the installed entry point: with 2, two held calls fill it."""
    url = new_database_url(tmp_path)
    server = start_server_process(tmp_path, url, SLOWAVE_MAX_CONCURRENT_RPCS="2", SLOWAVE_METRICS_ADDR="127.0.0.1:0")
    pool = ThreadPoolExecutor(max_workers=4)
    try:
        metrics_port = int(next(m for line in server.lines if (m := re.search(r"metrics port (\d+)", line))).group(1))
        scope = new_scope()
        a = activate(server.stub, scope)
        started = metric_value(metrics_port, "grpc_server_started_total", grpc_method="Remember")
        with hold_write_lock(url, a.session_id):
            held = [
                pool.submit(
                    server.stub.Remember,
                    pb.RememberRequest(
                        session_id=a.session_id, scope=scope, content=f"Env bound claim {i}", type=res.MEMORY_TYPE_FACT
                    ),
                    timeout=LONG,
                )
                for i in range(2)
            ]
            wait_until(
                lambda: metric_value(metrics_port, "grpc_server_started_total", grpc_method="Remember") >= started + 2,
                timeout=60,
                what="two held calls to start",
            )
            assert _health_code(server.channel) == grpc.StatusCode.RESOURCE_EXHAUSTED
            assert (
                _code(
                    pool.submit(
                        server.stub.Recall,
                        pb.RecallRequest(session_id=a.session_id, scope=scope, query="q"),
                        timeout=LONG,
                    )
                )
                == grpc.StatusCode.RESOURCE_EXHAUSTED
            )
        assert [f.result().memory.disposition for f in held] == [pb.DISPOSITION_CREATED] * 2
        assert_serving(server.channel)
    finally:
        pool.shutdown(wait=True)
        server.stop()


def _handled(srv, method: str) -> dict[str, float]:
    return {
        code: metric_value(
            srv.running.metrics_port,
            "grpc_server_handled_total",
            grpc_service=SERVICE,
            grpc_method=method,
            grpc_code=code,
        )
        for code in ("OK", "DEADLINE_EXCEEDED", "CANCELLED")
    }


@pytest.mark.parametrize("rpc", ["Remember", "Feedback", "Commit"])
def test_call_whose_deadline_expires_while_waiting_stores_nothing(make_server, rpc):
    """The deadline passes while the call waits for the lock; once the lock is released the server
    runs it, but its unit of work is rolled back: nothing of it is stored, ever."""
    srv = make_server()
    stub, scope = srv.stub, new_scope()
    seeded = seed_memories(stub, scope, ["Quokka telemetry ships nightly builds."])
    a = activate(stub, scope, task="Quokka telemetry ships nightly builds.")
    assert seeded[0] in [m.memory_id for m in a.memories]
    if rpc == "Remember":
        request = pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[
                pb.RememberItem(content=f"Expired claim {i} {uuid.uuid4().hex}", type=res.MEMORY_TYPE_FACT)
                for i in range(3)
            ],
        )
    elif rpc == "Feedback":
        request = pb.FeedbackRequest(
            retrieval_id=a.retrieval_id, memory_feedback=[used(seeded[0])], coverage=pb.COVERAGE_COMPLETE
        )
    else:
        stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=LONG)
        request = commit_request(
            a.session_id,
            procedure=pb.CommitProcedure(steps=["Expired step"]),
            trajectory=[pb.TrajectoryEntry(kind=pb.TRAJECTORY_KIND_ACTION, summary="Expired action")],
        )
    before = srv.snapshot()
    handled, started = _handled(srv, rpc), _started(srv, rpc)
    with hold_write_lock(srv.database_url, a.session_id):
        call = getattr(stub, rpc).future(request, timeout=DEADLINE)
        # The server has started the call (it now waits for the lock) before its deadline passes.
        wait_until(lambda: _started(srv, rpc) > started or call.done(), timeout=60, what=f"the {rpc} to start")
        with pytest.raises(grpc.RpcError) as caught:
            call.result()
        assert caught.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED
        assert _started(srv, rpc) > started, f"the {rpc} expired before the server started it; nothing tested"
    # The server now gets the lock and runs the call: wait until it has answered it.
    wait_until(
        lambda: sum(_handled(srv, rpc).values()) > sum(handled.values()),
        timeout=90,
        what=f"the server to finish the expired {rpc}",
    )
    now = _handled(srv, rpc)
    assert now["OK"] == handled["OK"], f"the expired {rpc} was executed and committed"
    after = srv.snapshot()
    assert after == before, f"the expired {rpc} changed the store"
    # The same request with time to spare succeeds: the refusal was the deadline, not the request.
    response = getattr(stub, rpc)(request, timeout=LONG)
    if rpc == "Remember":
        assert [r.data.disposition for r in response.batch.results] == [pb.DISPOSITION_CREATED] * 3
    elif rpc == "Feedback":
        assert response.record.applied.strengthened == seeded
    else:
        assert response.operation == pb.COMMIT_OPERATION_CLOSED and response.procedure_id
    assert_serving(srv.channel)


def test_sqlite_writer_waiting_past_the_pool_timeout_gets_unavailable_and_stores_nothing(make_server):
    """SQLite writers of one server queue on an in-process lock (not the busy handler's polling):
    a write still waiting for its turn after SLOWAVE_DB_POOL_TIMEOUT is refused UNAVAILABLE,
    retryable, and leaves nothing behind; the writer ahead of it completes once the lock frees."""
    from slowave.storage.database import PoolOptions
    from tests.support import check_error, details_of

    srv = make_server(pool=PoolOptions(timeout=1.0))
    if not srv.database_url.startswith("sqlite"):
        pytest.skip("the in-process writer queue exists for SQLite only")
    stub, scope = srv.stub, new_scope()
    a = activate(stub, scope)
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        with hold_write_lock(srv.database_url, a.session_id):
            started = _started(srv, "Remember")
            first = pool.submit(
                stub.Remember,
                pb.RememberRequest(
                    session_id=a.session_id, scope=scope, content=f"First {uuid.uuid4().hex}", type=res.MEMORY_TYPE_FACT
                ),
                timeout=LONG,
            )
            wait_until(lambda: _started(srv, "Remember") >= started + 1, timeout=60, what="the first write to start")
            second = pool.submit(
                stub.Remember,
                pb.RememberRequest(
                    session_id=a.session_id, scope=scope, content="Second, refused", type=res.MEMORY_TYPE_FACT
                ),
                timeout=LONG,
            )
            with pytest.raises(grpc.RpcError) as refused:
                second.result(timeout=LONG)
            check_error(
                details_of(refused.value), grpc.StatusCode.UNAVAILABLE, "INTERNAL_ERROR", "internal_error", True
            )
            assert not first.done()
        assert first.result(timeout=LONG).memory.disposition == pb.DISPOSITION_CREATED
    finally:
        pool.shutdown(wait=True)
    contents = [m.content for m in activate(stub, scope, task="Second, refused").memories]
    assert "Second, refused" not in contents
