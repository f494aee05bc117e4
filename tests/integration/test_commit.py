"""Commit over real gRPC: the gate, validation before the gate, trajectories, procedures,
session_note and concurrent commits (contract sections 2.6, 9, 11; checklist 10, 42-50, 66)."""

from __future__ import annotations

import json
import threading
from typing import Any

import grpc
from google.protobuf import struct_pb2
from sqlalchemy import func, select

from slowave.storage import tables as t
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.support import (
    activate,
    assess_all,
    commit,
    commit_request,
    expect_error,
    new_scope,
    pb,
    remember,
    res,
    seed_memories,
    used,
)

CAUTIONARY_CAVEAT = (
    "Cautionary evidence: this procedure was recorded from a session whose outcome was failure; "
    "verify each step before relying on it."
)

# Three claims with disjoint vocabularies, so that a cue containing one verbatim admits only it
# (admission floor, 12.1). A cue containing all three ranks the longest first (more matched words);
# test 43 seeds them shortest first, so that exposure order differs from id order.
CLAIM_A = (
    "The nightly backup job copies compressed archives into the cold storage bucket called "
    "glacier-east every Sunday morning before dawn"
)
CLAIM_B = "Staging database credentials rotate monthly through Vault"
CLAIM_C = "Metrics listen on port 8443"
NOTHING_CUE = "zebra quokka lemur"  # shares no word with any claim: admits nothing


# ------------------------------------------------------------------------------------------ helpers

_LAST_ACTIVITY = list(t.sessions.c.keys()).index("last_activity_at")
_ID = list(t.sessions.c.keys()).index("id")


def _sessions_without_activity(snapshot: dict[str, Any]) -> list[tuple]:
    rows = sorted(snapshot["sessions"], key=lambda r: r[_ID])
    return [tuple(v for i, v in enumerate(row) if i != _LAST_ACTIVITY) for row in rows]


def assert_unchanged(before: dict[str, Any], after: dict[str, Any]) -> None:
    """An INVALID_ARGUMENT (stage 2) reads and writes nothing: sessions included (4.5)."""
    assert after["counts"] == before["counts"]
    assert after["ledger"] == before["ledger"]
    assert sorted(after["sessions"]) == sorted(before["sessions"])


def assert_only_touched(before: dict[str, Any], after: dict[str, Any]) -> None:
    """A Commit refused by the gate on an OPEN session touches `last_activity_at` (behaviour §2.3, 11.1):
    that touch is its only write. So rows and ledger must be identical, and every session column
    except `last_activity_at` too (state stays OPEN, no completion record, no outcome)."""
    assert after["counts"] == before["counts"]
    assert after["ledger"] == before["ledger"]
    assert _sessions_without_activity(after) == _sessions_without_activity(before)


def assert_incomplete_feedback(err, expected: list[tuple[str, list[str], list[str]]]) -> None:
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.message == "feedback is incomplete"
    assert err.reason == "INCOMPLETE_FEEDBACK"
    assert err.domain == "slowave.ai"
    assert err.metadata == {"code": "incomplete_feedback", "retryable": "true"}
    got = [(o.retrieval_id, list(o.memory_ids), list(o.procedure_ids)) for o in err.outstanding]
    assert got == expected


def assert_invalid(err, *paths: str) -> None:
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT, err
    assert err.reason == "INVALID_INPUT"
    assert err.domain == "slowave.ai"
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    for p in paths:
        assert p in err.paths, (p, err.paths)


def session_record(server, session_id: str) -> dict[str, Any]:
    return json.loads(server.admin("session", session_id, "--json"))


def entry(summary: str, kind: int = pb.TRAJECTORY_KIND_ACTION, **kw: Any) -> pb.TrajectoryEntry:
    return pb.TrajectoryEntry(kind=kind, summary=summary, **kw)


def nested_context(depth: int) -> struct_pb2.Struct:
    """A Struct of `depth` nested objects (the top level is depth 1, behaviour §3.5)."""
    value: dict[str, Any] = {"leaf": "x"}
    for i in range(depth - 1):
        value = {f"level{depth - 1 - i}": value}
    s = struct_pb2.Struct()
    s.update(value)
    return s


def episodes_of(server, session_id: str) -> int:
    with server.running.ctx.db.engine.connect() as conn:
        e = t.episodes
        return conn.execute(select(func.count()).select_from(e).where(e.c.session_id == session_id)).scalar_one()


# ------------------------------------------------------------------------------------------ 10


def test_s10_concurrent_commits_of_one_open_session_one_closes_one_updates(server):
    """Embedded database: two concurrent calls to one process. Several rounds, each from two
    threads on two channels released together by a barrier."""
    channels = [grpc.insecure_channel(server.address) for _ in range(2)]
    stubs = [pb_grpc.MemoryServiceStub(c) for c in channels]
    try:
        for _ in range(5):
            scope = new_scope()
            a = activate(server.stub, scope, task="Rotate the signing keys")
            remember(server.stub, a.session_id, scope, "Signing keys live in the hsm partition")
            remember(server.stub, a.session_id, scope, "Key rotation needs two approvers")
            request = commit_request(a.session_id)
            barrier = threading.Barrier(2)
            results: list[Any] = [None, None]

            def run(i: int) -> None:
                barrier.wait(timeout=60)
                try:
                    results[i] = stubs[i].Commit(request, timeout=60)
                except grpc.RpcError as err:  # reported below, never swallowed
                    results[i] = err

            threads = [threading.Thread(target=run, args=(i,)) for i in range(2)]
            for th in threads:
                th.start()
            for th in threads:
                th.join(timeout=120)
            assert all(isinstance(x, pb.CommitResponse) for x in results), results
            by_op = {x.operation: x for x in results}
            assert sorted(by_op) == [pb.COMMIT_OPERATION_CLOSED, pb.COMMIT_OPERATION_UPDATED]
            closed, updated = by_op[pb.COMMIT_OPERATION_CLOSED], by_op[pb.COMMIT_OPERATION_UPDATED]
            assert closed.committed and updated.committed
            assert not closed.HasField("already_ended")
            assert updated.HasField("already_ended") and updated.already_ended
            assert closed.feedback_status == updated.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
            # Episodes are formed once: by the close (2 remembered claims), never by the update.
            assert closed.episodes_formed == 2
            assert updated.episodes_formed == 0
            assert episodes_of(server, a.session_id) == 2
            assert session_record(server, a.session_id)["state"] == "CLOSED"
    finally:
        for c in channels:
            c.close()


# ------------------------------------------------------------------------------------------ 42


def test_s42_commit_with_one_unassessed_memory_is_refused_then_succeeds(server, stub, scope):
    m_a, m_b = seed_memories(stub, scope, [CLAIM_B, CLAIM_C])
    a = activate(stub, scope, task=f"Check the ops notes. {CLAIM_B}. {CLAIM_C}.")
    assert {m.memory_id for m in a.memories} == {m_a, m_b}
    first, second = [m.memory_id for m in a.memories]
    stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(first)]), timeout=30)

    request = commit_request(a.session_id, final_goal="Check the ops notes")
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(request, timeout=30))
    assert_incomplete_feedback(err, [(a.retrieval_id, [second], [])])
    assert_only_touched(before, server.snapshot())
    assert session_record(server, a.session_id)["state"] == "OPEN"

    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=a.retrieval_id,
            memory_feedback=[pb.MemoryFeedbackEntry(memory_id=second, assessment=pb.MEMORY_ASSESSMENT_NOT_USED)],
        ),
        timeout=30,
    )
    done = stub.Commit(request, timeout=30)  # the identical request
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert done.committed and done.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert session_record(server, a.session_id)["state"] == "CLOSED"


def test_s42_refused_commit_is_retryable_repeatedly_and_writes_nothing(server, stub, scope):
    (m,) = seed_memories(stub, scope, [CLAIM_C])
    a = activate(stub, scope, task=f"Where do metrics go? {CLAIM_C}")
    assert [x.memory_id for x in a.memories] == [m]
    request = commit_request(a.session_id)
    before = server.snapshot()
    for _ in range(2):
        err = expect_error(lambda: stub.Commit(request, timeout=30))
        assert_incomplete_feedback(err, [(a.retrieval_id, [m], [])])
    assert_only_touched(before, server.snapshot())


# ------------------------------------------------------------------------------------------ 43


def test_s43_outstanding_skips_empty_retrievals_and_follows_exposure_and_creation_order(server, stub, scope):
    # ctx: the activation of an empty scope exposes nothing.
    s = activate(stub, scope, task="Audit the infrastructure notes", initial_goal="Audit")
    assert list(s.memories) == [] and list(s.procedures) == []
    m_c, m_b, m_a = seed_memories(stub, scope, [CLAIM_C, CLAIM_B, CLAIM_A])

    # rec2: all three, two on page one, the third on a continuation page (joins rec2 when served).
    rec2 = stub.Recall(
        pb.RecallRequest(session_id=s.session_id, scope=scope, page_size=2, query=f"{CLAIM_A}. {CLAIM_B}. {CLAIM_C}."),
        timeout=30,
    )
    assert len(rec2.memories) == 2 and rec2.more_available
    # rec3: exposes nothing.
    rec3 = stub.Recall(pb.RecallRequest(session_id=s.session_id, scope=scope, query=NOTHING_CUE), timeout=30)
    assert list(rec3.memories) == [] and list(rec3.procedures) == []
    page2 = stub.Recall(
        pb.RecallRequest(session_id=s.session_id, scope=scope, continue_from=rec2.continue_from), timeout=30
    )
    assert page2.retrieval_id == rec2.retrieval_id and len(page2.memories) == 1
    rec2_order = [m.memory_id for m in rec2.memories] + [m.memory_id for m in page2.memories]
    assert sorted(rec2_order) == sorted([m_a, m_b, m_c])
    # rec4..rec6: one memory each.
    singles = []
    for claim, mid in ((CLAIM_C, m_c), (CLAIM_B, m_b), (CLAIM_A, m_a)):
        r = stub.Recall(pb.RecallRequest(session_id=s.session_id, scope=scope, query=f"Recall: {claim}"), timeout=30)
        assert [m.memory_id for m in r.memories] == [mid]
        singles.append((r.retrieval_id, mid))

    # Assess rec2's first exposed memory: the rest stay outstanding in exposure order.
    stub.Feedback(pb.FeedbackRequest(retrieval_id=rec2.retrieval_id, memory_feedback=[used(rec2_order[0])]), timeout=30)
    before = server.snapshot()
    err = expect_error(lambda: commit(stub, s.session_id))
    expected = [(rec2.retrieval_id, rec2_order[1:], [])] + [(rid, [mid], []) for rid, mid in singles]
    assert_incomplete_feedback(err, expected)
    got_ids = {o.retrieval_id for o in err.outstanding}
    assert s.retrieval_id not in got_ids and rec3.retrieval_id not in got_ids
    assert_only_touched(before, server.snapshot())


# ------------------------------------------------------------------------------------------ 44


def test_s44_invalid_procedure_context_is_refused_before_the_gate(server, stub, scope):
    (m,) = seed_memories(stub, scope, [CLAIM_C])
    a = activate(stub, scope, task=f"Expose metrics. {CLAIM_C}")
    assert [x.memory_id for x in a.memories] == [m]  # unassessed exposed target
    too_deep = pb.CommitProcedure(summary="Open the metrics port", context=nested_context(9))

    before = server.snapshot()
    err = expect_error(lambda: commit(stub, a.session_id, procedure=too_deep))
    assert_invalid(err)
    assert err.paths and all(p.startswith("procedure.context") for p in err.paths), err.paths
    assert not err.outstanding
    # Stage 2 writes nothing, not even the activity touch (2.3): sessions included.
    assert_unchanged(before, server.snapshot())

    # Control: depth 8 is valid, so the same request now reaches the gate.
    ok_depth = pb.CommitProcedure(summary="Open the metrics port", context=nested_context(8))
    err = expect_error(lambda: commit(stub, a.session_id, procedure=ok_depth))
    assert_incomplete_feedback(err, [(a.retrieval_id, [m], [])])
    assess_all(stub, a)
    assert commit(stub, a.session_id, procedure=ok_depth).operation == pb.COMMIT_OPERATION_CLOSED


# ------------------------------------------------------------------------------------------ 45


def test_s45_trajectory_limits_and_default_status(server, stub, scope):
    a = activate(stub, scope, task="Repair the flaky integration job")

    before = server.snapshot()
    err = expect_error(lambda: commit(stub, a.session_id, trajectory=[entry(f"Step {i}") for i in range(33)]))
    assert_invalid(err)
    assert err.paths == ["trajectory"]
    assert_unchanged(before, server.snapshot())

    long_summary = [entry("Read the job log"), entry("Bisected the runner image"), entry("x" * 1001)]
    err = expect_error(lambda: commit(stub, a.session_id, trajectory=long_summary))
    assert_invalid(err)
    assert err.paths == ["trajectory[2].summary"]
    assert_unchanged(before, server.snapshot())

    # 32 entries and 1000 characters are within the limits; a missing status is stored as `unknown`.
    steps = [
        entry("Read the job log", status=pb.TRAJECTORY_STATUS_SUCCEEDED),
        entry("The runner image lacked git-lfs", kind=pb.TRAJECTORY_KIND_OBSERVATION),
        entry("y" * 1000),
    ] + [entry(f"Retried run {i}", status=pb.TRAJECTORY_STATUS_FAILED) for i in range(29)]
    assert len(steps) == 32
    done = commit(stub, a.session_id, trajectory=steps)
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert not done.HasField("trajectory_lifecycle_filtered")
    stored = session_record(server, a.session_id)["trajectory"]
    assert len(stored) == 32
    assert [e["summary"] for e in stored] == [s.summary for s in steps]
    assert stored[0]["status"] == "succeeded" and stored[0]["kind"] == "action"
    assert stored[1]["status"] == "unknown" and stored[1]["kind"] == "observation"
    assert stored[2]["status"] == "unknown"
    assert stored[3]["status"] == "failed"
    assert [e["position"] for e in stored] == list(range(32))
    assert all(e["agent_reported"] for e in stored)


def test_s45_trajectory_limit_counts_entries_before_filtering(server, stub, scope):
    a = activate(stub, scope, task="Repair the flaky integration job")
    lifecycle = [entry("Activated the Slowave session"), entry("Committed the session.")]
    before = server.snapshot()
    err = expect_error(
        lambda: commit(stub, a.session_id, trajectory=lifecycle + [entry(f"Step {i}") for i in range(31)])
    )
    assert_invalid(err)
    assert err.paths == ["trajectory"]
    assert_unchanged(before, server.snapshot())


def test_s45_summary_limit_counts_code_points_not_bytes(server, stub, scope):
    a = activate(stub, scope, task="Repair the flaky integration job")
    before = server.snapshot()
    err = expect_error(lambda: commit(stub, a.session_id, trajectory=[entry("é" * 1001)]))
    assert_invalid(err)
    assert err.paths == ["trajectory[0].summary"]
    assert_unchanged(before, server.snapshot())
    done = commit(stub, a.session_id, trajectory=[entry("\U0001f600" * 1000)])  # 4000 bytes, 1000 characters
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert [e["summary"] for e in session_record(server, a.session_id)["trajectory"]] == ["\U0001f600" * 1000]


# ------------------------------------------------------------------------------------------ 46


def test_s46_lifecycle_entries_are_filtered_and_the_real_step_stored(server, stub, scope):
    a = activate(stub, scope, task="Fix the session resolver")
    trajectory = [
        entry("Activated the Slowave session"),
        entry("Called slowave_recall"),
        entry("slowave_commit: done"),
        entry("Committed the session."),
        entry("Fixed the slowave session resolver", status=pb.TRAJECTORY_STATUS_SUCCEEDED),
    ]
    done = commit(stub, a.session_id, trajectory=trajectory)
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert done.HasField("trajectory_lifecycle_filtered") and done.trajectory_lifecycle_filtered == 4
    assert done.episodes_formed == 1  # the one stored entry (11.5)
    stored = session_record(server, a.session_id)["trajectory"]
    assert [(e["summary"], e["kind"], e["status"], e["position"]) for e in stored] == [
        ("Fixed the slowave session resolver", "action", "succeeded", 0)
    ]


# ------------------------------------------------------------------------------------------ 47


def test_s47_nothing_filtered_means_field_absent(server, stub, scope):
    a = activate(stub, scope, task="Tune the connection pool")
    done = commit(
        stub,
        a.session_id,
        trajectory=[
            entry("Raised the pool size to 20"),
            entry("Called slowave_recall to find the deploy port, then edited config.yaml"),  # kept (11.2)
            entry("Latency dropped below 50 ms", kind=pb.TRAJECTORY_KIND_OBSERVATION),
        ],
    )
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert not done.HasField("trajectory_lifecycle_filtered")
    assert len(session_record(server, a.session_id)["trajectory"]) == 3

    b = activate(stub, scope, task="Tune the connection pool again")
    done = commit(stub, b.session_id)  # no trajectory at all
    assert not done.HasField("trajectory_lifecycle_filtered")


# ------------------------------------------------------------------------------------------ 48


def test_s48_session_note_present_only_without_recall(server, stub):
    # Activate + 1 Remember + Commit, no Recall: 3 session events, 0 recalls -> present.
    s1 = new_scope()
    a = activate(stub, s1, task="Document the release checklist")
    remember(stub, a.session_id, s1, "Releases are cut from the main branch")
    done = commit(stub, a.session_id)
    assert done.HasField("session_note") and done.session_note.strip()

    # The same with one fresh Recall -> absent.
    s2 = new_scope()
    b = activate(stub, s2, task="Document the release checklist")
    remember(stub, b.session_id, s2, "Releases are cut from the main branch")
    rec = stub.Recall(pb.RecallRequest(session_id=b.session_id, scope=s2, query=NOTHING_CUE), timeout=30)
    assess_all(stub, rec)
    assert not commit(stub, b.session_id).HasField("session_note")

    # The same with one continuation read instead -> absent.
    s3 = new_scope()
    seed_memories(stub, s3, [CLAIM_B, CLAIM_C])
    c = activate(stub, s3, task=f"Document the ops notes. {CLAIM_B}. {CLAIM_C}.", page_size=1)
    assert c.more_available and c.HasField("continue_from")
    remember(stub, c.session_id, s3, "Releases are cut from the main branch")
    page = stub.Recall(pb.RecallRequest(session_id=c.session_id, scope=s3, continue_from=c.continue_from), timeout=30)
    assert page.retrieval_id == c.retrieval_id
    assess_all(stub, c)
    assert not commit(stub, c.session_id).HasField("session_note")

    # Activate + Commit only -> absent (2 session events).
    s4 = new_scope()
    d = activate(stub, s4, task="Document the release checklist")
    assert not commit(stub, d.session_id).HasField("session_note")


# ------------------------------------------------------------------------------------------ 49


def test_s49_procedure_needs_summary_or_steps_and_defaults_goal(server, stub, scope):
    a = activate(stub, scope, task="Rebuild the search index")
    before = server.snapshot()
    for bad in (
        pb.CommitProcedure(),
        pb.CommitProcedure(goal="Rebuild an index", context=nested_context(2)),
        pb.CommitProcedure(summary="   ", steps=["", "  "], caveats=["Needs downtime"]),
    ):
        err = expect_error(lambda: commit(stub, a.session_id, procedure=bad))
        assert_invalid(err, "procedure")
        assert err.paths == ["procedure"]
        assert_unchanged(before, server.snapshot())

    # Only a summary, goal omitted: accepted, goal = final_goal, id = proc_<session_id>.
    goal_a = "Rebuild the search index after a mapping change"
    done = commit(
        stub,
        a.session_id,
        final_goal=goal_a,
        procedure=pb.CommitProcedure(summary="Drop the alias, reindex, swap the alias back."),
    )
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert done.procedure_id == f"proc_{a.session_id}"

    # Only steps (with a goal of its own): accepted.
    b = activate(stub, scope, task="Rotate the index replicas")
    assess_all(stub, b)  # it may expose the first procedure (lexical overlap)
    goal_b = "Rotate index replicas without downtime"
    done_b = commit(
        stub,
        b.session_id,
        final_goal="Rotated the replicas",
        procedure=pb.CommitProcedure(goal=goal_b, steps=["Add a replica", "Remove the oldest replica"]),
    )
    assert done_b.operation == pb.COMMIT_OPERATION_CLOSED
    assert done_b.procedure_id == f"proc_{b.session_id}"

    later = activate(stub, scope, task=goal_a)
    procs = {p.procedure_id: p for p in later.procedures}
    assert f"proc_{a.session_id}" in procs
    p = procs[f"proc_{a.session_id}"]
    assert p.goal == goal_a
    assert p.summary == "Drop the alias, reindex, swap the alias back."
    assert list(p.steps) == []

    later_b = activate(stub, scope, task=goal_b)
    procs_b = {p.procedure_id: p for p in later_b.procedures}
    assert f"proc_{b.session_id}" in procs_b
    assert procs_b[f"proc_{b.session_id}"].goal == goal_b
    assert list(procs_b[f"proc_{b.session_id}"].steps) == ["Add a replica", "Remove the oldest replica"]
    assert procs_b[f"proc_{b.session_id}"].summary == ""


# ------------------------------------------------------------------------------------------ 50


def test_s50_failed_procedure_is_returned_with_caveat_penalty_and_warning(server, stub, scope):
    shared_task = "Upgrade the message broker cluster"
    goal = "Upgrade the broker cluster one node at a time"
    procedure = pb.CommitProcedure(
        goal=goal,
        summary="Drain a node, upgrade it, rejoin it, repeat.",
        steps=["Drain the node", "Upgrade the package", "Rejoin the cluster"],
        caveats=["Keep a quorum at all times"],
    )
    # Both sessions are opened before either commits, so neither activation sees the other's procedure.
    bad = activate(stub, scope, task=shared_task)
    good = activate(stub, scope, task=shared_task)
    commit(
        stub,
        bad.session_id,
        final_goal=goal,
        outcome=res.OUTCOME_FAILURE,
        procedure=procedure,
        outcome_summary="The broker upgrade lost quorum and was rolled back.",
        verification=pb.Verification(
            status=res.VERIFICATION_STATUS_VERIFIED, summary="Cluster status showed no quorum."
        ),
    )
    commit(
        stub,
        good.session_id,
        final_goal=goal,
        outcome=res.OUTCOME_SUCCESS,
        procedure=procedure,
        outcome_summary="The broker cluster runs the new version on every node.",
        verification=pb.Verification(
            status=res.VERIFICATION_STATUS_VERIFIED, summary="All nodes report the new version."
        ),
    )
    bad_id, good_id = f"proc_{bad.session_id}", f"proc_{good.session_id}"

    later = activate(stub, scope, task=goal)
    order = [p.procedure_id for p in later.procedures]
    assert bad_id in order and good_id in order
    assert order.index(good_id) < order.index(bad_id)
    procs = {p.procedure_id: p for p in later.procedures}
    assert list(procs[bad_id].caveats) == ["Keep a quorum at all times", CAUTIONARY_CAVEAT]
    assert list(procs[good_id].caveats) == ["Keep a quorum at all times"]
    assert procs[bad_id].outcome == res.OUTCOME_FAILURE and procs[good_id].outcome == res.OUTCOME_SUCCESS
    # Outcome terms (12.4): +0.015 for success + verified, -0.03 for failure; no feedback yet.
    assert procs[good_id].ranking.learned == 0.015
    assert procs[bad_id].ranking.learned == -0.03
    assert procs[bad_id].ranking.score < procs[good_id].ranking.score
    failed = [w for w in later.warnings if w.code == "failed_procedure"]
    assert any(bad_id in w.message for w in failed), list(later.warnings)
    assert not any(good_id in w.message for w in failed)


# ------------------------------------------------------------------------------------------ 66


def test_s66_tool_call_narration_with_ids_is_filtered_but_longer_step_kept(server, stub, scope):
    a = activate(stub, scope, task="Get CI green")
    done = commit(
        stub,
        a.session_id,
        trajectory=[
            entry("Called slowave_feedback on ctx_a1b2c3d4e5f6"),
            entry("Ran slowave_commit with outcome success"),
            entry("Ran slowave_commit with outcome success after fixing CI", status=pb.TRAJECTORY_STATUS_SUCCEEDED),
        ],
    )
    assert done.HasField("trajectory_lifecycle_filtered") and done.trajectory_lifecycle_filtered == 2
    assert done.episodes_formed == 1
    stored = session_record(server, a.session_id)["trajectory"]
    assert [e["summary"] for e in stored] == ["Ran slowave_commit with outcome success after fixing CI"]


def test_s66_lifecycle_detector_edge_cases(server, stub, scope):
    a = activate(stub, scope, task="Get CI green")
    dropped = [
        "  CALLED   the slowave_feedback tool on ctx_a1b2c3d4e5f6, and sch_42 !",
        "Invoked slowave_remember for sch_1 and sch_2",
        "slowave_feedback: assessed 3 memories",
        "  The Slowave session was committed.  ",
    ]
    kept = [
        "Called slowave_recall to find the deploy port, then edited config.yaml",
        "Ran slowave_commit with outcome unknown",
        "Committed the session changes to git",
    ]
    done = commit(stub, a.session_id, trajectory=[entry(s) for s in dropped + kept])
    assert done.trajectory_lifecycle_filtered == len(dropped)
    stored = session_record(server, a.session_id)["trajectory"]
    assert [e["summary"] for e in stored] == kept


# ------------------------------------------------------------------------------------------ extra edge cases


def test_s43_outstanding_lists_procedures_in_exposure_order(server, stub, scope):
    goals = ["Restart the ingest workers safely", "Purge the CDN cache for one path"]
    for goal in goals:
        s = activate(stub, scope, task=goal)
        assess_all(stub, s)
        commit(stub, s.session_id, final_goal=goal, procedure=pb.CommitProcedure(summary=f"Method: {goal}"))
    (m,) = seed_memories(stub, scope, [CLAIM_C])
    a = activate(stub, scope, task=f"{goals[0]}. {goals[1]}. {CLAIM_C}.")
    procs = [p.procedure_id for p in a.procedures]
    assert len(procs) >= 2
    mems = [x.memory_id for x in a.memories]
    assert m in mems
    err = expect_error(lambda: commit(stub, a.session_id))
    assert_incomplete_feedback(err, [(a.retrieval_id, mems, procs)])
    # Assessing the first procedure leaves the rest, still in exposure order.
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=a.retrieval_id,
            procedure_feedback=[
                pb.ProcedureFeedbackEntry(
                    procedure_id=procs[0], use=pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_UNKNOWN
                )
            ],
        ),
        timeout=30,
    )
    err = expect_error(lambda: commit(stub, a.session_id))
    assert_incomplete_feedback(err, [(a.retrieval_id, mems, procs[1:])])


def test_s44_any_shape_error_precedes_the_gate(server, stub, scope):
    (m,) = seed_memories(stub, scope, [CLAIM_C])
    a = activate(stub, scope, task=f"Expose metrics. {CLAIM_C}")
    assert [x.memory_id for x in a.memories] == [m]
    before = server.snapshot()
    err = expect_error(
        lambda: commit(stub, a.session_id, final_goal="  ", trajectory=[entry(f"Step {i}") for i in range(33)])
    )
    assert_invalid(err, "final_goal", "trajectory")
    assert not err.outstanding
    assert_unchanged(before, server.snapshot())


def test_s48_refused_recalls_count_as_recall_calls(server, stub):
    """Every Recall that resolved the open session counts, whatever its outcome (11.4, 2.3):
    a SCOPE_MISMATCH refusal, and a CURSOR_NOT_FOUND refusal."""
    for kind in ("scope", "cursor"):
        sc = new_scope()
        a = activate(stub, sc, task="Document the release checklist")
        remember(stub, a.session_id, sc, "Releases are cut from the main branch")
        if kind == "scope":
            req = pb.RecallRequest(session_id=a.session_id, scope=sc.upper(), query=NOTHING_CUE)
        else:
            req = pb.RecallRequest(session_id=a.session_id, scope=sc, continue_from="cur_" + "A" * 32)
        err = expect_error(lambda: stub.Recall(req, timeout=30))
        assert err.reason == ("SCOPE_MISMATCH" if kind == "scope" else "CURSOR_NOT_FOUND")
        assert not commit(stub, a.session_id).HasField("session_note"), kind


def test_s49_blank_procedure_goal_defaults_to_final_goal(server, stub, scope):
    a = activate(stub, scope, task="Compact the event log")
    final_goal = "Compact the event log without losing offsets"
    done = commit(
        stub,
        a.session_id,
        final_goal=final_goal,
        procedure=pb.CommitProcedure(goal="   ", steps=["  Snapshot offsets  ", " ", "Run compaction"]),
    )
    assert done.procedure_id == f"proc_{a.session_id}"
    later = activate(stub, scope, task=final_goal)
    procs = {p.procedure_id: p for p in later.procedures}
    assert procs[done.procedure_id].goal == final_goal
    assert list(procs[done.procedure_id].steps) == ["Snapshot offsets", "Run compaction"]
