"""Recall's task_context (behaviour §7, 7.2 stage 5): merged into the session's context, top-level
keys overwriting, persisted for later recalls, and the merged result held to the 3.5 limits."""

from __future__ import annotations

import grpc
from google.protobuf import struct_pb2

from tests.support import activate, assess_all, check_error, commit, expect_error, pb

GOAL = "Rotate the signing keys of the release pipeline"


def _struct(data: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(data)
    return s


def _store_staging_procedure(stub, scope: str) -> str:
    s = activate(stub, scope, task=GOAL)
    assess_all(stub, s)
    return commit(
        stub,
        s.session_id,
        final_goal=GOAL,
        procedure=pb.CommitProcedure(
            summary="Rotate with the KMS CLI, then redeploy.",
            steps=["kms rotate", "redeploy"],
            context=_struct({"environment": "staging"}),
        ),
    ).procedure_id


def _recall(stub, session_id: str, scope: str, **kw) -> pb.RecallResponse:
    return stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, query=GOAL, **kw), timeout=30)


def test_recall_task_context_is_merged_persisted_and_decides_applicability(stub, scope):
    procedure_id = _store_staging_procedure(stub, scope)
    s = activate(stub, scope, task=GOAL, task_context=_struct({"environment": "prod", "team": "release"}))
    assert procedure_id not in [p.procedure_id for p in s.procedures]  # prod ≠ staging

    merged = _recall(stub, s.session_id, scope, task_context=_struct({"environment": "staging"}))
    assert procedure_id in [p.procedure_id for p in merged.procedures]  # top-level key overwritten

    later = _recall(stub, s.session_id, scope)  # no task_context: the merged one was persisted
    assert procedure_id in [p.procedure_id for p in later.procedures]


def test_recall_merged_task_context_over_the_size_limit_is_refused(server, stub, scope):
    big = "x" * 16_300  # canonical JSON just under 16384 bytes on its own
    s = activate(stub, scope, task=GOAL, task_context=_struct({"notes": big}))
    before = server.snapshot()
    err = expect_error(lambda: _recall(stub, s.session_id, scope, task_context=_struct({"extra": "y" * 200})))
    check_error(err, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT", "invalid_input", False, ["task_context"])
    after = server.snapshot()
    # Stage 5 refusal: only the activity touch and the recall count change (behaviour §2.3, 7.2).
    assert after["counts"] == before["counts"] and after["ledger"] == before["ledger"]
    ok = _recall(stub, s.session_id, scope)  # the stored context is unchanged and still usable
    assert ok.retrieval_id.startswith("rec_")
