"""A Struct nested past protobuf's own parse depth (≈ 33 object levels) cannot be parsed at all,
yet it breaks the same rule as one nested 9 deep (behaviour §3.5): the refusal names the Struct field
and the depth rule, as for any depth violation, not a generic "not a valid message"; nothing is
stored. Other undecodable bytes keep the whole-request violation (path "")."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import struct_pb2

from slowave.domain.structs import DEPTH_VIOLATION
from tests.support import activate, check_error, expect_error, pb, res


def deep(target: struct_pb2.Struct, levels: int) -> None:
    """Fills `target` in place with `levels` nested objects: handing a Struct this deep to a message
    constructor would copy it through a parse, which fails."""
    value: dict = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"k": value}
    target.update(value)


def _raw(server, rpc: str):
    return server.channel.unary_unary(
        f"/slowave.v1.MemoryService/{rpc}", request_serializer=lambda b: b, response_deserializer=lambda b: b
    )


def _refused_at(server, rpc: str, data: bytes, path: str) -> None:
    before = server.snapshot()
    err = expect_error(lambda: _raw(server, rpc)(data, timeout=30))
    check_error(err, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT", "invalid_input", False, [path])
    assert [description for _, description in err.violations] == [DEPTH_VIOLATION], err.violations
    assert server.snapshot() == before


@pytest.mark.parametrize("levels", [34, 40, 200])
def test_activate_task_context_past_the_parse_depth_is_a_depth_violation(server, scope, levels):
    request = pb.ActivateRequest(task="Deploy", initial_goal="Deploy", scope=scope)
    deep(request.task_context, levels)
    data = request.SerializeToString()
    with pytest.raises(Exception, match="MaxDepth"):  # the premise: protobuf cannot parse it
        pb.ActivateRequest.FromString(data)
    _refused_at(server, "Activate", data, "task_context")


def test_recall_and_commit_structs_past_the_parse_depth_name_their_field(server, stub, scope):
    s = activate(stub, scope, task="Deploy")
    recall = pb.RecallRequest(session_id=s.session_id, scope=scope, query="deploy")
    deep(recall.task_context, 40)
    _refused_at(server, "Recall", recall.SerializeToString(), "task_context")
    commit = pb.CommitRequest(
        session_id=s.session_id,
        final_goal="Deploy",
        outcome=res.OUTCOME_SUCCESS,
        outcome_summary="Deployed.",
        procedure=pb.CommitProcedure(summary="Deploy with the script"),
    )
    deep(commit.procedure.context, 40)
    _refused_at(server, "Commit", commit.SerializeToString(), "procedure.context")


def test_other_undecodable_bytes_are_still_a_whole_request_violation(server, scope):
    good = pb.ActivateRequest(task="Deploy", initial_goal="Deploy", scope=scope)
    deep(good.task_context, 40)
    truncated = good.SerializeToString()[:-3]
    err = expect_error(lambda: _raw(server, "Activate")(truncated, timeout=30))
    check_error(err, grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT", "invalid_input", False, [""])
