"""A retrieval's frozen catalog is released when its session ends (Commit's close, the reaper) and by
migration 0019 for sessions that ended before it.

The catalog only serves the session's continuation pages (behaviour §5.4), and an ended session
refuses them (SESSION_ENDED, §2.4); what Feedback, the commit gate and learning read of a
retrieval (its header, its exposures, its cue) stays, so feedback on an ended session's retrieval
still counts (§10.6, L7). Kept whole, every Activate left ~3.4 KB in the store for good. Over gRPC
on both backends (the suite runs again on PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import grpc

from slowave.storage.database import Database
from slowave.storage.retrievals import RELEASED_CATALOG
from tests.support import (
    Server,
    activate,
    assess_all,
    check_error,
    commit,
    expect_error,
    new_database_url,
    new_scope,
    pb,
    seed_memories,
    used,
    wait_until,
)

CLAIMS = ["Deploy port equals 8080 on alpha clusters", "Graphite runners build nightly bravo artifacts"]
TASK = f"{CLAIMS[0]}. {CLAIMS[1]}."  # contains both claims verbatim: both are admitted (the floor)


def catalog_of(srv: Server, retrieval_id: str) -> dict:
    with srv.running.ctx.db.transaction(read_only=True) as uow:
        return uow.retrievals.get("local", retrieval_id).catalog


def recall_page(srv: Server, session_id: str, scope: str, cursor: str) -> pb.RecallResponse:
    return srv.stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, continue_from=cursor), timeout=30)


def _ended_session_keeps_its_feedback(srv: Server, scope: str, a: pb.ActivateResponse) -> None:
    """After the end: no page (SESSION_ENDED), and Feedback on the retrieval is accepted and learns."""
    err = expect_error(lambda: recall_page(srv, a.session_id, scope, a.continue_from))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SESSION_ENDED", "invalid_input", False)
    exposed = a.memories[0].memory_id
    record = srv.stub.Feedback(
        pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(exposed)]), timeout=30
    ).record
    assert list(record.rejected) == [] and list(record.applied.strengthened) == [exposed]
    again = activate(srv.stub, scope, task=TASK, page_size=2)
    assert {m.memory_id: m.ranking.learned for m in again.memories}[exposed] > 0


def test_a_committed_sessions_catalogs_are_released_and_its_feedback_still_counts(server: Server):
    scope = new_scope()
    seed_memories(server.stub, scope, CLAIMS)
    a = activate(server.stub, scope, task=TASK, page_size=1)
    assert a.more_available and a.HasField("continue_from")
    page = recall_page(server, a.session_id, scope, a.continue_from)  # a second page of the catalog
    assert [m.content for m in page.memories] != [m.content for m in a.memories]
    other = activate(server.stub, scope, task=TASK, page_size=1)  # another session, left open
    assert len(catalog_of(server, a.retrieval_id)["memories"]) == 2

    # The gate still reads the exposures: the commit is refused until both pages have feedback.
    err = expect_error(lambda: commit(server.stub, a.session_id))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "INCOMPLETE_FEEDBACK", "incomplete_feedback", True)
    assert len(catalog_of(server, a.retrieval_id)["memories"]) == 2  # a refused commit releases nothing
    assess_all(server.stub, a)
    assert commit(server.stub, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED

    assert catalog_of(server, a.retrieval_id) == RELEASED_CATALOG
    # The open session's catalog is whole and serves its next page.
    assert len(catalog_of(server, other.retrieval_id)["memories"]) == 2
    assert len(recall_page(server, other.session_id, scope, other.continue_from).memories) == 1
    _ended_session_keeps_its_feedback(server, scope, a)
    # A commit of the ended session (an update) changes nothing of it.
    assert commit(server.stub, a.session_id).operation == pb.COMMIT_OPERATION_UPDATED
    assert catalog_of(server, a.retrieval_id) == RELEASED_CATALOG


def test_a_reaped_sessions_catalogs_are_released_and_its_feedback_still_counts(make_server):
    srv = make_server(session_idle_timeout=2)
    scope = new_scope()
    seed_memories(srv.stub, scope, CLAIMS)
    a = activate(srv.stub, scope, task=TASK, page_size=1)
    recall = srv.stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope, query=CLAIMS[1]), timeout=30)
    assert len(catalog_of(srv, recall.retrieval_id)["memories"]) >= 1

    wait_until(lambda: catalog_of(srv, a.retrieval_id) == RELEASED_CATALOG, timeout=60, interval=0.2, what="the reaper")
    assert catalog_of(srv, recall.retrieval_id) == RELEASED_CATALOG  # every retrieval of the session
    _ended_session_keeps_its_feedback(srv, scope, a)


def test_0019_releases_the_catalogs_of_sessions_that_ended_before_it(tmp_path: Path):
    url = new_database_url(tmp_path)
    db = Database(url)
    db.migrate("0018")
    now = datetime(2026, 12, 7, 12, tzinfo=UTC)
    catalog = {"format": 2, "memories": [[1, "fact", 1.0, 0.0, 1.0, 10, 10, "direct", None]], "procedures": []}
    catalog.update(relevant_total=1, truncated=False)
    with db.transaction() as uow:
        for sid, state in (("open", "open"), ("closed", "closed"), ("reaped", "reaped")):
            uow.sessions.insert(
                id=sid,
                tenant="local",
                scope="project:m",
                task="t",
                initial_goal="g",
                task_context={},
                state=state,
                feedback_status="pending",
                started_at=now,
                last_activity_at=now,
                ended_at=None if state == "open" else now + timedelta(minutes=1),
                recall_calls=0,
                session_events=1,
                completion_recorded=False,
            )
            uow.retrievals.insert(
                id=f"ctx_{sid}",
                tenant="local",
                session_id=sid,
                kind="activation",
                scope="project:m",
                created_at=now,
                page_size=5,
                policy_version="p",
                cue_number=None,
                relevant_total=1,
                catalog_truncated=False,
                catalog=catalog,
            )
    db.migrate()
    with db.transaction(read_only=True) as uow:
        stored = {sid: uow.retrievals.get("local", f"ctx_{sid}").catalog for sid in ("open", "closed", "reaped")}
        retrievals = uow.table_counts()["retrievals"]
    db.engine.dispose()
    assert stored == {"open": catalog, "closed": RELEASED_CATALOG, "reaped": RELEASED_CATALOG}
    assert retrievals == 3
