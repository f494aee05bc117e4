"""Domain errors → gRPC status with google.rpc details (behaviour §4.2, 4.3), in one place."""

from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from slowave.domain import errors as e
from slowave.v1 import errors_pb2

DOMAIN = "slowave.ai"
# Status details travel in trailers, and gRPC clients refuse trailers over 8 KiB by default (they
# see RESOURCE_EXHAUSTED "received metadata size exceeds soft limit" instead of the status): the
# BadRequest and the message are bounded well below that.
_MAX_VIOLATION_BYTES = 2500
_MAX_MESSAGE_BYTES = 400

_STATUS = {
    e.InvalidInput: code_pb2.INVALID_ARGUMENT,
    e.SessionNotFound: code_pb2.NOT_FOUND,
    e.CursorNotFound: code_pb2.NOT_FOUND,
    e.RetrievalNotFound: code_pb2.NOT_FOUND,
    e.SessionEnded: code_pb2.FAILED_PRECONDITION,
    e.ScopeMismatch: code_pb2.FAILED_PRECONDITION,
    e.IncompleteFeedback: code_pb2.FAILED_PRECONDITION,
    e.StorageUnavailable: code_pb2.UNAVAILABLE,
    e.ShuttingDown: code_pb2.UNAVAILABLE,
    e.Overloaded: code_pb2.RESOURCE_EXHAUSTED,
    e.Unauthenticated: code_pb2.UNAUTHENTICATED,
    e.PermissionDenied: code_pb2.PERMISSION_DENIED,
}


def error_info(reason: str, code: str, retryable: bool) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(
        reason=reason, domain=DOMAIN, metadata={"code": code, "retryable": "true" if retryable else "false"}
    )


def to_status(error: e.DomainError) -> status_pb2.Status:
    details = [error_info(error.reason, error.code, error.retryable)]
    if isinstance(error, e.InvalidInput):
        details.append(error_details_pb2.BadRequest(field_violations=_bounded_violations(error.violations)))
    elif isinstance(error, e.IncompleteFeedback):
        details.append(
            errors_pb2.IncompleteFeedback(
                outstanding=[
                    errors_pb2.OutstandingRetrieval(
                        retrieval_id=o.retrieval_id, memory_ids=o.memory_ids, procedure_ids=o.procedure_ids
                    )
                    for o in error.outstanding
                ]
            )
        )
    elif isinstance(error, e.StorageUnavailable | e.ShuttingDown | e.Overloaded):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(500)
        details.append(retry)
    packed = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)
        packed.append(a)
    return status_pb2.Status(
        code=_STATUS.get(type(error), code_pb2.INTERNAL), message=_bounded_message(error.message), details=packed
    )


def _bounded_violations(violations: list[e.Violation]) -> list[error_details_pb2.BadRequest.FieldViolation]:
    """Every violation while they fit; past the budget, the first omitted one's path with a count."""
    out: list[error_details_pb2.BadRequest.FieldViolation] = []
    size = 0
    for i, v in enumerate(violations):
        fv = error_details_pb2.BadRequest.FieldViolation(field=v.path, description=v.description)
        size += fv.ByteSize() + 3
        if size > _MAX_VIOLATION_BYTES and i < len(violations) - 1:
            out.append(
                error_details_pb2.BadRequest.FieldViolation(
                    field=v.path,
                    description=(
                        f"{v.description}; and {len(violations) - i - 1} more violations not listed "
                        "(error details are size-bounded)"
                    ),
                )
            )
            break
        out.append(fv)
    return out


def _bounded_message(message: str) -> str:
    data = message.encode("utf-8")
    if len(data) <= _MAX_MESSAGE_BYTES:
        return message
    return data[:_MAX_MESSAGE_BYTES].decode("utf-8", "ignore") + " …"


def internal_status() -> status_pb2.Status:
    a = any_pb2.Any()
    a.Pack(error_info("INTERNAL_ERROR", "internal_error", True))
    return status_pb2.Status(code=code_pb2.INTERNAL, message="internal error", details=[a])


def abort(context: grpc.ServicerContext, status: status_pb2.Status) -> None:
    context.abort_with_status(rpc_status.to_status(status))
