"""Typed exceptions, parsed from the `google.rpc.Status` the service attaches to a failed call.

Every failure of an SDK call is a `SlowaveError`; its subclass says the gRPC status family, so
callers can write `except NotFound:` instead of comparing codes. The service's own errors carry a
`google.rpc.ErrorInfo` (domain `slowave.ai`), from which `reason`, `code` and `retryable` come; a
status without one (a deadline, an unreachable server, a proxy) follows the contract's JSON-bridge
rule (behaviour §4.6): `code="internal_error"`, `retryable=True`, except gRPC's own RESOURCE_EXHAUSTED for
an oversized message, which is `invalid_input` and not retryable. grpcio also answers overload
(`maximum_concurrent_rpcs`) with a bare RESOURCE_EXHAUSTED; only its message tells the two apart, so
a bare RESOURCE_EXHAUSTED is `resource_exhausted` and retryable unless the message is gRPC's size
refusal ("… larger than max …").

`retryable` is the contract's advice to the *caller* ("may succeed if sent again, after doing what
the error says" — e.g. `incomplete_feedback` is retryable once feedback is sent). Automatic transport
retries are a narrower decision, made in `slowave_client.retry`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, cast

import grpc
from google.rpc import error_details_pb2, status_pb2
from grpc_status import rpc_status

from slowave.v1 import errors_pb2

DOMAIN = "slowave.ai"
# gRPC core's wording when a message exceeds the receiver's limit ("Received message larger than max
# (N vs. M)", "Sent message larger than max …").
_OVERSIZED = "larger than max"


class FieldViolation(NamedTuple):
    """One offending field: `field` is the protobuf path (`trajectory[3].summary`, '' = the request)."""

    field: str
    description: str


@dataclass(frozen=True)
class OutstandingRetrieval:
    """A retrieval whose exposed targets still need feedback before Commit can succeed."""

    retrieval_id: str
    memory_ids: tuple[str, ...] = ()
    procedure_ids: tuple[str, ...] = ()


class SlowaveError(Exception):
    """A call failed as a whole.

    Attributes:
        status: the gRPC status code (None only for problems found before anything was sent).
        code: the contract's lower-snake code (`invalid_input`, `not_found`, `incomplete_feedback`…).
        reason: `ErrorInfo.reason` (`SESSION_NOT_FOUND`…), None when the status carried no ErrorInfo.
        message: the status message (human text; only `feedback is incomplete` is stable).
        retryable: whether the same request may succeed later (see the module docstring).
        field_violations: the `google.rpc.BadRequest` violations, in the order sent.
        retry_delay: seconds from a `google.rpc.RetryInfo`, when the service suggested a delay.
    """

    def __init__(
        self,
        message: str,
        *,
        status: grpc.StatusCode | None,
        code: str,
        reason: str | None = None,
        retryable: bool = False,
        field_violations: Iterable[FieldViolation] = (),
        retry_delay: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.code = code
        self.reason = reason
        self.retryable = retryable
        self.field_violations: tuple[FieldViolation, ...] = tuple(field_violations)
        self.retry_delay = retry_delay

    @property
    def from_service(self) -> bool:
        """True when the Slowave service itself produced the status (it carried an ErrorInfo), as
        opposed to gRPC, the network or a proxy."""
        return self.reason is not None

    def __str__(self) -> str:
        status = self.status.name if self.status is not None else "LOCAL"
        text = f"{status} {self.reason or self.code}: {self.message}"
        if self.field_violations:
            text += " [" + "; ".join(f"{v.field or '<request>'}: {v.description}" for v in self.field_violations) + "]"
        return text

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self)!r})"


class InvalidArgument(SlowaveError):
    """INVALID_ARGUMENT: the request breaks a shape or content rule; see `field_violations`."""


class InvalidRequest(InvalidArgument, ValueError):
    """The SDK could not even build the request (unknown key, wrong type, unknown enum name);
    nothing was sent. Same `code` and path conventions as the service's INVALID_ARGUMENT."""

    def __init__(self, violations: Sequence[FieldViolation]) -> None:
        paths = ", ".join(v.field or "<request>" for v in violations)
        super().__init__(
            f"invalid input: {paths}", status=None, code="invalid_input", retryable=False, field_violations=violations
        )


class NotFound(SlowaveError):
    """NOT_FOUND: an unknown session, cursor or retrieval (ids of another tenant look the same)."""


class FailedPrecondition(SlowaveError):
    """FAILED_PRECONDITION: the session ended, or the scope differs from the session's."""


class IncompleteFeedbackError(FailedPrecondition):
    """Commit was refused by the feedback gate. Send Feedback for every target in `outstanding`, then
    repeat the identical Commit."""

    def __init__(self, message: str, *, outstanding: Iterable[OutstandingRetrieval] = (), **kwargs: Any) -> None:
        super().__init__(message, **kwargs)
        self.outstanding: tuple[OutstandingRetrieval, ...] = tuple(outstanding)

    def __str__(self) -> str:
        owed = "; ".join(f"{o.retrieval_id}: {', '.join(o.memory_ids + o.procedure_ids)}" for o in self.outstanding)
        return f"{super().__str__()} (outstanding {owed})"


class Unauthenticated(SlowaveError):
    """UNAUTHENTICATED: the server has API keys and this call's key is missing or unknown."""


class PermissionDenied(SlowaveError):
    """PERMISSION_DENIED: the key is known but its tenant is disabled."""


class Unavailable(SlowaveError):
    """UNAVAILABLE: the server or its database cannot be reached right now."""


class ResourceExhausted(SlowaveError):
    """RESOURCE_EXHAUSTED: the server is overloaded, or the request exceeds the message size limit."""


class DeadlineExceeded(SlowaveError):
    """DEADLINE_EXCEEDED: no answer within the call's timeout (the server may still have acted)."""


class Cancelled(SlowaveError):
    """CANCELLED: the call was cancelled before it finished."""


class InternalError(SlowaveError):
    """INTERNAL / UNKNOWN / DATA_LOSS: an unexpected failure; the service rolled back its writes."""


class Unimplemented(SlowaveError):
    """UNIMPLEMENTED: the server does not offer this method (an older or different server)."""


_BY_STATUS: dict[grpc.StatusCode, type[SlowaveError]] = {
    grpc.StatusCode.INVALID_ARGUMENT: InvalidArgument,
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.FAILED_PRECONDITION: FailedPrecondition,
    grpc.StatusCode.UNAUTHENTICATED: Unauthenticated,
    grpc.StatusCode.PERMISSION_DENIED: PermissionDenied,
    grpc.StatusCode.UNAVAILABLE: Unavailable,
    grpc.StatusCode.RESOURCE_EXHAUSTED: ResourceExhausted,
    grpc.StatusCode.DEADLINE_EXCEEDED: DeadlineExceeded,
    grpc.StatusCode.CANCELLED: Cancelled,
    grpc.StatusCode.INTERNAL: InternalError,
    grpc.StatusCode.UNKNOWN: InternalError,
    grpc.StatusCode.DATA_LOSS: InternalError,
    grpc.StatusCode.UNIMPLEMENTED: Unimplemented,
}


@dataclass(frozen=True)
class StatusDetails:
    """The details of a `google.rpc.Status` that the contract defines, unpacked; None when absent."""

    info: error_details_pb2.ErrorInfo | None = None
    bad_request: error_details_pb2.BadRequest | None = None
    incomplete: errors_pb2.IncompleteFeedback | None = None
    retry: error_details_pb2.RetryInfo | None = None


_DETAILS: dict[str, Any] = {
    "info": error_details_pb2.ErrorInfo,
    "bad_request": error_details_pb2.BadRequest,
    "incomplete": errors_pb2.IncompleteFeedback,
    "retry": error_details_pb2.RetryInfo,
}


def unpack_details(status: status_pb2.Status | None) -> StatusDetails:
    """Shared with the MCP bridge, which renders the same details as the seed's JSON."""
    found: dict[str, Any] = {}
    for packed in status.details if status is not None else ():
        for name, kind in _DETAILS.items():
            if packed.Is(kind.DESCRIPTOR):
                found[name] = kind()
                packed.Unpack(found[name])
    return StatusDetails(**found)


def error_from_status(status: grpc.StatusCode, message: str, details: status_pb2.Status | None) -> SlowaveError:
    """Builds the typed error from a status code, its message and the decoded rich status (if any)."""
    unpacked = unpack_details(details)
    info = unpacked.info
    bad = unpacked.bad_request
    violations = [FieldViolation(v.field, v.description) for v in bad.field_violations] if bad is not None else []
    outstanding = (
        [
            OutstandingRetrieval(o.retrieval_id, tuple(o.memory_ids), tuple(o.procedure_ids))
            for o in unpacked.incomplete.outstanding
        ]
        if unpacked.incomplete is not None
        else None
    )
    retry = unpacked.retry
    retry_delay = retry.retry_delay.ToTimedelta().total_seconds() if retry is not None else None

    if info is not None:
        reason: str | None = info.reason
        code = info.metadata.get("code", "internal_error")
        retryable = info.metadata.get("retryable") == "true"
    elif status == grpc.StatusCode.RESOURCE_EXHAUSTED and _OVERSIZED in message:
        reason, code, retryable = None, "invalid_input", False
    elif status == grpc.StatusCode.RESOURCE_EXHAUSTED:
        reason, code, retryable = None, "resource_exhausted", True
    else:
        reason, code, retryable = None, "internal_error", True

    if outstanding is not None or reason == "INCOMPLETE_FEEDBACK":
        return IncompleteFeedbackError(
            message,
            outstanding=outstanding or (),
            status=status,
            code=code,
            reason=reason,
            retryable=retryable,
            field_violations=violations,
            retry_delay=retry_delay,
        )
    return _BY_STATUS.get(status, SlowaveError)(
        message,
        status=status,
        code=code,
        reason=reason,
        retryable=retryable,
        field_violations=violations,
        retry_delay=retry_delay,
    )


def error_from_rpc(error: grpc.RpcError) -> SlowaveError:
    """The typed error of a failed sync or asyncio call (`grpc.RpcError` / `grpc.aio.AioRpcError`)."""
    code = error.code() if hasattr(error, "code") else grpc.StatusCode.UNKNOWN
    message = (error.details() if hasattr(error, "details") else None) or str(code.name)
    try:
        # A failed call's RpcError is also its grpc.Call (the stubs type the two apart).
        details = rpc_status.from_call(cast(grpc.Call, error))
    except (ValueError, AttributeError, TypeError):
        # A status-details trailer inconsistent with the call's status is not trusted (grpc_status
        # raises on the mismatch); the bare status is still meaningful.
        details = None
    return error_from_status(code, message, details)
