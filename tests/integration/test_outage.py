"""Database outage on PostgreSQL (behaviour §4.2 `database unavailable`, 4.5 stage 6; checklist 17).

The test starts its own PostgreSQL cluster (never the session's shared one), stops it under a
running server, and expects every RPC to fail UNAVAILABLE with ErrorInfo reason INTERNAL_ERROR,
code `internal_error`, retryable "true". When the cluster comes back, the same server process
answers again without a restart, and nothing acknowledged before the outage is lost.
(The embedded-database half of scenario 17 lives elsewhere.)
"""

from __future__ import annotations

import os
import uuid

import grpc
import pytest
from sqlalchemy import func, select

from slowave.storage import tables as t
from tests.postgres import PostgresCluster, find_bindir
from tests.support import (
    activate,
    commit_request,
    expect_error,
    new_scope,
    pb,
    res,
    start_test_server,
    used,
    wait_until,
)

pytestmark = pytest.mark.skipif(
    os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite") != "postgresql",
    reason="the PostgreSQL outage of scenario 17 runs in the PostgreSQL suite: SLOWAVE_TEST_BACKEND=postgresql",
)

CALL_TIMEOUT = 60
CLAIMS = ["Deploy port equals 8080.", "Builds require python twelve.", "Cache invalidation runs nightly."]
OUTAGE_CLAIM = "Quokka marmalade xylophone zeppelin."


@pytest.fixture
def dedicated_cluster():
    """A PostgreSQL cluster of this test only: stopping it touches no other test."""
    bindir = find_bindir()
    if bindir is None:
        pytest.skip("PostgreSQL binaries (initdb, pg_ctl, postgres) not found")
    cluster = PostgresCluster(bindir)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.destroy()


@pytest.fixture
def outage_server(dedicated_cluster, tmp_path):
    srv = start_test_server(tmp_path, database_url=dedicated_cluster.new_database())
    try:
        yield srv
    finally:
        srv.stop()


def safe_summary() -> str:
    """Random tokens: the consolidated lesson is never admitted by the cues of this test."""
    return f"zq{uuid.uuid4().hex[:10]} zr{uuid.uuid4().hex[:10]}."


def remember(stub, session_id: str, scope: str, content: str) -> pb.RememberResult:
    return stub.Remember(
        pb.RememberRequest(session_id=session_id, scope=scope, content=content, type=res.MEMORY_TYPE_FACT),
        timeout=CALL_TIMEOUT,
    ).memory


def commit(stub, session_id: str) -> pb.CommitResponse:
    return stub.Commit(commit_request(session_id, outcome_summary=safe_summary()), timeout=CALL_TIMEOUT)


def assert_unavailable(call, what: str) -> None:
    err = expect_error(call)
    assert err.code == grpc.StatusCode.UNAVAILABLE, (what, err)
    assert err.has_error_info, (what, err)
    assert (err.reason, err.domain) == ("INTERNAL_ERROR", "slowave.ai"), (what, err)
    assert err.metadata == {"code": "internal_error", "retryable": "true"}, (what, err)


def test_s17_postgres_outage_is_unavailable_and_recovers(dedicated_cluster, outage_server):
    srv, stub = outage_server, outage_server.stub
    scope = new_scope()

    # Acknowledged before the outage: three claims, a closed session, one feedback row.
    seeding = activate(stub, scope, task=f"seeding zs{uuid.uuid4().hex[:10]}", initial_goal="seed")
    ids = [remember(stub, seeding.session_id, scope, c).memory_id for c in CLAIMS]
    stub.Feedback(
        pb.FeedbackRequest(retrieval_id=seeding.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=CALL_TIMEOUT
    )
    assert commit(stub, seeding.session_id).operation == pb.COMMIT_OPERATION_CLOSED
    work = activate(stub, scope, task=" ".join(CLAIMS), page_size=10)
    exposure = [m.memory_id for m in work.memories]
    assert sorted(exposure) == sorted(ids)
    record = stub.Feedback(
        pb.FeedbackRequest(retrieval_id=work.retrieval_id, memory_feedback=[used(ids[0])]), timeout=CALL_TIMEOUT
    ).record
    assert list(record.applied.strengthened) == [ids[0]]

    dedicated_cluster.stop()

    # Twice: first with the pool's connections the database just dropped, then with none left.
    for _ in range(2):
        assert_unavailable(lambda: activate(stub, scope, task=" ".join(CLAIMS)), "Activate")
        assert_unavailable(lambda: remember(stub, work.session_id, scope, OUTAGE_CLAIM), "Remember")
        assert_unavailable(
            lambda: stub.Feedback(
                pb.FeedbackRequest(retrieval_id=work.retrieval_id, memory_feedback=[used(ids[1])]), timeout=CALL_TIMEOUT
            ),
            "Feedback",
        )
        assert_unavailable(lambda: commit(stub, work.session_id), "Commit")
        assert_unavailable(
            lambda: stub.Recall(
                pb.RecallRequest(session_id=work.session_id, scope=scope, query=CLAIMS[0]), timeout=CALL_TIMEOUT
            ),
            "Recall",
        )

    dedicated_cluster.restart_stopped()

    # The same server process recovers by itself; while it does, only UNAVAILABLE is acceptable.
    def answers() -> pb.ActivateResponse | None:
        try:
            return activate(stub, scope, task=" ".join(CLAIMS), page_size=10)
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAVAILABLE, (err.code(), err.details())
            return None

    after = wait_until(answers, timeout=120, interval=0.5, what="the server to answer after PostgreSQL restarted")

    # Nothing acknowledged was lost, and nothing refused was written.
    learned = {m.memory_id: round(m.ranking.learned, 6) for m in after.memories}
    assert learned == {ids[0]: 0.05, ids[1]: 0.0, ids[2]: 0.0}
    again = commit(stub, seeding.session_id)
    assert (again.operation, again.already_ended) == (pb.COMMIT_OPERATION_UPDATED, True)
    with srv.running.ctx.db.engine.connect() as conn:
        m = t.memories
        stored = conn.execute(select(func.count()).select_from(m).where(m.c.content == OUTAGE_CLAIM)).scalar_one()
    assert stored == 0
    with srv.running.ctx.db.transaction() as uow:
        ledger = [(r.target_id, r.accepted) for r in uow.ledger.rows(work.retrieval_id) if r.target_kind == "memory"]
    assert ledger == [(ids[0], True)]

    # Every RPC works again on the session opened before the outage, which stayed open.
    assert remember(stub, work.session_id, scope, OUTAGE_CLAIM).disposition == pb.DISPOSITION_CREATED
    fb = stub.Feedback(
        pb.FeedbackRequest(retrieval_id=work.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=CALL_TIMEOUT
    ).record
    assert (
        list(fb.implicitly_assessed.memory_ids) == [i for i in exposure if i != ids[0]]
        and list(fb.outstanding.memory_ids) == []
    )
    recall = stub.Recall(
        pb.RecallRequest(session_id=work.session_id, scope=scope, query=OUTAGE_CLAIM), timeout=CALL_TIMEOUT
    )
    stub.Feedback(
        pb.FeedbackRequest(retrieval_id=recall.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=CALL_TIMEOUT
    )
    done = commit(stub, work.session_id)
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert done.episodes_formed == 1  # the claim remembered after recovery; none from the outage
    # The background consolidator recovered too: it drains the queue without help.
    wait_until(
        lambda: srv._pending_consolidations() == 0,
        timeout=60,
        interval=0.2,
        what="the background consolidator to drain the queue after the outage",
    )
