"""SDK error parsing: typed exceptions from constructed google.rpc.Status values and failed calls."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from slowave.v1 import errors_pb2
from slowave_client.errors import (
    DeadlineExceeded,
    FailedPrecondition,
    FieldViolation,
    IncompleteFeedbackError,
    InternalError,
    InvalidArgument,
    NotFound,
    OutstandingRetrieval,
    PermissionDenied,
    ResourceExhausted,
    SlowaveError,
    Unauthenticated,
    Unavailable,
    error_from_rpc,
    error_from_status,
)


def info(reason: str, code: str, retryable: bool) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(
        reason=reason, domain="slowave.ai", metadata={"code": code, "retryable": "true" if retryable else "false"}
    )


def status(code: int, message: str, *details: object) -> status_pb2.Status:
    packed = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)  # type: ignore[arg-type]
        packed.append(a)
    return status_pb2.Status(code=code, message=message, details=packed)


def test_invalid_argument_carries_every_field_violation_in_order():
    bad = error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field="trajectory[3].summary", description="must not be blank"),
            error_details_pb2.BadRequest.FieldViolation(field="", description="either retrieval_id or items"),
        ]
    )
    err = error_from_status(
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid input: trajectory[3].summary",
        status(code_pb2.INVALID_ARGUMENT, "x", info("INVALID_INPUT", "invalid_input", False), bad),
    )
    assert type(err) is InvalidArgument
    assert (err.status, err.code, err.reason, err.retryable) == (
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid_input",
        "INVALID_INPUT",
        False,
    )
    assert err.field_violations == (
        FieldViolation("trajectory[3].summary", "must not be blank"),
        FieldViolation("", "either retrieval_id or items"),
    )
    assert err.field_violations[0].field == "trajectory[3].summary"
    assert "trajectory[3].summary: must not be blank" in str(err) and "<request>" in str(err)
    assert err.from_service


def test_incomplete_feedback_parses_outstanding_retrievals():
    owed = errors_pb2.IncompleteFeedback(
        outstanding=[
            errors_pb2.OutstandingRetrieval(retrieval_id="ctx_1", memory_ids=["sch_1", "sch_2"]),
            errors_pb2.OutstandingRetrieval(retrieval_id="rec_2", procedure_ids=["proc_sess_1"]),
        ]
    )
    err = error_from_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        "feedback is incomplete",
        status(
            code_pb2.FAILED_PRECONDITION,
            "feedback is incomplete",
            info("INCOMPLETE_FEEDBACK", "incomplete_feedback", True),
            owed,
        ),
    )
    assert isinstance(err, IncompleteFeedbackError) and isinstance(err, FailedPrecondition)
    assert err.code == "incomplete_feedback" and err.retryable and err.message == "feedback is incomplete"
    assert err.outstanding == (
        OutstandingRetrieval("ctx_1", ("sch_1", "sch_2"), ()),
        OutstandingRetrieval("rec_2", (), ("proc_sess_1",)),
    )
    assert "sch_2" in str(err) and "proc_sess_1" in str(err)


@pytest.mark.parametrize(
    ("grpc_code", "proto_code", "reason", "code", "cls"),
    [
        (grpc.StatusCode.NOT_FOUND, code_pb2.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input", NotFound),
        (grpc.StatusCode.NOT_FOUND, code_pb2.NOT_FOUND, "NOT_FOUND", "not_found", NotFound),
        (
            grpc.StatusCode.FAILED_PRECONDITION,
            code_pb2.FAILED_PRECONDITION,
            "SESSION_ENDED",
            "invalid_input",
            FailedPrecondition,
        ),
        (
            grpc.StatusCode.UNAUTHENTICATED,
            code_pb2.UNAUTHENTICATED,
            "UNAUTHENTICATED",
            "unauthenticated",
            Unauthenticated,
        ),
        (
            grpc.StatusCode.PERMISSION_DENIED,
            code_pb2.PERMISSION_DENIED,
            "PERMISSION_DENIED",
            "permission_denied",
            PermissionDenied,
        ),
        (grpc.StatusCode.INTERNAL, code_pb2.INTERNAL, "INTERNAL_ERROR", "internal_error", InternalError),
    ],
)
def test_each_status_family_has_its_class(grpc_code, proto_code, reason, code, cls):
    err = error_from_status(grpc_code, "m", status(proto_code, "m", info(reason, code, False)))
    assert type(err) is cls
    assert (err.reason, err.code) == (reason, code)
    assert not isinstance(err, IncompleteFeedbackError)


def test_service_unavailable_carries_its_retry_delay():
    retry = error_details_pb2.RetryInfo()
    retry.retry_delay.FromMilliseconds(500)
    err = error_from_status(
        grpc.StatusCode.UNAVAILABLE,
        "the database is unavailable",
        status(code_pb2.UNAVAILABLE, "x", info("INTERNAL_ERROR", "internal_error", True), retry),
    )
    assert type(err) is Unavailable and err.retryable and err.from_service and err.retry_delay == 0.5


def test_statuses_without_error_info_follow_the_bridge_rule():
    transport = error_from_status(grpc.StatusCode.UNAVAILABLE, "failed to connect", None)
    assert type(transport) is Unavailable and not transport.from_service
    assert (transport.code, transport.reason, transport.retryable) == ("internal_error", None, True)
    deadline = error_from_status(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", None)
    assert type(deadline) is DeadlineExceeded and deadline.code == "internal_error" and deadline.retryable
    oversized = error_from_status(
        grpc.StatusCode.RESOURCE_EXHAUSTED, "Received message larger than max (9437279 vs. 8388608)", None
    )
    assert type(oversized) is ResourceExhausted and oversized.code == "invalid_input" and not oversized.retryable
    overload = error_from_status(grpc.StatusCode.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!", None)
    assert type(overload) is ResourceExhausted and overload.code == "resource_exhausted" and overload.retryable
    other = error_from_status(grpc.StatusCode.ALREADY_EXISTS, "m", None)
    assert type(other) is SlowaveError and other.status == grpc.StatusCode.ALREADY_EXISTS


class FakeRpcError(grpc.RpcError, grpc.Call):
    """What a failed unary call raises: code, details and the trailing metadata with the rich status."""

    def __init__(self, code: grpc.StatusCode, details: str, rich: status_pb2.Status | None = None) -> None:
        self._code, self._details = code, details
        self._trailers = (("grpc-status-details-bin", rich.SerializeToString()),) if rich is not None else ()

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def trailing_metadata(self):
        return self._trailers

    def initial_metadata(self):
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback) -> bool:
        return False


def test_error_from_a_failed_call_decodes_the_status_details_trailer():
    rich = status(code_pb2.NOT_FOUND, "session sess_x not found", info("SESSION_NOT_FOUND", "invalid_input", False))
    err = error_from_rpc(FakeRpcError(grpc.StatusCode.NOT_FOUND, "session sess_x not found", rich))
    assert type(err) is NotFound and err.reason == "SESSION_NOT_FOUND" and err.message == "session sess_x not found"


def test_a_details_trailer_contradicting_the_status_is_ignored():
    rich = status(code_pb2.INVALID_ARGUMENT, "other", info("INVALID_INPUT", "invalid_input", False))
    err = error_from_rpc(FakeRpcError(grpc.StatusCode.UNAVAILABLE, "connection reset", rich))
    assert type(err) is Unavailable and err.reason is None and err.code == "internal_error"
