"""Feedback over gRPC (behaviour §8, 10, 12): section-14 scenarios 26–30, 34, 36–40, 56, 65, 67, 69 and the
batch semantics of 10.4. The per-target rule tables of 10.2 live in test_feedback_rules.py.

Vocabulary note: every cue below avoids the words of the lessons that consolidation derives from
the helper sessions' outcome summaries (`Task <hex> finished.` from `seed_memories`, random tokens
from `quiet_commit`), so that only the memories a test means to expose are admitted.
"""

from __future__ import annotations

import threading
import uuid
from typing import Any

import grpc

from tests.support import (
    Server,
    activate,
    assess_all,
    commit,
    commit_request,
    expect_error,
    pb,
    remember,
    res,
    seed_memories,
    used,
)

# Memory contents with pairwise disjoint vocabularies: a cue containing some of them verbatim
# admits exactly those (admission floor, behaviour §12.1) and no other.
DEPLOY = "Deploy port equals 8080."
PYTHON = "Builds require python twelve."
CACHE = "Cache invalidation runs nightly."
LOGS = "Logs rotate every sunday."
OTHER = "Quokka marmalade xylophone zeppelin."


# ------------------------------------------------------------------------------------------ helpers


def lesson_safe_summary() -> str:
    """An outcome summary made of random tokens only, so its consolidated lesson is never admitted."""
    return f"zq{uuid.uuid4().hex[:10]} zr{uuid.uuid4().hex[:10]}."


def quiet_commit(stub, session_id: str, **kw: Any) -> pb.CommitResponse:
    kw.setdefault("outcome_summary", lesson_safe_summary())
    return commit(stub, session_id, **kw)


def entry(memory_id: str, assessment: int, **kw: Any) -> pb.MemoryFeedbackEntry:
    return pb.MemoryFeedbackEntry(memory_id=memory_id, assessment=assessment, **kw)


def proc_entry(procedure_id: str, use: int, **kw: Any) -> pb.ProcedureFeedbackEntry:
    return pb.ProcedureFeedbackEntry(procedure_id=procedure_id, use=use, **kw)


def feedback(stub, retrieval_id: str, memory=(), procedures=(), **kw: Any) -> pb.FeedbackRecord:
    """A scalar Feedback call; returns its FeedbackRecord."""
    resp = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=retrieval_id, memory_feedback=list(memory), procedure_feedback=list(procedures), **kw
        ),
        timeout=30,
    )
    assert resp.WhichOneof("result") == "record"
    return resp.record


def batch(stub, items: list[pb.FeedbackItem], **kw: Any) -> list[pb.FeedbackItemResult]:
    resp = stub.Feedback(pb.FeedbackRequest(items=items, **kw), timeout=30)
    assert resp.WhichOneof("result") == "batch"
    assert len(resp.batch.results) == len(items)
    return list(resp.batch.results)


def make_procedure(stub, scope: str, goal: str, **kw: Any) -> str:
    """Commits a session with a procedure (behaviour §11.3); returns `proc_<session_id>`."""
    s = activate(stub, scope, task=f"capture zc{uuid.uuid4().hex[:10]}", initial_goal="capture")
    assess_all(stub, s)
    procedure = pb.CommitProcedure(
        goal=goal,
        summary=kw.pop("summary", "Run the documented sequence."),
        steps=kw.pop("steps", ["first step", "second step"]),
    )
    c = quiet_commit(stub, s.session_id, procedure=procedure, **kw)
    assert c.procedure_id == f"proc_{s.session_id}"
    return c.procedure_id


def ids(memories) -> list[str]:
    return [m.memory_id for m in memories]


def learned_of(resp, memory_id: str) -> float:
    return next(m.ranking.learned for m in resp.memories if m.memory_id == memory_id)


def procedure_of(resp, procedure_id: str) -> pb.Procedure:
    return next(p for p in resp.procedures if p.procedure_id == procedure_id)


def ledger(server: Server, retrieval_id: str) -> list:
    with server.running.ctx.db.transaction() as uow:
        return list(uow.ledger.rows(retrieval_id))


def rejected_tuples(record: pb.FeedbackRecord) -> list[tuple[int, str, str, str]]:
    return [(r.target_kind, r.target_id, r.reason, r.field) for r in record.rejected]


def expect_unchanged_error(server: Server, call) -> Any:
    """A whole-call rejection: the error, and proof that the database did not change."""
    before = server.snapshot()
    err = expect_error(call)
    assert server.snapshot() == before, "a rejected request changed the database"
    return err


def exposing(stub, scope: str, contents: list[str], **kw: Any) -> pb.ActivateResponse:
    """An Activate whose task contains each content verbatim; asserts exactly those are exposed."""
    task = "Please review: " + " ".join(contents)
    a = activate(stub, scope, task=task, **kw)
    assert len(a.memories) == len(contents), ids(a.memories)
    return a


# ------------------------------------------------------------------------------------------ scenarios


def test_s26_scalar_used_plus_not_exposed_entry(server, stub, scope):
    a_id, b_id, c_id = seed_memories(stub, scope, [DEPLOY, PYTHON, OTHER])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    assert set(ids(act.memories)) == {a_id, b_id}
    rec = feedback(stub, act.retrieval_id, [used(a_id), used(c_id)])
    assert rec.retrieval_id == act.retrieval_id and rec.session_id == act.session_id
    assert len(rec.accepted_event_ids) == 2
    assert all(e.startswith("fbe_") and len(e) == 36 for e in rec.accepted_event_ids)
    assert len(set(rec.accepted_event_ids)) == 2
    assert rejected_tuples(rec) == [(pb.TARGET_KIND_MEMORY, c_id, "target_not_exposed", "memory_id")]
    assert list(rec.outstanding.memory_ids) == [b_id] and not rec.outstanding.procedure_ids
    assert list(rec.applied.strengthened) == [a_id]
    assert rec.requested_coverage == pb.COVERAGE_PARTIAL and rec.coverage == pb.COVERAGE_PARTIAL
    # The ledger: the `used` row, then the retrieval-level row, both accepted; the rejected row kept.
    rows = {r.event_id: r for r in ledger(server, act.retrieval_id)}
    first, second = (rows[e] for e in rec.accepted_event_ids)
    assert (first.target_kind, first.target_id, first.assessment, first.accepted) == ("memory", a_id, "used", True)
    assert (second.target_kind, second.target_id, second.accepted) == ("retrieval", act.retrieval_id, True)
    bad = [r for r in rows.values() if not r.accepted]
    assert [(r.target_id, r.rejection_reason, r.rejection_field) for r in bad] == [
        (c_id, "target_not_exposed", "memory_id")
    ]
    # The non-exposed memory gained no learning from the rejected row.
    assert learned_of(exposing(stub, scope, [OTHER]), c_id) == 0.0


def test_s26_target_ids_are_trimmed(stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    rec = feedback(stub, act.retrieval_id, [used(f"  {a_id}\t")])
    assert not rec.rejected and list(rec.applied.strengthened) == [a_id]
    assert not rec.outstanding.memory_ids


def test_s27_procedure_id_in_memory_feedback_is_not_exposed(server, stub, scope):
    goal = "Rotate credentials for payments gateway"
    pid = make_procedure(stub, scope, goal)
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = activate(stub, scope, task=f"{goal}. {DEPLOY}")
    assert ids(act.memories) == [a_id] and [p.procedure_id for p in act.procedures] == [pid]
    rec = feedback(stub, act.retrieval_id, [used(pid)])
    assert rejected_tuples(rec) == [(pb.TARGET_KIND_MEMORY, pid, "target_not_exposed", "memory_id")]
    # ...and the other way round: a memory id in procedure_feedback.
    rec2 = feedback(
        stub,
        act.retrieval_id,
        procedures=[proc_entry(a_id, pb.PROCEDURE_USE_USED, effect=res.EFFECT_HELPED, contribution="x")],
    )
    assert rejected_tuples(rec2) == [(pb.TARGET_KIND_PROCEDURE, a_id, "target_not_exposed", "procedure_id")]
    assert list(rec2.outstanding.memory_ids) == [a_id] and list(rec2.outstanding.procedure_ids) == [pid]


def test_s28_items_with_scalar_fields_or_complete_coverage_rejected(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    item = pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)])

    err = expect_unchanged_error(
        server, lambda: stub.Feedback(pb.FeedbackRequest(items=[item], retrieval_id=act.retrieval_id), timeout=30)
    )
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.reason == "INVALID_INPUT"
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert err.paths == ["retrieval_id"]

    err = expect_unchanged_error(
        server, lambda: stub.Feedback(pb.FeedbackRequest(items=[item], coverage=pb.COVERAGE_COMPLETE), timeout=30)
    )
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == ["coverage"]

    results = batch(stub, [item], coverage=pb.COVERAGE_PARTIAL)
    assert results[0].WhichOneof("result") == "data"
    assert list(results[0].data.applied.strengthened) == [a_id]


def test_s29_batch_item_with_unknown_retrieval_fails_alone(server, stub, scope):
    a_id, b_id = seed_memories(stub, scope, [DEPLOY, PYTHON])
    r1 = exposing(stub, scope, [DEPLOY, PYTHON])
    r2 = exposing(stub, scope, [DEPLOY, PYTHON])
    results = batch(
        stub,
        [
            pb.FeedbackItem(retrieval_id=r1.retrieval_id, memory_feedback=[used(a_id)]),
            pb.FeedbackItem(retrieval_id="ctx_000000000000", memory_feedback=[used(a_id)]),
            pb.FeedbackItem(retrieval_id=r2.retrieval_id, memory_feedback=[used(b_id)]),
        ],
    )
    assert [r.WhichOneof("result") for r in results] == ["data", "error", "data"]
    assert results[1].error.code == "not_found" and results[1].error.retryable is False
    assert results[0].data.retrieval_id == r1.retrieval_id and results[2].data.retrieval_id == r2.retrieval_id
    # Items 1 and 3 are recorded: their rows are in the ledger, their targets covered.
    for res_, act in ((results[0], r1), (results[2], r2)):
        stored = {r.event_id for r in ledger(server, act.retrieval_id) if r.accepted}
        assert set(res_.data.accepted_event_ids) <= stored and len(res_.data.accepted_event_ids) == 2
    assert list(results[0].data.outstanding.memory_ids) == [b_id]
    assert list(results[2].data.outstanding.memory_ids) == [a_id]
    assert not ledger(server, "ctx_000000000000")


def test_s30_batch_item_with_blank_memory_id_fails_alone(server, stub, scope):
    a_id, b_id = seed_memories(stub, scope, [DEPLOY, PYTHON])
    r1 = exposing(stub, scope, [DEPLOY, PYTHON])
    r3 = exposing(stub, scope, [DEPLOY, PYTHON])
    results = batch(
        stub,
        [
            pb.FeedbackItem(retrieval_id=r1.retrieval_id, memory_feedback=[used(a_id)]),
            pb.FeedbackItem(retrieval_id=r1.retrieval_id, memory_feedback=[used(b_id)]),
            pb.FeedbackItem(retrieval_id=r3.retrieval_id, memory_feedback=[used("  ")]),
        ],
    )
    assert [r.WhichOneof("result") for r in results] == ["data", "data", "error"]
    err = results[2].error
    assert err.code == "invalid_input" and err.retryable is False
    assert "items[2].memory_feedback[0].memory_id" in err.message
    # Earlier items recorded (the second sees the first), nothing written for the failed one.
    assert list(results[1].data.outstanding.memory_ids) == []
    assert {r.target_id for r in ledger(server, r1.retrieval_id) if r.accepted} >= {a_id, b_id}
    assert ledger(server, r3.retrieval_id) == []


def test_s30_batch_of_101_items_rejected_whole(server, stub, scope):
    act = activate(stub, scope, task="nothing here yet")
    items = [pb.FeedbackItem(retrieval_id=act.retrieval_id) for _ in range(101)]
    err = expect_unchanged_error(server, lambda: stub.Feedback(pb.FeedbackRequest(items=items), timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == ["items"]
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}


def test_s34_undefined_or_unspecified_assessment_reports_only_first_rule(server, stub, scope):
    a_id, b_id, c_id = seed_memories(stub, scope, [DEPLOY, PYTHON, CACHE])
    act = exposing(stub, scope, [DEPLOY, PYTHON, CACHE])
    rec = feedback(
        stub,
        act.retrieval_id,
        [
            # a raw undefined enum number, plus a stale_reason (and more rule breaks)
            entry(
                a_id, 99, stale_reason=pb.STALE_REASON_OUTDATED, effect=res.EFFECT_HELPED, replacement_memory_id="42"
            ),
            # UNSPECIFIED (the zero value), plus a stale_reason
            entry(b_id, pb.MEMORY_ASSESSMENT_UNSPECIFIED, stale_reason=pb.STALE_REASON_CONTRADICTED),
            used(c_id),  # a valid sibling
        ],
    )
    assert rejected_tuples(rec) == [
        (pb.TARGET_KIND_MEMORY, a_id, "invalid_memory_assessment", "assessment"),
        (pb.TARGET_KIND_MEMORY, b_id, "invalid_memory_assessment", "assessment"),
    ]
    assert len(rec.accepted_event_ids) == 2  # the sibling's row, then the retrieval-level row
    assert list(rec.applied.strengthened) == [c_id]
    assert list(rec.outstanding.memory_ids) == [m for m in ids(act.memories) if m != c_id]
    # Rejected rows have no effect: neither memory was retired.
    later = exposing(stub, scope, [DEPLOY, PYTHON, CACHE])
    assert learned_of(later, a_id) == 0.0 and learned_of(later, b_id) == 0.0


def test_s36_partial_feedback_then_the_rest_then_commit(server, stub, scope):
    seed_memories(stub, scope, [DEPLOY, PYTHON, CACHE])
    act = exposing(stub, scope, [DEPLOY, PYTHON, CACHE])
    first, second, third = ids(act.memories)
    rec = feedback(stub, act.retrieval_id, [used(first)], coverage=pb.COVERAGE_PARTIAL)
    assert list(rec.outstanding.memory_ids) == [second, third]
    assert rec.coverage == pb.COVERAGE_PARTIAL and not rec.implicitly_assessed.memory_ids
    err = expect_error(lambda: quiet_commit(stub, act.session_id))
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION and err.reason == "INCOMPLETE_FEEDBACK"
    assert [(o.retrieval_id, list(o.memory_ids)) for o in err.outstanding] == [(act.retrieval_id, [second, third])]
    rec = feedback(
        stub,
        act.retrieval_id,
        [entry(second, pb.MEMORY_ASSESSMENT_NOT_USED), entry(third, pb.MEMORY_ASSESSMENT_IRRELEVANT)],
        coverage=pb.COVERAGE_UNSPECIFIED,
    )  # present but UNSPECIFIED reads as PARTIAL
    assert rec.requested_coverage == pb.COVERAGE_PARTIAL and rec.coverage == pb.COVERAGE_PARTIAL
    assert not rec.outstanding.memory_ids and not rec.rejected
    c = quiet_commit(stub, act.session_id)
    assert c.operation == pb.COMMIT_OPERATION_CLOSED and c.feedback_status == pb.FEEDBACK_STATUS_COMPLETE


def test_s37_complete_mentioning_one_of_three_implicitly_assesses_the_rest(server, stub, scope):
    seed_memories(stub, scope, [DEPLOY, PYTHON, CACHE])
    act = exposing(stub, scope, [DEPLOY, PYTHON, CACHE])
    exposed = ids(act.memories)
    mentioned = exposed[1]
    others = [m for m in exposed if m != mentioned]
    rec = feedback(stub, act.retrieval_id, [used(mentioned)], coverage=pb.COVERAGE_COMPLETE)
    assert list(rec.implicitly_assessed.memory_ids) == others  # exposure order
    assert rec.requested_coverage == pb.COVERAGE_COMPLETE and rec.coverage == pb.COVERAGE_COMPLETE
    assert not rec.outstanding.memory_ids and not rec.outstanding.procedure_ids and not rec.rejected
    assert len(rec.accepted_event_ids) == 4  # explicit, 2 implicit, retrieval-level
    assert list(rec.applied.strengthened) == [mentioned]
    assert not rec.applied.unchanged and not rec.applied.weakened  # implicit rows never appear in applied
    rows = {r.event_id: r for r in ledger(server, act.retrieval_id)}
    implicit = [rows[e] for e in rec.accepted_event_ids[1:3]]
    assert [(r.target_id, r.implicit, r.assessment) for r in implicit] == [(m, True, "not_used") for m in others]
    assert rows[rec.accepted_event_ids[3]].target_kind == "retrieval"
    later = exposing(stub, scope, [DEPLOY, PYTHON, CACHE])
    assert [learned_of(later, m) for m in others] == [0.0, 0.0]
    assert learned_of(later, mentioned) == 0.05
    assert quiet_commit(stub, act.session_id).operation == pb.COMMIT_OPERATION_CLOSED


def test_s38_complete_with_rejected_entry_stays_partial(server, stub, scope):
    seed_memories(stub, scope, [DEPLOY, PYTHON, CACHE])
    act = exposing(stub, scope, [DEPLOY, PYTHON, CACHE])
    exposed = ids(act.memories)
    bad = exposed[0]
    rec = feedback(
        stub,
        act.retrieval_id,
        [entry(bad, pb.MEMORY_ASSESSMENT_STALE, stale_reason=pb.STALE_REASON_OUTDATED)],  # no `reason`
        coverage=pb.COVERAGE_COMPLETE,
    )
    assert rejected_tuples(rec) == [
        (pb.TARGET_KIND_MEMORY, bad, "stale_requires_reason", "reason"),
        (pb.TARGET_KIND_RETRIEVAL, act.retrieval_id, "incomplete_coverage", "coverage"),
    ]
    assert rec.requested_coverage == pb.COVERAGE_COMPLETE and rec.coverage == pb.COVERAGE_PARTIAL
    assert list(rec.outstanding.memory_ids) == [bad]
    assert list(rec.implicitly_assessed.memory_ids) == exposed[1:]
    assert len(rec.accepted_event_ids) == 2  # the two implicit rows; the retrieval-level row was rejected
    assert not rec.applied.retired
    level = [r for r in ledger(server, act.retrieval_id) if r.target_kind == "retrieval"]
    assert [(r.accepted, r.rejection_reason, r.requested_coverage) for r in level] == [
        (False, "incomplete_coverage", "complete")
    ]
    # The memory is not retired, and the gate lists exactly it.
    assert bad in ids(exposing(stub, scope, [DEPLOY, PYTHON, CACHE]).memories)
    err = expect_error(lambda: quiet_commit(stub, act.session_id))
    assert [(o.retrieval_id, list(o.memory_ids)) for o in err.outstanding] == [(act.retrieval_id, [bad])]


def test_s39_two_calls_on_one_retrieval_both_persist(server, stub, scope):
    a_id, b_id = seed_memories(stub, scope, [DEPLOY, PYTHON])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    one = feedback(stub, act.retrieval_id, [used(a_id)])
    two = feedback(
        stub,
        act.retrieval_id,
        [entry(a_id, pb.MEMORY_ASSESSMENT_IRRELEVANT), entry(b_id, pb.MEMORY_ASSESSMENT_NOT_USED)],
    )
    assert len(one.accepted_event_ids) == 2 and len(two.accepted_event_ids) == 3
    assert not set(one.accepted_event_ids) & set(two.accepted_event_ids)
    rows = {r.event_id: r for r in ledger(server, act.retrieval_id)}
    assert all(rows[e].accepted for e in [*one.accepted_event_ids, *two.accepted_event_ids])
    # Nothing retracted: the first call's `used` stays the effective assessment; the later row
    # references it.
    first_used = rows[one.accepted_event_ids[0]]
    later_a = rows[two.accepted_event_ids[0]]
    assert first_used.effective and not later_a.effective
    assert later_a.previous_accepted_seq == first_used.seq
    assert sorted(two.applied.unchanged) == sorted([a_id, b_id]) and not two.applied.weakened
    assert learned_of(exposing(stub, scope, [DEPLOY, PYTHON]), a_id) == 0.05


def test_s40_feedback_on_another_open_sessions_retrieval(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    caller = exposing(stub, scope, [DEPLOY])
    owner = exposing(stub, scope, [DEPLOY])
    rec = feedback(stub, owner.retrieval_id, [used(a_id)])
    assert rec.session_id == owner.session_id and not rec.rejected and not rec.outstanding.memory_ids
    err = expect_error(lambda: quiet_commit(stub, caller.session_id))
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION and err.reason == "INCOMPLETE_FEEDBACK"
    assert [(o.retrieval_id, list(o.memory_ids)) for o in err.outstanding] == [(caller.retrieval_id, [a_id])]
    assert quiet_commit(stub, owner.session_id).operation == pb.COMMIT_OPERATION_CLOSED
    feedback(stub, caller.retrieval_id, [used(a_id)])
    assert quiet_commit(stub, caller.session_id).operation == pb.COMMIT_OPERATION_CLOSED


def test_s56_quality_and_missing_only_record_a_gap(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    gap = "Where the grafana dashboards live"
    rec = feedback(stub, act.retrieval_id, retrieval_quality="  Mostly on target.  ", missing=[f" {gap} ", "  "])
    assert rec.retrieval_quality == "Mostly on target." and list(rec.missing) == [gap]
    assert len(rec.accepted_event_ids) == 1 and not rec.rejected
    assert list(rec.outstanding.memory_ids) == [a_id]
    applied = rec.applied
    assert not (applied.strengthened or applied.weakened or applied.unchanged or applied.retired)
    assert learned_of(exposing(stub, scope, [DEPLOY]), a_id) == 0.0

    listing = server.admin("knowledge-gaps", "--scope", scope)
    assert gap in listing and "occurrences: 1" in listing

    probe = activate(stub, scope, task=gap)
    gap_warnings = [w for w in probe.warnings if w.code == "known_gap"]
    assert len(gap_warnings) == 1 and gap in gap_warnings[0].message
    assert remember(stub, probe.session_id, scope, gap).disposition == pb.DISPOSITION_CREATED
    assert gap not in server.admin("knowledge-gaps", "--scope", scope)
    after = activate(stub, scope, task=gap)
    assert not [w for w in after.warnings if w.code == "known_gap"]


def test_s65_undefined_enum_numbers_over_raw_grpc(server, stub, scope):
    a_id, b_id = seed_memories(stub, scope, [DEPLOY, PYTHON])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    # Outcome 99 → INVALID_ARGUMENT on `outcome`, nothing written.
    err = expect_unchanged_error(server, lambda: stub.Commit(commit_request(act.session_id, outcome=99), timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == ["outcome"]
    # Memory assessment 99 → per-target rejection, sibling accepted.
    rec = feedback(stub, act.retrieval_id, [entry(a_id, 99), used(b_id)])
    assert rejected_tuples(rec) == [(pb.TARGET_KIND_MEMORY, a_id, "invalid_memory_assessment", "assessment")]
    assert list(rec.applied.strengthened) == [b_id]
    # Scalar coverage 7 → INVALID_ARGUMENT on `coverage`, nothing written.
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(
            pb.FeedbackRequest(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)], coverage=7), timeout=30
        ),
    )
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == ["coverage"]
    assert err.reason == "INVALID_INPUT" and err.domain == "slowave.ai"


def test_s65_request_over_8_mib_is_refused_by_grpc(server, stub, scope):
    act = activate(stub, scope, task="nothing here yet")
    huge = "a" * (9 * 1024 * 1024)
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(pb.FeedbackRequest(retrieval_id=act.retrieval_id, retrieval_quality=huge), timeout=60),
    )
    assert err.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert not err.has_error_info


def test_s65_request_under_8_mib_reaches_the_service(server, stub, scope):
    act = activate(stub, scope, task="nothing here yet")
    big = "a" * (7 * 1024 * 1024)  # accepted by gRPC (limit 8 MiB), refused by the 4 KiB text rule
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(pb.FeedbackRequest(retrieval_id=act.retrieval_id, retrieval_quality=big), timeout=60),
    )
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == ["retrieval_quality"]
    assert err.has_error_info


def test_s67_procedure_first_accepted_use_wins(server, stub, scope):
    goal = "Rebuild search index safely"
    pid = make_procedure(stub, scope, goal)
    act = activate(stub, scope, task=goal)
    assert [p.procedure_id for p in act.procedures] == [pid]
    before = act.procedures[0]
    assert before.evidence == res.ProcedureEvidence()  # all counters zero
    one = feedback(
        stub,
        act.retrieval_id,
        procedures=[
            proc_entry(pid, pb.PROCEDURE_USE_USED, effect=res.EFFECT_HELPED, contribution="followed every step")
        ],
    )
    two = feedback(
        stub,
        act.retrieval_id,
        procedures=[proc_entry(pid, pb.PROCEDURE_USE_USED, effect=res.EFFECT_HARMED, contribution="it broke replicas")],
    )
    assert not one.rejected and not two.rejected and len(two.accepted_event_ids) == 2
    assert not two.applied.unchanged  # procedure entries never appear in applied
    later = procedure_of(activate(stub, scope, task=goal), pid)
    ev = later.evidence
    assert (ev.used, ev.helped, ev.harmed, ev.no_effect, ev.unknown, ev.not_used) == (1, 1, 0, 0, 0, 0)
    assert [(c.effect, c.contribution) for c in later.contributions] == [(res.EFFECT_HELPED, "followed every step")]
    assert not later.contributions[0].HasField("outcome")  # the assessing session is still open
    assert round(later.ranking.learned - before.ranking.learned, 6) == 0.03
    quiet_commit(stub, act.session_id)
    committed = procedure_of(activate(stub, scope, task=goal), pid)
    assert committed.contributions[0].outcome == res.OUTCOME_SUCCESS
    assert (committed.evidence.helped, committed.evidence.harmed) == (1, 0)


def test_s69_concurrent_feedback_counts_once(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    for round_ in range(3):
        act = exposing(stub, scope, [DEPLOY])
        assert learned_of(act, a_id) == round(0.05 * round_, 6)
        barrier = threading.Barrier(2)
        records: list[pb.FeedbackRecord] = [None, None]  # type: ignore[list-item]
        errors: list[BaseException] = []

        def send(i: int) -> None:
            try:
                barrier.wait(timeout=30)
                records[i] = feedback(stub, act.retrieval_id, [used(a_id)])
            except BaseException as exc:
                errors.append(exc)

        threads = [threading.Thread(target=send, args=(i,)) for i in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
        assert not errors, errors
        buckets = sorted((list(r.applied.strengthened), list(r.applied.unchanged)) for r in records)
        assert buckets == [([], [a_id]), ([a_id], [])]
        effective = [r for r in ledger(server, act.retrieval_id) if r.target_kind == "memory" and r.effective]
        assert len(effective) == 1
    assert learned_of(exposing(stub, scope, [DEPLOY]), a_id) == 0.15


# ------------------------------------------------------------------------------------------ batch (10.4)


def test_batch_items_processed_in_order_later_items_see_earlier(server, stub, scope):
    a_id, b_id = seed_memories(stub, scope, [DEPLOY, PYTHON])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    results = batch(
        stub,
        [
            pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)]),
            pb.FeedbackItem(
                retrieval_id=act.retrieval_id, memory_feedback=[entry(a_id, pb.MEMORY_ASSESSMENT_IRRELEVANT)]
            ),
            pb.FeedbackItem(retrieval_id=act.retrieval_id, coverage=pb.COVERAGE_COMPLETE),
        ],
    )
    first, second, third = (r.data for r in results)
    assert list(first.applied.strengthened) == [a_id] and list(first.outstanding.memory_ids) == [b_id]
    assert list(second.applied.unchanged) == [a_id]  # like a second scalar call: first accepted wins
    assert list(third.implicitly_assessed.memory_ids) == [b_id] and third.coverage == pb.COVERAGE_COMPLETE
    seqs = [r.seq for r in ledger(server, act.retrieval_id)]
    assert seqs == sorted(seqs)
    by_id = {r.event_id: r.seq for r in ledger(server, act.retrieval_id)}
    order = [by_id[e] for res_ in (first, second, third) for e in res_.accepted_event_ids]
    assert order == sorted(order)
    assert learned_of(exposing(stub, scope, [DEPLOY, PYTHON]), a_id) == 0.05


def test_batch_per_target_rejection_does_not_fail_the_item(stub, scope):
    a_id, b_id, c_id = seed_memories(stub, scope, [DEPLOY, PYTHON, OTHER])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    results = batch(stub, [pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(c_id), used(a_id)])])
    data = results[0].data
    assert results[0].WhichOneof("result") == "data"
    assert rejected_tuples(data) == [(pb.TARGET_KIND_MEMORY, c_id, "target_not_exposed", "memory_id")]
    assert list(data.applied.strengthened) == [a_id] and list(data.outstanding.memory_ids) == [b_id]


def test_batch_whole_call_form_violations_write_nothing(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    item = pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)])
    req = pb.FeedbackRequest(
        items=[item],
        retrieval_id=act.retrieval_id,
        memory_feedback=[used(a_id)],
        procedure_feedback=[proc_entry("proc_x", pb.PROCEDURE_USE_USED)],
        retrieval_quality="",
        missing=["x"],
        coverage=pb.COVERAGE_COMPLETE,
    )
    err = expect_unchanged_error(server, lambda: stub.Feedback(req, timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(err.paths) == sorted(
        ["retrieval_id", "memory_feedback", "procedure_feedback", "retrieval_quality", "missing", "coverage"]
    )
    # Each scalar field alone is also a violation on its own path.
    for extra, path in (
        ({"memory_feedback": [used(a_id)]}, "memory_feedback"),
        ({"missing": ["gap"]}, "missing"),
        ({"retrieval_quality": "ok"}, "retrieval_quality"),
    ):
        err = expect_unchanged_error(
            server, lambda: stub.Feedback(pb.FeedbackRequest(items=[item], **extra), timeout=30)
        )
        assert err.paths == [path]


def test_batch_neither_form_is_invalid(server, stub):
    err = expect_unchanged_error(server, lambda: stub.Feedback(pb.FeedbackRequest(), timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == [""]


def test_s29_scalar_form_unknown_retrieval_is_whole_call_not_found(server, stub):
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(
            pb.FeedbackRequest(retrieval_id="ctx_000000000000", coverage=pb.COVERAGE_COMPLETE), timeout=30
        ),
    )
    assert err.code == grpc.StatusCode.NOT_FOUND and err.reason == "NOT_FOUND" and err.domain == "slowave.ai"
    assert err.metadata == {"code": "not_found", "retryable": "false"}
    assert err.violations == []  # no BadRequest: a lookup failure, not a shape error


def test_batch_item_own_rule_failures_fail_only_that_item(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    results = batch(
        stub,
        [
            pb.FeedbackItem(retrieval_id="   ", memory_feedback=[used(a_id)]),  # blank retrieval id
            pb.FeedbackItem(retrieval_id=act.retrieval_id, coverage=7),  # undefined coverage
            pb.FeedbackItem(retrieval_id=act.retrieval_id, missing=["x" * 4097]),  # over 4 KiB
            pb.FeedbackItem(retrieval_id="sess_abc123"),  # not a retrieval id
            pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)]),
        ],
    )
    assert [r.WhichOneof("result") for r in results] == ["error", "error", "error", "error", "data"]
    for i, path in ((0, "items[0].retrieval_id"), (1, "items[1].coverage"), (2, "items[2].missing[0]")):
        assert results[i].error.code == "invalid_input" and results[i].error.retryable is False
        assert path in results[i].error.message
    assert results[3].error.code == "not_found" and results[3].error.retryable is False
    assert list(results[4].data.applied.strengthened) == [a_id]
    # Only the last item wrote rows.
    assert len(ledger(server, act.retrieval_id)) == 2


def test_batch_of_100_items_is_accepted(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    items = [pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)]) for _ in range(100)]
    results = batch(stub, items)
    assert all(r.WhichOneof("result") == "data" for r in results)
    assert list(results[0].data.applied.strengthened) == [a_id]
    assert all(list(r.data.applied.unchanged) == [a_id] for r in results[1:])
    assert len(ledger(server, act.retrieval_id)) == 200


def test_batch_items_assess_several_retrievals_of_several_sessions(stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    s1 = exposing(stub, scope, [DEPLOY])
    s2 = exposing(stub, scope, [DEPLOY])
    results = batch(
        stub, [pb.FeedbackItem(retrieval_id=s.retrieval_id, coverage=pb.COVERAGE_COMPLETE) for s in (s1, s2)]
    )
    assert [r.data.session_id for r in results] == [s1.session_id, s2.session_id]
    assert all(list(r.data.implicitly_assessed.memory_ids) == [a_id] for r in results)
    for s in (s1, s2):
        assert quiet_commit(stub, s.session_id).operation == pb.COMMIT_OPERATION_CLOSED


def test_batch_feedback_on_ended_session_retrieval_is_accepted(stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    assess_all(stub, act)
    quiet_commit(stub, act.session_id)
    results = batch(stub, [pb.FeedbackItem(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)])])
    assert results[0].data.session_id == act.session_id
    assert list(results[0].data.applied.strengthened) == [a_id]
    assert learned_of(exposing(stub, scope, [DEPLOY]), a_id) == 0.05


# ------------------------------------------------------------------------------------------ more edges


def _session_row(server: Server, session_id: str):
    with server.running.ctx.db.transaction() as uow:
        return uow.sessions.get_any(session_id)


def test_s40_feedback_touches_only_the_owning_open_session(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    caller = exposing(stub, scope, [DEPLOY])
    owner = exposing(stub, scope, [DEPLOY])
    caller_before, owner_before = _session_row(server, caller.session_id), _session_row(server, owner.session_id)
    batch(stub, [pb.FeedbackItem(retrieval_id=owner.retrieval_id, memory_feedback=[used(a_id)])])
    assert _session_row(server, owner.session_id).last_activity_at > owner_before.last_activity_at
    assert _session_row(server, caller.session_id) == caller_before


def test_s40_feedback_on_a_closed_sessions_retrieval_changes_no_session(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    assess_all(stub, act)
    quiet_commit(stub, act.session_id)
    before = _session_row(server, act.session_id)
    rec = feedback(stub, act.retrieval_id, [used(a_id)])
    assert rec.session_id == act.session_id and list(rec.applied.strengthened) == [a_id]
    assert _session_row(server, act.session_id) == before  # state, feedback status and times unchanged


def test_s38_memory_id_in_procedure_feedback_blocks_complete(server, stub, scope):
    seed_memories(stub, scope, [DEPLOY, PYTHON])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    first, second = ids(act.memories)
    # `first` is mentioned (in the wrong list, so rejected): it is in M, not implicitly assessed.
    rec = feedback(
        stub,
        act.retrieval_id,
        procedures=[proc_entry(first, pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_UNKNOWN)],
        coverage=pb.COVERAGE_COMPLETE,
    )
    assert rejected_tuples(rec) == [
        (pb.TARGET_KIND_PROCEDURE, first, "target_not_exposed", "procedure_id"),
        (pb.TARGET_KIND_RETRIEVAL, act.retrieval_id, "incomplete_coverage", "coverage"),
    ]
    assert list(rec.implicitly_assessed.memory_ids) == [second]
    assert list(rec.outstanding.memory_ids) == [first] and rec.coverage == pb.COVERAGE_PARTIAL


def test_s38_rejected_entry_for_an_already_assessed_target_does_not_block(server, stub, scope):
    seed_memories(stub, scope, [DEPLOY, PYTHON])
    act = exposing(stub, scope, [DEPLOY, PYTHON])
    first, second = ids(act.memories)
    feedback(stub, act.retrieval_id, [used(first)])
    rec = feedback(stub, act.retrieval_id, [entry(first, pb.MEMORY_ASSESSMENT_STALE)], coverage=pb.COVERAGE_COMPLETE)
    assert rejected_tuples(rec) == [(pb.TARGET_KIND_MEMORY, first, "stale_requires_valid_stale_reason", "stale_reason")]
    assert rec.coverage == pb.COVERAGE_COMPLETE and not rec.outstanding.memory_ids
    assert list(rec.implicitly_assessed.memory_ids) == [second]
    # A mix for one target: a rejected and an accepted entry in one call cover it.
    seed_memories(stub, scope, [CACHE])
    act2 = exposing(stub, scope, [CACHE])
    (cache_id,) = ids(act2.memories)
    rec2 = feedback(
        stub,
        act2.retrieval_id,
        [entry(cache_id, pb.MEMORY_ASSESSMENT_UNASSESSABLE), used(cache_id)],
        coverage=pb.COVERAGE_COMPLETE,
    )
    assert rec2.coverage == pb.COVERAGE_COMPLETE and [r.reason for r in rec2.rejected] == [
        "unassessable_requires_reason"
    ]


def test_s30_scalar_entry_rule_violations_are_whole_call(server, stub, scope):
    (a_id,) = seed_memories(stub, scope, [DEPLOY])
    act = exposing(stub, scope, [DEPLOY])
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=act.retrieval_id,
                memory_feedback=[used(a_id), used(""), entry(a_id, pb.MEMORY_ASSESSMENT_STALE, reason="r" * 4097)],
                procedure_feedback=[proc_entry(" ", pb.PROCEDURE_USE_USED)],
                missing=["ok", "m" * 4097],
            ),
            timeout=30,
        ),
    )
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    assert sorted(err.paths) == sorted(
        [
            "memory_feedback[1].memory_id",
            "memory_feedback[2].reason",
            "procedure_feedback[0].procedure_id",
            "missing[1]",
        ]
    )
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(
            pb.FeedbackRequest(retrieval_id=act.retrieval_id, memory_feedback=[used(a_id)] * 201), timeout=30
        ),
    )
    assert err.paths == ["memory_feedback"]
    err = expect_unchanged_error(
        server, lambda: stub.Feedback(pb.FeedbackRequest(retrieval_id="  ", memory_feedback=[used(a_id)]), timeout=30)
    )
    assert err.paths == ["retrieval_id"]


def test_batch_item_error_message_names_every_offending_path(server, stub, scope):
    act = activate(stub, scope, task="nothing here yet")
    results = batch(
        stub,
        [
            pb.FeedbackItem(
                retrieval_id=" ", memory_feedback=[used("")], procedure_feedback=[proc_entry("", pb.PROCEDURE_USE_USED)]
            )
        ],
    )
    err = results[0].error
    assert err.code == "invalid_input" and err.retryable is False
    for path in (
        "items[0].retrieval_id",
        "items[0].memory_feedback[0].memory_id",
        "items[0].procedure_feedback[0].procedure_id",
    ):
        assert path in err.message
    assert ledger(server, act.retrieval_id) == []


def test_batch_top_level_undefined_coverage_fails_the_call(server, stub, scope):
    act = activate(stub, scope, task="nothing here yet")
    err = expect_unchanged_error(
        server,
        lambda: stub.Feedback(
            pb.FeedbackRequest(items=[pb.FeedbackItem(retrieval_id=act.retrieval_id)], coverage=5), timeout=30
        ),
    )
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == ["coverage"]


def test_s56_gap_counts_reopening_and_closing_by_a_matched_claim(server, stub, scope):
    act = activate(stub, scope, task="nothing here yet")
    gap, later_gap = "Which region hosts the billing replica", "Who owns the alerting runbook"
    feedback(stub, act.retrieval_id, missing=[gap])
    feedback(stub, act.retrieval_id, missing=["  which REGION hosts   the billing replica "])
    feedback(stub, act.retrieval_id, missing=[later_gap])
    lines = [l for l in server.admin("knowledge-gaps", "--scope", scope).splitlines() if "occurrences:" in l]
    assert len(lines) == 2
    assert later_gap in lines[0] and "occurrences: 1" in lines[0]  # newest first
    assert "occurrences: 2" in lines[1] and "billing replica" in lines[1]  # one group (6.3's normalisation)
    # A fresh Recall whose query contains the gap text verbatim is warned too.
    rec = stub.Recall(pb.RecallRequest(session_id=act.session_id, scope=scope, query=f"Tell me: {gap}?"), timeout=30)
    assert [w.code for w in rec.warnings].count("known_gap") == 1
    # Closed by a Remember (CREATED), reopened by a new `missing` entry, closed by a MATCHED claim.
    assert remember(stub, act.session_id, scope, gap).disposition == pb.DISPOSITION_CREATED
    assert "billing replica" not in server.admin("knowledge-gaps", "--scope", scope)
    feedback(stub, act.retrieval_id, missing=[gap])
    assert "billing replica" in server.admin("knowledge-gaps", "--scope", scope)
    probe = activate(stub, scope, task=gap)
    assert [w.code for w in probe.warnings].count("known_gap") == 1
    assert remember(stub, probe.session_id, scope, gap).disposition == pb.DISPOSITION_MATCHED
    assert "billing replica" not in server.admin("knowledge-gaps", "--scope", scope)
    assert "known_gap" not in [w.code for w in activate(stub, scope, task=gap).warnings]
