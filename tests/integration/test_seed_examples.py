"""The seed's own JSON examples (behaviour §4.7), translated faithfully to protobuf and sent over real
gRPC: same strings, same steps, same context; placeholder ids (`ctx_a1b2c3d4e5f6`, `sch_42`,
`sch_17`, `sess_abc123`) replaced by real ids. Checklist 57 and 58 (gRPC half)."""

from __future__ import annotations

import json
import re
from typing import Any

import grpc
from google.protobuf import json_format, struct_pb2

from slowave.storage import tables as t
from tests.support import activate, assess_all, expect_error, pb, remember, res, seed_memories, used

FBE = re.compile(r"^fbe_[0-9a-f]{32}$")

# Claims the retrievals below expose (any standalone claims will do; the seeds give no memory text).
CLAIM_42 = "The session reaper closes idle sessions under a row lock"
CLAIM_17 = "Staging login uses the shared qa account"
CLAIM_EXTRA = "Grafana dashboards refresh every thirty seconds"

_LAST_ACTIVITY = list(t.sessions.c.keys()).index("last_activity_at")
_ID = list(t.sessions.c.keys()).index("id")


def _sessions_without_activity(snapshot: dict[str, Any]) -> list[tuple]:
    rows = sorted(snapshot["sessions"], key=lambda r: r[_ID])
    return [tuple(v for i, v in enumerate(row) if i != _LAST_ACTIVITY) for row in rows]


def assert_only_touched(before: dict[str, Any], after: dict[str, Any]) -> None:
    """A Commit refused by the gate on an OPEN session touches `last_activity_at` (behaviour §2.3, 11.1);
    that touch is its only write: rows, ledger and every other session column are unchanged."""
    assert after["counts"] == before["counts"]
    assert after["ledger"] == before["ledger"]
    assert _sessions_without_activity(after) == _sessions_without_activity(before)


def assert_seed_incomplete_feedback(err, outstanding: list[tuple[str, list[str], list[str]]]) -> None:
    """The seed's error verbatim: code incomplete_feedback, message "feedback is incomplete",
    retryable true, outstanding [{retrieval_id, memory_ids, procedure_ids}] (4.2, 4.7, 11.1)."""
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION
    assert err.message == "feedback is incomplete"
    assert err.has_error_info and err.reason == "INCOMPLETE_FEEDBACK" and err.domain == "slowave.ai"
    assert err.metadata == {"code": "incomplete_feedback", "retryable": "true"}
    assert not err.violations
    got = [(o.retrieval_id, list(o.memory_ids), list(o.procedure_ids)) for o in err.outstanding]
    assert got == outstanding


def session_record(server, session_id: str) -> dict[str, Any]:
    return json.loads(server.admin("session", session_id, "--json"))


def struct(value: dict[str, Any]) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


# ------------------------------------------------------------------------------------------ 57


def seed_feedback_example(retrieval_id: str, sch_42: str, sch_17: str) -> pb.FeedbackRequest:
    """Feedback "Used memory, irrelevant memory":
    {"retrieval_id": "ctx_a1b2c3d4e5f6",
     "memory_feedback": [{"memory_id": "sch_42", "assessment": "used"},
                         {"memory_id": "sch_17", "assessment": "irrelevant"}],
     "coverage": "complete"}"""
    return pb.FeedbackRequest(
        retrieval_id=retrieval_id,
        memory_feedback=[
            pb.MemoryFeedbackEntry(memory_id=sch_42, assessment=pb.MEMORY_ASSESSMENT_USED),
            pb.MemoryFeedbackEntry(memory_id=sch_17, assessment=pb.MEMORY_ASSESSMENT_IRRELEVANT),
        ],
        coverage=pb.COVERAGE_COMPLETE,
    )


def test_s57_seed_feedback_used_memory_irrelevant_memory(server, stub, scope):
    sch_42, sch_17 = seed_memories(stub, scope, [CLAIM_42, CLAIM_17])
    # Precondition (4.7): a retrieval that exposed both (fresh memories, learned 0), neither assessed.
    a = activate(stub, scope, task=f"Check the reaper notes: {CLAIM_42}. Also: {CLAIM_17}.")
    assert sorted(m.memory_id for m in a.memories) == sorted([sch_42, sch_17])
    assert list(a.procedures) == []
    assert all(m.ranking.learned == 0 for m in a.memories)

    before = server.snapshot()
    record = stub.Feedback(seed_feedback_example(a.retrieval_id, sch_42, sch_17), timeout=30).record
    after = server.snapshot()

    assert record.retrieval_id == a.retrieval_id
    assert record.session_id == a.session_id
    assert record.requested_coverage == pb.COVERAGE_COMPLETE
    assert record.coverage == pb.COVERAGE_COMPLETE
    # Two target rows and the retrieval-level row; no other target was exposed, so no implicit row.
    assert len(record.accepted_event_ids) == 3
    assert len(set(record.accepted_event_ids)) == 3
    assert all(FBE.match(i) for i in record.accepted_event_ids)
    assert list(record.rejected) == []
    assert list(record.implicitly_assessed.memory_ids) == [] and list(record.implicitly_assessed.procedure_ids) == []
    assert list(record.outstanding.memory_ids) == [] and list(record.outstanding.procedure_ids) == []
    assert list(record.applied.strengthened) == [sch_42]
    assert list(record.applied.weakened) == [sch_17]
    assert list(record.applied.unchanged) == [] and list(record.applied.retired) == []
    assert list(record.applied.replacements) == []
    assert len(after["ledger"]) == len(before["ledger"]) + 3

    # The learning it stands for (12.1): +0.05 for sch_42, -0.05 for sch_17 on the next retrieval.
    b = activate(stub, scope, task=f"Check the reaper notes: {CLAIM_42}. Also: {CLAIM_17}.")
    learned = {m.memory_id: m.ranking.learned for m in b.memories}
    assert learned[sch_42] == 0.05 and learned[sch_17] == -0.05
    assess_all(stub, b)


def test_s57_seed_feedback_with_a_third_exposed_memory_implicitly_assessed(server, stub, scope):
    sch_42, sch_17, extra = seed_memories(stub, scope, [CLAIM_42, CLAIM_17, CLAIM_EXTRA])
    a = activate(stub, scope, task=f"Check the notes: {CLAIM_42}. {CLAIM_17}. {CLAIM_EXTRA}.")
    assert sorted(m.memory_id for m in a.memories) == sorted([sch_42, sch_17, extra])

    record = stub.Feedback(seed_feedback_example(a.retrieval_id, sch_42, sch_17), timeout=30).record
    assert record.coverage == record.requested_coverage == pb.COVERAGE_COMPLETE
    assert list(record.implicitly_assessed.memory_ids) == [extra]
    assert (
        len(set(record.accepted_event_ids)) == len(record.accepted_event_ids) == 4
    )  # 2 explicit, 1 implicit, 1 retrieval
    assert list(record.rejected) == []
    assert list(record.outstanding.memory_ids) == []
    assert list(record.applied.strengthened) == [sch_42]
    assert list(record.applied.weakened) == [sch_17]
    assert list(record.applied.unchanged) == []  # implicit rows never appear in applied (8.4)


# ------------------------------------------------------------------------------------------ 58

SUCCESSFUL = dict(
    final_goal="Fix the double-close race in the session reaper",
    outcome=res.OUTCOME_SUCCESS,
    outcome_summary=(
        "Added a threading lock around the reaper's close logic; the race no longer reproduces "
        "under 100-thread stress testing."
    ),
    verification=pb.Verification(
        status=res.VERIFICATION_STATUS_VERIFIED,
        summary=(
            "Full integration test suite passed. Ran the stress test 3 times with 100 concurrent threads "
            "— zero double-close errors."
        ),
    ),
)

PROCEDURE_STEPS = [
    "Run `docker build -t registry.example.com/auth-service:<version> .` from the repo root.",
    "Push with `docker push registry.example.com/auth-service:<version>`.",
    "Update `helm/auth-service/values-staging.yaml` with the new image tag.",
    "Trigger the `deploy-staging` GitHub Actions workflow.",
    "Verify the rollout with `kubectl rollout status deployment/auth-service -n staging`.",
]
PROCEDURE_CAVEATS = [
    "The staging namespace requires manual approval in GitHub Actions for image tags that are not semver.",
    "Health check takes up to 90 seconds after pod restart; do not declare failure earlier.",
]
PROCEDURE_CONTEXT = {"environment": "staging", "infra": "Kubernetes", "ci": "GitHub Actions"}
WITH_PROCEDURE = dict(
    final_goal="Deploy the new auth service to staging",
    outcome=res.OUTCOME_SUCCESS,
    outcome_summary="Auth service v2.3.1 deployed to staging and health checks passing.",
    verification=pb.Verification(
        status=res.VERIFICATION_STATUS_VERIFIED,
        summary="Checked /health endpoint returned 200. Smoke-tested login flow with a test account.",
    ),
    procedure=pb.CommitProcedure(
        goal="Deploy a new service version to the staging environment",
        summary=(
            "Build the Docker image, push to the registry, update the Helm chart version, and run the "
            "staging deploy workflow."
        ),
        context=struct(PROCEDURE_CONTEXT),
        steps=PROCEDURE_STEPS,
        caveats=PROCEDURE_CAVEATS,
    ),
)

A, O, OK = pb.TRAJECTORY_KIND_ACTION, pb.TRAJECTORY_KIND_OBSERVATION, pb.TRAJECTORY_STATUS_SUCCEEDED
TRAJECTORY = [
    (A, "Reviewed the nightly build log for the past 7 days."),
    (O, "Failures started on 2026-08-20, correlating with a config change PR."),
    (A, "Diffed the config change PR against the prior working config."),
    (O, "Found that SERVICE_TOKEN was removed from the CI environment variable list."),
    (A, "Opened PR #1042 to restore SERVICE_TOKEN in the CI config."),
]
WITH_TRAJECTORY = dict(
    final_goal="Identify why the nightly build is failing",
    outcome=res.OUTCOME_PARTIAL,
    outcome_summary=(
        "Traced the failure to a missing environment variable in the CI config; fix is proposed but not yet merged."
    ),
    verification=pb.Verification(
        status=res.VERIFICATION_STATUS_PARTIALLY_VERIFIED,
        summary="Reproduced the failure locally by unsetting the variable. PR opened but not yet merged or CI-verified.",
    ),
    trajectory=[pb.TrajectoryEntry(kind=k, summary=s, status=OK) for k, s in TRAJECTORY],
)


def assert_closed(done: pb.CommitResponse, session_id: str, outcome: int, verification_status: int) -> None:
    assert done.session_id == session_id
    assert done.committed is True
    assert done.operation == pb.COMMIT_OPERATION_CLOSED
    assert done.outcome == outcome
    assert done.verification_status == verification_status
    assert done.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert not done.HasField("trajectory_lifecycle_filtered")
    assert not done.HasField("already_ended") and not done.HasField("trajectory_ignored")


def test_s58_seed_commit_examples_refused_then_accepted(server, stub, scope):
    """Each of the three seed commit examples: refused by the gate with the seed's error while an
    exposed target is unassessed, then, after feedback, the identical request is accepted."""
    (memory,) = seed_memories(stub, scope, [CLAIM_42])

    # --- "Successful task with verification": two remembered claims (the second MATCHED), no Recall.
    s1 = activate(stub, scope, task=f"Fix the double-close race in the session reaper. Note: {CLAIM_42}")
    assert [m.memory_id for m in s1.memories] == [memory]
    first = remember(stub, s1.session_id, scope, "The reaper and Commit both lock the session row")
    again = remember(stub, s1.session_id, scope, "The reaper and Commit both lock the session row")
    assert again.disposition == pb.DISPOSITION_MATCHED and again.memory_id == first.memory_id
    request = pb.CommitRequest(session_id=s1.session_id, **SUCCESSFUL)
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(request, timeout=30))
    assert_seed_incomplete_feedback(err, [(s1.retrieval_id, [memory], [])])
    assert_only_touched(before, server.snapshot())
    stub.Feedback(pb.FeedbackRequest(retrieval_id=s1.retrieval_id, memory_feedback=[used(memory)]), timeout=30)
    done = stub.Commit(request, timeout=30)
    assert_closed(done, s1.session_id, res.OUTCOME_SUCCESS, res.VERIFICATION_STATUS_VERIFIED)
    assert done.episodes_formed == 2  # remembered claims, MATCHED included
    assert done.HasField("session_note")  # activation + 2 claims + completion, no Recall (11.4)
    assert not done.HasField("procedure_id")

    # --- "With procedure": no Remember, no Recall.
    s2 = activate(stub, scope, task=f"Deploy the new auth service to staging. Note: {CLAIM_42}")
    exposed = [m.memory_id for m in s2.memories]
    assert memory in exposed
    request = pb.CommitRequest(session_id=s2.session_id, **WITH_PROCEDURE)
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(request, timeout=30))
    assert_seed_incomplete_feedback(err, [(s2.retrieval_id, exposed, [p.procedure_id for p in s2.procedures])])
    assert_only_touched(before, server.snapshot())
    assess_all(stub, s2)
    done = stub.Commit(request, timeout=30)
    assert_closed(done, s2.session_id, res.OUTCOME_SUCCESS, res.VERIFICATION_STATUS_VERIFIED)
    assert done.procedure_id == f"proc_{s2.session_id}"
    assert done.episodes_formed == 0
    assert not done.HasField("session_note")  # activation + completion: 2 session events
    later = activate(
        stub,
        scope,
        task="Deploy a new service version to the staging environment",
        task_context=struct({"environment": "staging"}),
    )
    procs = {p.procedure_id: p for p in later.procedures}
    assert done.procedure_id in procs
    p = procs[done.procedure_id]
    assert p.goal == "Deploy a new service version to the staging environment"
    assert p.summary == WITH_PROCEDURE["procedure"].summary
    assert json_format.MessageToDict(p.context) == PROCEDURE_CONTEXT
    assert list(p.steps) == PROCEDURE_STEPS
    assert list(p.caveats) == PROCEDURE_CAVEATS
    assert p.outcome == res.OUTCOME_SUCCESS
    assert p.outcome_summary == WITH_PROCEDURE["outcome_summary"]
    assert p.verification_status == res.VERIFICATION_STATUS_VERIFIED
    assess_all(stub, later)

    # --- "With trajectory": one remembered claim and one fresh Recall (exposing the memory again).
    s3 = activate(stub, scope, task=f"Identify why the nightly build is failing. Note: {CLAIM_42}")
    ctx_exposed = [m.memory_id for m in s3.memories]
    assert memory in ctx_exposed
    remember(stub, s3.session_id, scope, "The nightly build needs SERVICE_TOKEN in the CI environment")
    rec = stub.Recall(pb.RecallRequest(session_id=s3.session_id, scope=scope, query=f"Recall: {CLAIM_42}"), timeout=30)
    rec_exposed = [m.memory_id for m in rec.memories]
    assert memory in rec_exposed
    request = pb.CommitRequest(session_id=s3.session_id, **WITH_TRAJECTORY)
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(request, timeout=30))
    assert_seed_incomplete_feedback(
        err,
        [
            (s3.retrieval_id, ctx_exposed, [p.procedure_id for p in s3.procedures]),
            (rec.retrieval_id, rec_exposed, [p.procedure_id for p in rec.procedures]),
        ],
    )
    assert_only_touched(before, server.snapshot())
    assess_all(stub, s3)
    err = expect_error(lambda: stub.Commit(request, timeout=30))  # the recall still blocks
    assert_seed_incomplete_feedback(err, [(rec.retrieval_id, rec_exposed, [p.procedure_id for p in rec.procedures])])
    assess_all(stub, rec)
    done = stub.Commit(request, timeout=30)
    assert_closed(done, s3.session_id, res.OUTCOME_PARTIAL, res.VERIFICATION_STATUS_PARTIALLY_VERIFIED)
    assert done.episodes_formed == 5 + 1  # five stored entries + one remembered claim
    assert not done.HasField("session_note")  # the session made a Recall call
    stored = session_record(server, s3.session_id)["trajectory"]
    kinds = {A: "action", O: "observation"}
    assert [(e["position"], e["kind"], e["status"], e["summary"]) for e in stored] == [
        (i, kinds[k], "succeeded", s) for i, (k, s) in enumerate(TRAJECTORY)
    ]
    assert all(e["agent_reported"] for e in stored)
    record = session_record(server, s3.session_id)
    assert record["state"] == "CLOSED" and record["outcome"] == "partial"
    assert record["final_goal"] == WITH_TRAJECTORY["final_goal"]
    assert record["feedback_status"] == "complete"


def test_s58_seed_session_placeholder_is_a_lookup_error(server, stub):
    """A literal placeholder only yields a lookup error, never a shape error (4.7)."""
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(pb.CommitRequest(session_id="sess_abc123", **SUCCESSFUL), timeout=30))
    assert err.code == grpc.StatusCode.NOT_FOUND
    assert err.reason == "SESSION_NOT_FOUND"
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert not err.violations
    after = server.snapshot()
    assert after["counts"] == before["counts"] and after["ledger"] == before["ledger"]
    assert sorted(after["sessions"]) == sorted(before["sessions"])
