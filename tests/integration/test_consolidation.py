"""Offline consolidation and procedure capture over real gRPC (behaviour §11.3, 11.6; checklist 59, 63, 70).

Outcome summaries and goals are built by `claim()` (a random suffix on every word), so each is
admitted only by a cue containing it verbatim (behaviour §12.1). `server.consolidate()` runs the queued
consolidation synchronously; the background consolidator is only relied on with `wait_until`.
"""

from __future__ import annotations

import json

from google.protobuf import json_format, struct_pb2

from slowave.domain.identifiers import memory_number
from tests.support import activate, assess_all, claim, commit, pb, remember, res, wait_until


def ids(response) -> list[str]:
    return [m.memory_id for m in response.memories]


def closed_session(stub, scope: str, **commit_kw) -> tuple[str, pb.CommitResponse]:
    a = activate(stub, scope, task=claim("fix the nightly build"), initial_goal="Fix the nightly build")
    assess_all(stub, a)
    c = commit(stub, a.session_id, **commit_kw)
    assert c.operation == pb.COMMIT_OPERATION_CLOSED
    return a.session_id, c


def retrieve(stub, scope: str, task: str) -> pb.ActivateResponse:
    """An Activate whose session is then closed, so retrieval sessions do not pile up open."""
    a = activate(stub, scope, task=task, initial_goal="Look it up")
    assess_all(stub, a)
    commit(stub, a.session_id, outcome_summary=claim("looked it up"))
    return a


def session_links(server, session_id: str) -> list:
    """White-box: the session → derived-memory links consolidation keeps (no RPC reports them)."""
    with server.running.ctx.db.transaction() as uow:
        return [(link.memory_number, link.created_by_session) for link in uow.consolidation.session_links(session_id)]


# ------------------------------------------------------------------------------------ 59


def test_s59_outcome_summary_becomes_a_lesson_and_follows_updates(server, stub, scope):
    s1 = claim("Restored the service token in the CI config and the nightly build passes again.")
    s2 = claim("Pinned the runner image; the nightly build is green again.")
    goal = claim("Fix the nightly build")
    sid, _ = closed_session(stub, scope, final_goal=goal, outcome_summary=s1)
    out = server.admin("consolidate")  # the admin command of behaviour §4.8
    assert "consolidated" in out

    b = retrieve(stub, scope, s1)
    assert len(b.memories) == 1
    m = b.memories[0]
    assert m.content == s1 and m.type == res.MEMORY_TYPE_LESSON and m.pathway == "direct"
    p = m.provenance
    assert p.source_kind == "consolidated" and p.source_session_id == sid and p.source_goal == goal
    assert p.source_outcome == res.OUTCOME_SUCCESS
    assert p.source_verification_status == res.VERIFICATION_STATUS_VERIFIED
    lesson1 = m.memory_id

    u = commit(
        stub,
        sid,
        final_goal=goal,
        outcome_summary=s2,
        outcome=res.OUTCOME_PARTIAL,
        verification=pb.Verification(status=res.VERIFICATION_STATUS_PARTIALLY_VERIFIED, summary="CI ran once."),
    )
    assert u.operation == pb.COMMIT_OPERATION_UPDATED and u.already_ended
    server.consolidate()

    d = retrieve(stub, scope, s2)
    assert len(d.memories) == 1
    m2 = d.memories[0]
    assert m2.content == s2 and m2.type == res.MEMORY_TYPE_LESSON and m2.memory_id != lesson1
    assert m2.provenance.source_kind == "consolidated" and m2.provenance.source_session_id == sid
    assert m2.provenance.source_outcome == res.OUTCOME_PARTIAL
    assert m2.provenance.source_verification_status == res.VERIFICATION_STATUS_PARTIALLY_VERIFIED

    # A cue that admitted S now gets S2's memory in its place, never S's (behaviour §11.6, 12.3).
    e = retrieve(stub, scope, s1)
    assert ids(e) == [m2.memory_id]
    assert e.memories[0].pathway == "redirect" and e.memories[0].provenance.redirected_from == lesson1
    f = retrieve(stub, scope, f"{s1} {s2}")
    assert ids(f) == [m2.memory_id] and f.memories[0].pathway == "direct"
    # A fresh Recall behaves the same.
    g = activate(stub, scope, task=claim("recall it"))
    r = stub.Recall(pb.RecallRequest(session_id=g.session_id, scope=scope, query=s1), timeout=30)
    assert ids(r) == [m2.memory_id]


def test_s59_consolidation_runs_in_background_within_seconds(server, stub, scope):
    summary = claim("Rotated the signing keys and every service accepted the new tokens.")
    sid, _ = closed_session(stub, scope, outcome_summary=summary)

    def lesson():
        a = activate(stub, scope, task=summary)
        return [m for m in a.memories if m.content == summary]

    (m,) = wait_until(lesson, timeout=60, interval=0.25, what="the consolidated lesson")
    assert m.provenance.source_kind == "consolidated" and m.provenance.source_session_id == sid


def test_consolidation_waits_for_gaps_between_requests_until_one_does_not_come(make_server):
    """A run takes each session when the process serves no request, until one wait times out (the
    process stays busy); then it takes the rest at once, so that the queue never grows under load."""
    from slowave.service.consolidation import CONSOLIDATION_YIELD_SECONDS, consolidate_pending
    from tests.support import new_scope

    srv = make_server()
    srv.running.consolidator.stop()  # this test runs the queue itself
    scope = new_scope()
    summaries = [claim(f"Rotated signing key {i} and the services accepted it.") for i in range(4)]
    for summary in summaries:
        closed_session(srv.stub, scope, outcome_summary=summary)
    waits: list[float] = []

    def idle(timeout: float) -> bool:  # the drain's wait_idle: a gap, then a process that stays busy
        waits.append(timeout)
        return len(waits) < 2

    assert consolidate_pending(srv.running.ctx, idle=idle) == 4
    assert waits == [CONSOLIDATION_YIELD_SECONDS] * 2
    for summary in summaries:
        a = activate(srv.stub, scope, task=summary)
        assert summary in [m.content for m in a.memories if m.provenance.source_kind == "consolidated"]


def test_s59_equivalent_summary_update_keeps_the_lesson(server, stub, scope):
    s1 = claim("Bumped the helm chart and the rollout completed.")
    sid, _ = closed_session(stub, scope, outcome_summary=s1)
    server.consolidate()
    (lesson,) = ids(retrieve(stub, scope, s1))

    # Equivalent under 6.3 (case, white space): no new memory, nothing retired.
    before = server.snapshot()["counts"]["memories"]
    u = commit(stub, sid, outcome_summary="  " + s1.upper().replace(" ", "   ") + " ")
    assert u.operation == pb.COMMIT_OPERATION_UPDATED
    server.consolidate()
    assert server.snapshot()["counts"]["memories"] == before
    again = retrieve(stub, scope, s1)
    assert ids(again) == [lesson] and again.memories[0].pathway == "direct"


def test_s59_second_update_chains_the_redirect(server, stub, scope):
    s1, s2, s3 = (claim(f"Outcome number {i} of the migration.") for i in range(3))
    sid, _ = closed_session(stub, scope, outcome_summary=s1)
    server.consolidate()
    (l1,) = ids(retrieve(stub, scope, s1))
    commit(stub, sid, outcome_summary=s2)
    server.consolidate()
    (l2,) = ids(retrieve(stub, scope, s2))
    commit(stub, sid, outcome_summary=s3)
    server.consolidate()
    (l3,) = ids(retrieve(stub, scope, s3))
    assert len({l1, l2, l3}) == 3
    for old in (s1, s2):
        r = retrieve(stub, scope, old)
        assert ids(r) == [l3] and r.memories[0].pathway == "redirect"
    assert [n for n, _ in session_links(server, sid)] == [memory_number(l3)]


# ------------------------------------------------------------------------------------ 63


def _seed_context() -> struct_pb2.Struct:
    ctx = struct_pb2.Struct()
    ctx.update({"Python Version": "3.12", "tools": [{"name": "helm"}], "x": None})
    return ctx


def test_s63_procedure_context_normalised_and_blank_evidence_ref_dropped(server, stub, scope):
    goal = claim("Deploy a new service version to the staging environment")
    a = activate(stub, scope, task=claim("deploy the auth service"))
    assess_all(stub, a)
    c = commit(
        stub,
        a.session_id,
        verification=pb.Verification(
            status=res.VERIFICATION_STATUS_VERIFIED, summary="Health check 200.", evidence_refs=[""]
        ),
        procedure=pb.CommitProcedure(
            goal=goal,
            summary=claim("build push and roll out"),
            context=_seed_context(),
            steps=[claim("build the image")],
        ),
    )
    assert c.operation == pb.COMMIT_OPERATION_CLOSED and c.committed
    assert c.procedure_id == f"proc_{a.session_id}"

    b = activate(stub, scope, task=goal)
    assert [p.procedure_id for p in b.procedures] == [c.procedure_id]
    p = b.procedures[0]
    assert json_format.MessageToDict(p.context) == {"python_version": "3.12", "tools": [{"name": "helm"}]}
    assert p.goal == goal

    # The blank evidence ref was dropped, not stored (behaviour §9).
    record = json.loads(server.admin("session", a.session_id, "--json"))
    assert record["verification"]["evidence_refs"] == []


def test_s63_procedure_context_gates_applicability(server, stub, scope):
    goal = claim("Deploy a new service version to the staging environment")
    a = activate(stub, scope, task=claim("deploy the auth service"))
    assess_all(stub, a)
    c = commit(
        stub,
        a.session_id,
        procedure=pb.CommitProcedure(goal=goal, context=_seed_context(), steps=[claim("build the image")]),
    )

    def returned(context: dict) -> bool:
        req = pb.ActivateRequest(task=goal, initial_goal="deploy", scope=scope)
        req.task_context.update(context)
        return c.procedure_id in [p.procedure_id for p in stub.Activate(req, timeout=30).procedures]

    assert returned({"python_version": "3.12"})
    assert returned({"PYTHON_VERSION": " 3.12 ", "unrelated": True})  # keys normalised, strings trimmed
    assert not returned({"python_version": "3.11"})
    assert not returned({"python_version": 3.12})  # type-strict: a number never matches a string


# ------------------------------------------------------------------------------------ 70


def test_s70_consolidation_matches_a_remembered_lesson_and_keeps_it(server, stub, scope):
    s1 = claim("Pinning the chart version avoids the flaky staging rollout.")
    s2 = claim("Raising the readiness timeout fixed the staging rollout.")
    a = activate(stub, scope, task=claim("stabilise the staging rollout"))
    lesson = remember(stub, a.session_id, scope, s1, res.MEMORY_TYPE_LESSON)
    assert lesson.disposition == pb.DISPOSITION_CREATED
    assess_all(stub, a)
    memories_before = server.snapshot()["counts"]["memories"]  # drains earlier tests' queue first
    assert commit(stub, a.session_id, outcome_summary=s1).operation == pb.COMMIT_OPERATION_CLOSED
    server.consolidate()

    # MATCHED: no new memory; the session is linked to the remembered lesson, which is unchanged.
    assert server.snapshot()["counts"]["memories"] == memories_before
    assert session_links(server, a.session_id) == [(memory_number(lesson.memory_id), False)]
    b = activate(stub, scope, task=s1)
    assert ids(b) == [lesson.memory_id]
    assert b.memories[0].provenance.source_kind == "explicit_remember"
    assert b.memories[0].type == res.MEMORY_TYPE_LESSON
    f = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=b.retrieval_id,
            memory_feedback=[pb.MemoryFeedbackEntry(memory_id=lesson.memory_id, assessment=pb.MEMORY_ASSESSMENT_USED)],
        ),
        timeout=30,
    )
    assert list(f.record.applied.strengthened) == [lesson.memory_id]
    commit(stub, b.session_id, outcome_summary=claim("used the lesson"))

    u = commit(stub, a.session_id, outcome_summary=s2)
    assert u.operation == pb.COMMIT_OPERATION_UPDATED
    ledger_before = server.snapshot()["ledger"]
    server.consolidate()

    # The remembered lesson has another source: it stays active and directly retrievable.
    c = retrieve(stub, scope, s1)
    assert ids(c) == [lesson.memory_id] and c.memories[0].pathway == "direct"
    assert c.memories[0].content == s1
    assert c.memories[0].ranking.learned == 0.05  # its learning state is untouched (behaviour §9, 11.6)
    d = retrieve(stub, scope, s2)
    assert len(d.memories) == 1 and d.memories[0].content == s2
    assert d.memories[0].provenance.source_kind == "consolidated"
    assert d.memories[0].provenance.source_session_id == a.session_id
    assert d.memories[0].memory_id != lesson.memory_id
    # Only unlinked: no service-authored retirement row was appended for the remembered lesson.
    new_rows = server.snapshot()["ledger"][len(ledger_before) :]
    assert not any(lesson.memory_id in row for row in new_rows if "stale" in row)
    assert [n for n, _ in session_links(server, a.session_id)] == [memory_number(d.memories[0].memory_id)]


def test_s70_lesson_shared_by_two_sessions_survives_one_update(server, stub, scope):
    s1, s2 = claim("Both sessions ended with the same summary."), claim("One session revised its summary.")
    first, _ = closed_session(stub, scope, outcome_summary=s1)
    second, _ = closed_session(stub, scope, outcome_summary=s1)
    server.consolidate()
    (lesson,) = ids(retrieve(stub, scope, s1))  # the second session was MATCHED to the first's lesson
    assert [n for n, _ in session_links(server, second)] == [memory_number(lesson)]
    commit(stub, first, outcome_summary=s2)
    server.consolidate()
    kept = retrieve(stub, scope, s1)  # another session still stands behind it: not retired
    assert ids(kept) == [lesson] and kept.memories[0].pathway == "direct"
    (new,) = retrieve(stub, scope, s2).memories
    assert new.content == s2 and new.provenance.source_session_id == first


def test_s70_lesson_remembered_after_consolidation_is_not_retired(server, stub, scope):
    s1, s2 = claim("The cache must be warmed before the release."), claim("Warming is no longer needed.")
    sid, _ = closed_session(stub, scope, outcome_summary=s1)
    server.consolidate()
    (lesson,) = ids(retrieve(stub, scope, s1))
    a = activate(stub, scope, task=claim("note the lesson"))
    r = remember(stub, a.session_id, scope, s1, res.MEMORY_TYPE_LESSON)
    assert r.disposition == pb.DISPOSITION_MATCHED and r.memory_id == lesson
    assess_all(stub, a)
    commit(stub, a.session_id, outcome_summary=claim("noted"))
    commit(stub, sid, outcome_summary=s2)
    server.consolidate()
    kept = retrieve(stub, scope, s1)  # it now has a remembered source event: only unlinked
    assert ids(kept) == [lesson] and kept.memories[0].pathway == "direct"
    assert [m.content for m in retrieve(stub, scope, s2).memories] == [s2]
