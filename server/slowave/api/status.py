"""Domain errors → gRPC status with google.rpc details (spec 4.2, 4.3), in one place."""
from __future__ import annotations

import grpc
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from slowave.domain import errors as e
from slowave.v1 import errors_pb2

DOMAIN = "slowave.ai"

_STATUS = {
    e.InvalidInput: code_pb2.INVALID_ARGUMENT,
    e.SessionNotFound: code_pb2.NOT_FOUND,
    e.CursorNotFound: code_pb2.NOT_FOUND,
    e.RetrievalNotFound: code_pb2.NOT_FOUND,
    e.SessionEnded: code_pb2.FAILED_PRECONDITION,
    e.ScopeMismatch: code_pb2.FAILED_PRECONDITION,
    e.IncompleteFeedback: code_pb2.FAILED_PRECONDITION,
    e.StorageUnavailable: code_pb2.UNAVAILABLE,
}


def error_info(reason: str, code: str, retryable: bool) -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(
        reason=reason, domain=DOMAIN, metadata={"code": code, "retryable": "true" if retryable else "false"}
    )


def to_status(error: e.DomainError) -> status_pb2.Status:
    details = [error_info(error.reason, error.code, error.retryable)]
    if isinstance(error, e.InvalidInput):
        details.append(error_details_pb2.BadRequest(field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=v.path, description=v.description)
            for v in error.violations
        ]))
    elif isinstance(error, e.IncompleteFeedback):
        details.append(errors_pb2.IncompleteFeedback(outstanding=[
            errors_pb2.OutstandingRetrieval(retrieval_id=o.retrieval_id, memory_ids=o.memory_ids, procedure_ids=o.procedure_ids)
            for o in error.outstanding
        ]))
    elif isinstance(error, e.StorageUnavailable):
        retry = error_details_pb2.RetryInfo()
        retry.retry_delay.FromMilliseconds(500)
        details.append(retry)
    packed = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)
        packed.append(a)
    return status_pb2.Status(code=_STATUS.get(type(error), code_pb2.INTERNAL), message=error.message, details=packed)


def internal_status() -> status_pb2.Status:
    a = any_pb2.Any()
    a.Pack(error_info("INTERNAL_ERROR", "internal_error", True))
    return status_pb2.Status(code=code_pb2.INTERNAL, message="internal error", details=[a])


def abort(context: grpc.ServicerContext, status: status_pb2.Status) -> None:
    context.abort_with_status(rpc_status.to_status(status))
