"""Every request-level failure the service can report, by the name the contract gives it.

A domain error carries its `reason` (ErrorInfo.reason), its lower-snake `code` and whether it is
`retryable`; the API layer turns it into a gRPC status in one place (slowave.api.status).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Violation:
    """One broken rule: `path` in protobuf field names (`trajectory[3].summary`), '' for the request."""

    path: str
    description: str


class DomainError(Exception):
    reason: str = "INTERNAL_ERROR"
    code: str = "internal_error"
    retryable: bool = True

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidInput(DomainError):
    reason, code, retryable = "INVALID_INPUT", "invalid_input", False

    def __init__(self, violations: list[Violation]) -> None:
        self.violations = list(violations)
        paths = ", ".join(v.path or "<request>" for v in self.violations)
        super().__init__(f"invalid input: {paths}")


class SessionNotFound(DomainError):
    reason, code, retryable = "SESSION_NOT_FOUND", "invalid_input", False


class CursorNotFound(DomainError):
    reason, code, retryable = "CURSOR_NOT_FOUND", "invalid_input", False


class RetrievalNotFound(DomainError):
    reason, code, retryable = "NOT_FOUND", "not_found", False


class SessionEnded(DomainError):
    reason, code, retryable = "SESSION_ENDED", "invalid_input", False


class ScopeMismatch(DomainError):
    reason, code, retryable = "SCOPE_MISMATCH", "invalid_input", False


@dataclass(frozen=True)
class OutstandingRetrieval:
    retrieval_id: str
    memory_ids: list[str] = field(default_factory=list)
    procedure_ids: list[str] = field(default_factory=list)


class IncompleteFeedback(DomainError):
    reason, code, retryable = "INCOMPLETE_FEEDBACK", "incomplete_feedback", True

    def __init__(self, outstanding: list[OutstandingRetrieval]) -> None:
        # The seed fixes this message verbatim.
        super().__init__("feedback is incomplete")
        self.outstanding = outstanding


class StorageUnavailable(DomainError):
    reason, code, retryable = "INTERNAL_ERROR", "internal_error", True


class ShuttingDown(DomainError):
    """The server is draining: another replica (or this one, restarted) will answer the call."""

    reason, code, retryable = "INTERNAL_ERROR", "internal_error", True


class Overloaded(DomainError):
    """More work at once than the server takes; the same call succeeds a little later."""

    reason, code, retryable = "RESOURCE_EXHAUSTED", "resource_exhausted", True


class Unauthenticated(DomainError):
    """Keys are configured and the call carries no key, a malformed one, or one nobody holds."""

    reason, code, retryable = "UNAUTHENTICATED", "unauthenticated", False


class PermissionDenied(DomainError):
    """A valid key of a disabled tenant."""

    reason, code, retryable = "PERMISSION_DENIED", "permission_denied", False


def require_no_violations(violations: list[Violation]) -> None:
    if violations:
        raise InvalidInput(violations)
