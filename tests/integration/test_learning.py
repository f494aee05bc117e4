"""Learning from feedback (spec 12): scenarios 51–55 and invariants L1–L7, over gRPC."""
from __future__ import annotations

from tests.support import activate, assess_all, commit, pb, res, seed_memories, used

A_TEXT = "Releases are cut from the main branch every Tuesday."
B_TEXT = "Release notes are written in the CHANGELOG file."


def _recall(stub, session_id, scope, query):
    return stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, query=query, page_size=10), timeout=30)


def _ranking(resp, memory_id):
    return next(m.ranking for m in resp.memories if m.memory_id == memory_id)


def _assess_used_in_new_session(stub, scope, task, memory_id):
    s = activate(stub, scope, task=task)
    assert memory_id in [m.memory_id for m in s.memories]
    stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, memory_feedback=[used(memory_id)],
                                     coverage=pb.COVERAGE_COMPLETE), timeout=30)
    commit(stub, s.session_id)


def test_s51_used_under_three_retrievals_rises_above_equally_relevant(stub, scope):
    a_id, b_id = seed_memories(stub, scope, [A_TEXT, B_TEXT])
    query = f"{A_TEXT} {B_TEXT}"
    for _ in range(3):
        _assess_used_in_new_session(stub, scope, query, a_id)
    s = activate(stub, scope, task="check the ranking")
    r = _recall(stub, s.session_id, scope, query)
    a, b = _ranking(r, a_id), _ranking(r, b_id)
    assert a.learned == 0.15 and b.learned == 0.0
    assert a.score == round(a.relevance + 0.15, 6)
    if b.relevance - a.relevance < 0.15:
        ids = [m.memory_id for m in r.memories]
        assert ids.index(a_id) < ids.index(b_id)


def test_s52_first_accepted_wins_and_repeats_change_nothing(stub, scope):
    m1, m2, m3, m4 = seed_memories(stub, scope, [
        "Alpha service runs on port 7001.", "Beta service runs on port 7002.",
        "Gamma service runs on port 7003.", "Delta service runs on port 7004."])
    task = ("Alpha service runs on port 7001. Beta service runs on port 7002. "
            "Gamma service runs on port 7003. Delta service runs on port 7004.")
    s = activate(stub, scope, task=task, page_size=10)
    rid = s.retrieval_id
    fb = lambda entries, **kw: stub.Feedback(pb.FeedbackRequest(retrieval_id=rid, memory_feedback=entries, **kw)).record
    # used, then irrelevant in a later call
    assert list(fb([used(m1)]).applied.strengthened) == [m1]
    later = fb([pb.MemoryFeedbackEntry(memory_id=m1, assessment=pb.MEMORY_ASSESSMENT_IRRELEVANT)])
    assert list(later.applied.unchanged) == [m1]
    # used in three separate calls
    assert list(fb([used(m2)]).applied.strengthened) == [m2]
    assert list(fb([used(m2)]).applied.unchanged) == [m2]
    assert list(fb([used(m2)]).applied.unchanged) == [m2]
    # used three times in one call
    once = fb([used(m3), used(m3), used(m3)])
    assert list(once.applied.strengthened) == [m3] and not once.applied.unchanged
    # complete (implicit not_used on m4), then an explicit used
    implicit = fb([], coverage=pb.COVERAGE_COMPLETE)
    assert m4 in implicit.implicitly_assessed.memory_ids
    assert list(fb([used(m4)]).applied.strengthened) == [m4]
    commit(stub, s.session_id)
    check = activate(stub, scope, task=task, page_size=10)
    for mid in (m1, m2, m3, m4):
        assert _ranking(check, mid).learned == 0.05


def test_s53_stale_retires_for_good_and_freezes_learned(stub, scope):
    x, y = seed_memories(stub, scope, ["The cache TTL is 60 seconds.", "The queue limit is 500 jobs."])
    task = "The cache TTL is 60 seconds. The queue limit is 500 jobs."
    s1 = activate(stub, scope, task=task)
    s2 = activate(stub, scope, task=task)
    stale = pb.MemoryFeedbackEntry(memory_id=x, assessment=pb.MEMORY_ASSESSMENT_STALE,
                                   stale_reason=pb.STALE_REASON_OUTDATED, reason="TTL is 30 s now")
    r = stub.Feedback(pb.FeedbackRequest(retrieval_id=s1.retrieval_id, memory_feedback=[stale])).record
    assert list(r.applied.retired) == [x]
    after = activate(stub, scope, task=task)
    assert x not in [m.memory_id for m in after.memories]
    late = stub.Feedback(pb.FeedbackRequest(retrieval_id=s2.retrieval_id, memory_feedback=[used(x)])).record
    assert late.accepted_event_ids and list(late.applied.unchanged) == [x]
    assert x not in [m.memory_id for m in activate(stub, scope, task=task).memories]
    # used then stale under one retrieval: retired with the learned the used gave it
    s3 = activate(stub, scope, task=task)
    stub.Feedback(pb.FeedbackRequest(retrieval_id=s3.retrieval_id, memory_feedback=[used(y)]))
    stub.Feedback(pb.FeedbackRequest(retrieval_id=s3.retrieval_id, memory_feedback=[pb.MemoryFeedbackEntry(
        memory_id=y, assessment=pb.MEMORY_ASSESSMENT_STALE, stale_reason=pb.STALE_REASON_WITHDRAWN, reason="gone")]))
    assert y not in [m.memory_id for m in activate(stub, scope, task=task).memories]


def test_s54_superseded_memory_redirects_to_its_replacement(stub, scope):
    old_text = "Deployments go through Jenkins."
    x, = seed_memories(stub, scope, [old_text])
    s = activate(stub, scope, task=f"How do we deploy? {old_text}")
    assert [m.memory_id for m in s.memories] == [x]
    from tests.support import remember
    y = remember(stub, s.session_id, scope, "Continuous delivery is handled by Argo CD pipelines.").memory_id
    rec = stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, memory_feedback=[pb.MemoryFeedbackEntry(
        memory_id=x, assessment=pb.MEMORY_ASSESSMENT_STALE, stale_reason=pb.STALE_REASON_SUPERSEDED,
        replacement_memory_id=y, reason="we moved to Argo CD")])).record
    assert list(rec.applied.replacements) == [f"{x}->{y}"]
    commit(stub, s.session_id)
    later = activate(stub, scope, task=f"How do we deploy? {old_text}")
    ids = [m.memory_id for m in later.memories]
    assert x not in ids and ids.count(y) == 1
    redirected = next(m for m in later.memories if m.memory_id == y)
    assert redirected.pathway == "redirect" and redirected.provenance.redirected_from == x


def test_s55_procedure_feedback_orders_procedures_not_memories(stub, scope):
    goal = "Rotate the database credentials"
    procedure = pb.CommitProcedure(summary="Rotate via the vault CLI.", steps=["vault rotate db", "restart pods"])
    pids = []
    for _ in range(2):
        s = activate(stub, scope, task=goal)
        assess_all(stub, s)
        pids.append(commit(stub, s.session_id, final_goal=goal, procedure=procedure,
                           verification=pb.Verification(status=res.VERIFICATION_STATUS_UNVERIFIED, summary="n/a")).procedure_id)
    assessed, other = pids
    memory, = seed_memories(stub, scope, ["Credentials live in vault."])
    for effect in (res.EFFECT_HELPED, res.EFFECT_HARMED):
        s = activate(stub, scope, task=f"{goal}. Credentials live in vault.")
        assert assessed in [p.procedure_id for p in s.procedures]
        stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, coverage=pb.COVERAGE_COMPLETE,
                                         procedure_feedback=[pb.ProcedureFeedbackEntry(
                                             procedure_id=assessed, use=pb.PROCEDURE_USE_USED, effect=effect,
                                             contribution="followed it")]))
        commit(stub, s.session_id)
    s = activate(stub, scope, task=f"{goal}. Credentials live in vault.")
    procs = {p.procedure_id: p for p in s.procedures}
    assert procs[assessed].ranking.learned < procs[other].ranking.learned
    assert procs[assessed].ranking.learned == round(0.03 - 0.06, 6)
    assert [p.procedure_id for p in s.procedures].index(other) < [p.procedure_id for p in s.procedures].index(assessed)
    assert next(m for m in s.memories if m.memory_id == memory).ranking.learned == 0.0
