"""Learning from feedback (behaviour §12): scenarios 51–55 and invariants L1–L7, over gRPC."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from sqlalchemy import update

from slowave.domain.learning import GLOBAL_SHARE as B
from slowave.storage import tables as t
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
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=s.retrieval_id, memory_feedback=[used(memory_id)], coverage=pb.COVERAGE_COMPLETE
        ),
        timeout=30,
    )
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
    m1, m2, m3, m4 = seed_memories(
        stub,
        scope,
        [
            "Alpha service runs on port 7001.",
            "Beta service runs on port 7002.",
            "Gamma service runs on port 7003.",
            "Delta service runs on port 7004.",
        ],
    )
    task = (
        "Alpha service runs on port 7001. Beta service runs on port 7002. "
        "Gamma service runs on port 7003. Delta service runs on port 7004."
    )
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
    stale = pb.MemoryFeedbackEntry(
        memory_id=x,
        assessment=pb.MEMORY_ASSESSMENT_STALE,
        stale_reason=pb.STALE_REASON_OUTDATED,
        reason="TTL is 30 s now",
    )
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
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=s3.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=y,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_WITHDRAWN,
                    reason="gone",
                )
            ],
        )
    )
    assert y not in [m.memory_id for m in activate(stub, scope, task=task).memories]


def test_s54_superseded_memory_redirects_to_its_replacement(stub, scope):
    old_text = "Deployments go through Jenkins."
    (x,) = seed_memories(stub, scope, [old_text])
    s = activate(stub, scope, task=f"How do we deploy? {old_text}")
    assert [m.memory_id for m in s.memories] == [x]
    from tests.support import remember

    y = remember(stub, s.session_id, scope, "Continuous delivery is handled by Argo CD pipelines.").memory_id
    rec = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=s.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=x,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_SUPERSEDED,
                    replacement_memory_id=y,
                    reason="we moved to Argo CD",
                )
            ],
        )
    ).record
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
        pids.append(
            commit(
                stub,
                s.session_id,
                final_goal=goal,
                procedure=procedure,
                verification=pb.Verification(status=res.VERIFICATION_STATUS_UNVERIFIED, summary="n/a"),
            ).procedure_id
        )
    assessed, other = pids
    (memory,) = seed_memories(stub, scope, ["Credentials live in vault."])
    for effect in (res.EFFECT_HELPED, res.EFFECT_HARMED):
        s = activate(stub, scope, task=f"{goal}. Credentials live in vault.")
        assert assessed in [p.procedure_id for p in s.procedures]
        stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=s.retrieval_id,
                coverage=pb.COVERAGE_COMPLETE,
                procedure_feedback=[
                    pb.ProcedureFeedbackEntry(
                        procedure_id=assessed, use=pb.PROCEDURE_USE_USED, effect=effect, contribution="followed it"
                    )
                ],
            )
        )
        commit(stub, s.session_id)
    s = activate(stub, scope, task=f"{goal}. Credentials live in vault.")
    procs = {p.procedure_id: p for p in s.procedures}
    assert procs[assessed].ranking.learned < procs[other].ranking.learned
    assert procs[assessed].ranking.learned == round(0.03 - 0.06, 6)
    assert [p.procedure_id for p in s.procedures].index(other) < [p.procedure_id for p in s.procedures].index(assessed)
    assert next(m for m in s.memories if m.memory_id == memory).ranking.learned == 0.0


# ------------------------------------------------------------------ contextual learning (12.1 revised)

# Scenario 71's cues: they share only the rare word (Jaccard of terms 1/9, below tau), and both
# end with A's content, so both admit it by the floor.
Q1 = "deploy the payments service to staging Zorblat."
Q2 = "rotate the billing database password Zorblat."
Q1_SIMILAR = "deploy the payments service to staging cluster Zorblat."  # Q1's 5 terms plus one
OTHER = "Zorblat capacity planning for the search cluster Zorblat."
IRRELEVANT = pb.MEMORY_ASSESSMENT_IRRELEVANT


def _assess(stub, scope, task, memory_id, entry):
    s = activate(stub, scope, task=task, page_size=10)
    assert memory_id in [m.memory_id for m in s.memories], (task, [m.content for m in s.memories])
    stub.Feedback(
        pb.FeedbackRequest(retrieval_id=s.retrieval_id, memory_feedback=[entry], coverage=pb.COVERAGE_COMPLETE),
        timeout=30,
    )
    commit(stub, s.session_id)


def _learned_for(stub, scope, query, memory_id):
    s = activate(stub, scope, task="look something up")
    r = _recall(stub, s.session_id, scope, query)
    return _ranking(r, memory_id).learned, r


def _irrelevant(memory_id):
    return pb.MemoryFeedbackEntry(memory_id=memory_id, assessment=IRRELEVANT, reason="not what this task needs")


def test_s71_irrelevant_for_one_cue_moves_a_dissimilar_cue_only_by_the_global_term(stub, scope):
    (a,) = seed_memories(stub, scope, ["Zorblat."])
    for _ in range(3):
        _assess(stub, scope, Q1, a, _irrelevant(a))
    assert _learned_for(stub, scope, Q1, a)[0] == -0.15
    assert _learned_for(stub, scope, Q2, a)[0] == round(-B / 6, 6)  # B × (0 − 1) / (0 + 1 + 5)
    # A later `used` under Q2 lowers A's learned for no cue.
    before = {q: _learned_for(stub, scope, q, a)[0] for q in (Q1, Q2, Q1_SIMILAR)}
    _assess(stub, scope, Q2, a, used(a))
    after = {q: _learned_for(stub, scope, q, a)[0] for q in (Q1, Q2, Q1_SIMILAR)}
    assert all(after[q] >= before[q] for q in before), (before, after)
    assert after[Q2] == round(0.05 - B / 6, 6) and after[Q1] == round(-0.15 + B / 6, 6)


def test_s72_used_carries_to_a_similar_cue_by_its_similarity(stub, scope):
    a, b = seed_memories(stub, scope, ["Zorblat.", "Zorblat"])  # equally relevant to every cue here
    for _ in range(2):
        _assess(stub, scope, Q1, a, used(a))
    k = (5 / 6 - 0.2) / (1 - 0.2)  # Jaccard 5/6: Q1_SIMILAR has Q1's five terms and one more
    learned, r = _learned_for(stub, scope, Q1_SIMILAR, a)
    assert learned == round(k * 0.10 + B * 1 / 6, 6)
    assert _ranking(r, b).learned == 0.0 and _ranking(r, a).relevance == _ranking(r, b).relevance
    ids = [m.memory_id for m in r.memories]
    assert ids.index(a) < ids.index(b)
    assert _learned_for(stub, scope, Q2, a)[0] == round(B / 6, 6)  # a dissimilar cue: the global term only


def test_s72_cues_are_compared_by_terms_so_an_irregular_form_is_the_same_cue(stub, scope):
    # `built` and `builds` are one term (domain.terms.IRREGULAR_FORMS), so the two cues' terms are
    # equal: K = 1 and the evidence carries whole. Compared by their stems alone (`built` against
    # `build`) the Jaccard would be 3/5 and K 0.5.
    (a,) = seed_memories(stub, scope, ["Zorblat."])
    _assess(stub, scope, "Who built the release dashboard Zorblat.", a, used(a))
    learned, _ = _learned_for(stub, scope, "Who builds the release dashboard Zorblat.", a)
    assert learned == round(0.05 + B * 1 / 6, 6)


def test_l2b_monotone_for_every_cue_over_a_mixed_sequence(stub, scope):
    """Each accepted row is checked against learned for four cues: a `used` row never lowers it,
    an `irrelevant` or `harmed` row never raises it."""
    (a,) = seed_memories(stub, scope, ["Zorblat."])
    cues = [Q1, Q2, Q1_SIMILAR, "Zorblat capacity planning for the search cluster"]
    harmed = pb.MemoryFeedbackEntry(memory_id=a, assessment=pb.MEMORY_ASSESSMENT_USED, effect=res.EFFECT_HARMED)
    steps = [
        (Q1, used(a), 1),
        (Q2, _irrelevant(a), -1),
        (Q1_SIMILAR, used(a), 1),
        (Q1, harmed, -1),
        (cues[3], used(a), 1),
        (Q2, used(a), 1),
        (Q1_SIMILAR, _irrelevant(a), -1),
    ]
    learned = {q: _learned_for(stub, scope, q, a)[0] for q in cues}
    assert set(learned.values()) == {0.0}
    for task, entry, direction in steps:
        _assess(stub, scope, task, a, entry)
        now = {q: _learned_for(stub, scope, q, a)[0] for q in cues}
        for q in cues:
            assert (now[q] - learned[q]) * direction >= 0, (task, q, learned[q], now[q])
            assert abs(now[q]) <= 0.25
        learned = now


def test_l5_l6_neutral_rows_and_level_fields_change_nothing(stub, scope):
    (a,) = seed_memories(stub, scope, ["Zorblat."])
    for assessment in (
        pb.MEMORY_ASSESSMENT_NOT_USED,
        pb.MEMORY_ASSESSMENT_UNASSESSABLE,
        pb.MEMORY_ASSESSMENT_ALREADY_KNOWN,
    ):
        _assess(stub, scope, Q1, a, pb.MemoryFeedbackEntry(memory_id=a, assessment=assessment, reason="n/a"))
    _assess(
        stub,
        scope,
        Q1,
        a,
        pb.MemoryFeedbackEntry(memory_id=a, assessment=pb.MEMORY_ASSESSMENT_USED, effect=res.EFFECT_NO_EFFECT),
    )
    # partial coverage (silence), a retrieval quality and missing items carry no evidence
    s = activate(stub, scope, task=Q1)
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=s.retrieval_id,
            coverage=pb.COVERAGE_COMPLETE,
            retrieval_quality="poor",
            missing=["the rotation schedule"],
        )
    )
    commit(stub, s.session_id)
    assert {_learned_for(stub, scope, q, a)[0] for q in (Q1, Q2)} == {0.0}


def test_l7_feedback_on_an_ended_session_acts_and_the_same_cue_gives_the_same_catalog(stub, scope):
    a, _ = seed_memories(stub, scope, ["Zorblat.", "Zorblat"])
    s = activate(stub, scope, task=Q1, page_size=10)
    assert a in [m.memory_id for m in s.memories]
    # complete coverage writes implicit not_used rows, which never block a later explicit row (L4)
    stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, coverage=pb.COVERAGE_COMPLETE))
    commit(stub, s.session_id)
    late = stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, memory_feedback=[used(a)])).record
    assert list(late.applied.strengthened) == [a]
    first, second = _learned_for(stub, scope, Q1, a), _learned_for(stub, scope, Q1, a)
    assert first[0] == second[0] == 0.05
    same = lambda r: [(m.memory_id, m.ranking.relevance, m.ranking.learned, m.ranking.score) for m in r.memories]
    assert same(first[1]) == same(second[1])


def test_replay_equals_state_after_a_long_mixed_workload(make_server):
    """Every kind of row, on several cues and memories, including retirement and supersession;
    then the admin command recomputes every sum from the ledger and finds no difference."""
    server = make_server()
    stub, scope = server.stub, "project:replay"
    memories = seed_memories(stub, scope, ["Zorblat.", "Zorblat", "zorblat!", "Zorblat?"])
    cues = [Q1, Q2, Q1_SIMILAR, OTHER, "Zorblat? zorblat! on-call rota"]
    kinds = [
        lambda m: used(m),
        _irrelevant,
        lambda m: pb.MemoryFeedbackEntry(memory_id=m, assessment=pb.MEMORY_ASSESSMENT_USED, effect=res.EFFECT_HARMED),
        lambda m: pb.MemoryFeedbackEntry(memory_id=m, assessment=pb.MEMORY_ASSESSMENT_NOT_USED, reason="n/a"),
    ]
    for i in range(40):
        s = activate(stub, scope, task=cues[i % len(cues)], page_size=10)
        shown = [m.memory_id for m in s.memories]
        entries = [kinds[(i + j) % len(kinds)](m) for j, m in enumerate(shown[: 1 + i % 3])]
        if i == 25 and shown:
            entries.append(
                pb.MemoryFeedbackEntry(
                    memory_id=shown[-1],
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_OUTDATED,
                    reason="changed",
                )
            )
        stub.Feedback(
            pb.FeedbackRequest(retrieval_id=s.retrieval_id, memory_feedback=entries, coverage=pb.COVERAGE_COMPLETE),
            timeout=30,
        )
        # repeats and later rows under the same retrieval count for nothing
        stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, memory_feedback=entries[:1]), timeout=30)
        commit(stub, s.session_id)
    report = json.loads(server.admin("learning-replay", "--json"))
    assert report["differences"] == [] and report["cue_sums"] >= 5, report
    assert memories  # the workload assessed them

    # The check can fail: a tampered sum is reported, and --repair restores the replayed state.
    with server.running.ctx.db.engine.begin() as conn:
        conn.execute(update(t.memory_cue_evidence).values(units=t.memory_cue_evidence.c.units + 1))
    broken = json.loads(run_admin_allowing_failure(server.database_url, "learning-replay", "--json"))
    assert len(broken["differences"]) >= report["cue_sums"], broken
    repaired = json.loads(server.admin("learning-replay", "--repair", "--json"))
    assert repaired["repaired"] and json.loads(server.admin("learning-replay", "--json"))["differences"] == []


def run_admin_allowing_failure(database_url: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "slowave.admin", *args],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "SLOWAVE_DATABASE_URL": database_url},
    )
    assert out.returncode == 1, out  # differences found and not repaired
    return out.stdout


def _as_before_0008(url: str) -> None:
    """Turns a store at head back into what 0007 left (the ledger, sessions and retrievals stay),
    so that migrating it again replays the ledger into per-cue evidence."""
    from sqlalchemy import create_engine, text

    engine = create_engine(url)
    with engine.begin() as c:
        c.execute(text("DROP TABLE occasions"))  # 0012
        c.execute(text("DELETE FROM scope_terms WHERE term IN (' occasions', ' occasion words')"))
        c.execute(text("DROP TABLE erasures"))  # 0011
        c.execute(text("DROP TABLE memory_cue_evidence"))
        c.execute(text("DROP TABLE cues"))
        c.execute(text("ALTER TABLE retrievals DROP COLUMN cue_number"))
        c.execute(text("DROP INDEX IF EXISTS ix_memories_scope_newest"))  # 0018, PostgreSQL only
        # 0017: the containment index sought by the first characters again, without the last
        c.execute(text("DROP INDEX ix_memories_content_tail"))
        c.execute(text("CREATE INDEX ix_memories_content_key ON memories (tenant, scope, content_key)"))
        # own_terms: 0009; occasion: 0012; claim_shape: 0016; content_tail: 0017
        columns = (
            "retired_seq",
            "positive_cues",
            "negative_cues",
            "own_terms",
            "occasion",
            "claim_shape",
            "content_tail",
        )
        for column in columns:
            c.execute(text(f"ALTER TABLE memories DROP COLUMN {column}"))
        c.execute(text("ALTER TABLE memories ADD COLUMN learned_units INTEGER NOT NULL DEFAULT 0"))
        c.execute(text("UPDATE alembic_version SET version_num = '0007'"))
    engine.dispose()


def test_migration_0008_replays_the_existing_ledger_into_per_cue_evidence(tmp_path):
    from tests.support import new_database_url, start_test_server

    url = new_database_url(tmp_path)
    server = start_test_server(tmp_path / "before", database_url=url)
    try:
        stub, scope = server.stub, "project:upgrade"
        a, b, c = seed_memories(stub, scope, ["Zorblat.", "Zorblat", "zorblat?"])
        for _ in range(2):
            s = activate(stub, scope, task=Q1, page_size=10)
            stub.Feedback(
                pb.FeedbackRequest(
                    retrieval_id=s.retrieval_id,
                    coverage=pb.COVERAGE_COMPLETE,
                    memory_feedback=[used(a), _irrelevant(b)],
                )
            )
            commit(stub, s.session_id)
        s = activate(stub, scope, task=Q2, page_size=10)
        stale = pb.MemoryFeedbackEntry(
            memory_id=c, assessment=pb.MEMORY_ASSESSMENT_STALE, stale_reason=pb.STALE_REASON_OUTDATED, reason="gone"
        )
        stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=s.retrieval_id, coverage=pb.COVERAGE_COMPLETE, memory_feedback=[_irrelevant(a), stale]
            )
        )
        r = _recall(
            stub, s.session_id, scope, "Zorblat? on-call rota"
        )  # a recall: its query was never stored before 0008
        stub.Feedback(
            pb.FeedbackRequest(retrieval_id=r.retrieval_id, coverage=pb.COVERAGE_COMPLETE, memory_feedback=[used(a)])
        )
        commit(stub, s.session_id)
        before = {q: (_learned_for(stub, scope, q, a)[0], _learned_for(stub, scope, q, b)[0]) for q in (Q1, OTHER)}
    finally:
        server.stop()

    _as_before_0008(url)
    again = start_test_server(tmp_path / "after", database_url=url)  # migrates to head on start
    try:
        report = json.loads(again.admin("learning-replay", "--json"))
        assert report["differences"] == [] and report["cue_sums"] == 4, report  # (a,Q1) (b,Q1) (a,Q2) (a,unknown)
        after = {
            q: (_learned_for(again.stub, scope, q, a)[0], _learned_for(again.stub, scope, q, b)[0]) for q in (Q1, OTHER)
        }
        # Activation cues come back from their sessions' tasks; the recall's evidence is filed
        # under the unknown cue, which, like the recall's own dissimilar cue, reaches Q1 and OTHER
        # only through the global term.
        assert after == before, (before, after)
        assert after[Q1][0] == 0.1 and after[Q1][1] == -0.1
        assert c not in [m.memory_id for m in activate(again.stub, scope, task=Q1, page_size=10).memories]
    finally:
        again.stop()
