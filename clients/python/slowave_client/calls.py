"""One prepared call per RPC: the request message, whether it is safe to repeat, how to read the answer.

Shared by the blocking and the asyncio client, which differ only in how they send. Keyword names are
the protobuf field names, so `prepare("Recall", {...})` and `recall(**{...})` take the same keys.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message
from grpc_health.v1 import health_pb2

from slowave.v1 import memory_service_pb2 as pb
from slowave_client.inputs import (
    Enum,
    FeedbackItemInput,
    MemoryFeedbackInput,
    ProcedureFeedbackInput,
    ProcedureInput,
    RememberItemInput,
    Time,
    TrajectoryEntryInput,
    VerificationInput,
)
from slowave_client.results import (
    ActivateResult,
    CommitResult,
    FeedbackItemResult,
    FeedbackRecord,
    RecallResult,
    RememberItemResult,
    RememberResult,
    from_message,
)
from slowave_client.values import build_message, enum_name

T = TypeVar("T")
SERVICE = pb.DESCRIPTOR.services_by_name["MemoryService"].full_name
HEALTH_CHECK = "/grpc.health.v1.Health/Check"
METHODS = ("Activate", "Remember", "Recall", "Feedback", "Commit")


@dataclass(frozen=True)
class PreparedCall(Generic[T]):
    path: str
    """`/slowave.v1.MemoryService/Activate`"""
    request: Message
    response_type: type[Message]
    convert: Callable[[Any], T]
    idempotent: bool
    """Safe to send again after an ambiguous UNAVAILABLE (see slowave_client.retry)."""

    @property
    def method(self) -> str:
        return self.path.rsplit("/", 1)[-1]


def _remember_result(response: pb.RememberResponse) -> RememberResult | list[RememberItemResult]:
    if response.WhichOneof("result") == "batch":
        return [from_message(RememberItemResult, r) for r in response.batch.results]
    return from_message(RememberResult, response.memory)


def _feedback_result(response: pb.FeedbackResponse) -> FeedbackRecord | list[FeedbackItemResult]:
    if response.WhichOneof("result") == "batch":
        return [from_message(FeedbackItemResult, r) for r in response.batch.results]
    return from_message(FeedbackRecord, response.record)


_RESPONSES: dict[str, tuple[type[Message], type[Message], Callable[[Any], Any]]] = {
    "Activate": (pb.ActivateRequest, pb.ActivateResponse, lambda r: from_message(ActivateResult, r)),
    "Remember": (pb.RememberRequest, pb.RememberResponse, _remember_result),
    "Recall": (pb.RecallRequest, pb.RecallResponse, lambda r: from_message(RecallResult, r)),
    "Feedback": (pb.FeedbackRequest, pb.FeedbackResponse, _feedback_result),
    "Commit": (pb.CommitRequest, pb.CommitResponse, lambda r: from_message(CommitResult, r)),
}


def _idempotent(method: str, request: Message) -> bool:
    if method == "Activate":
        return False
    if method == "Recall":
        # Blank `continue_from` counts as absent (behaviour §7): only a continuation read repeats safely.
        recall = typing.cast(pb.RecallRequest, request)
        return not recall.HasField("query") and recall.continue_from.strip() != ""
    return True


def prepare(method: str, request: Mapping[str, Any] | Message) -> PreparedCall[Any]:
    """Any MemoryService call from a whole request (dict with protobuf field names, or the message).

    The result is the form the response takes: e.g. a batch Remember gives a list of
    RememberItemResult, a scalar one a RememberResult.
    """
    if method not in _RESPONSES:
        raise ValueError(f"unknown method {method!r}; expected one of {', '.join(METHODS)}")
    request_type, response_type, convert = _RESPONSES[method]
    message = build_message(request_type, request)
    return PreparedCall(f"/{SERVICE}/{method}", message, response_type, convert, _idempotent(method, message))


def _fields(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}


def activate(
    task: str,
    initial_goal: str,
    scope: str,
    *,
    page_size: int | None = None,
    continuity_id: str | None = None,
    task_context: Mapping[str, Any] | None = None,
    semantic_context: str | None = None,
) -> PreparedCall[ActivateResult]:
    return prepare(
        "Activate",
        _fields(
            task=task,
            initial_goal=initial_goal,
            scope=scope,
            page_size=page_size,
            continuity_id=continuity_id,
            task_context=task_context,
            semantic_context=semantic_context,
        ),
    )


def remember(
    session_id: str, scope: str, content: str, type: Enum, *, occurred_at: Time | None = None
) -> PreparedCall[RememberResult]:
    return prepare(
        "Remember", _fields(session_id=session_id, scope=scope, content=content, type=type, occurred_at=occurred_at)
    )


def remember_batch(
    session_id: str,
    scope: str,
    memories: Iterable[RememberItemInput | tuple[str, Enum] | Message],
) -> PreparedCall[list[RememberItemResult]]:
    """`memories`: dicts, protobuf RememberItems, or `(content, type)` pairs."""
    items = [{"content": m[0], "type": m[1]} if isinstance(m, tuple) else m for m in memories]
    return prepare("Remember", {"session_id": session_id, "scope": scope, "memories": items})


def recall(
    session_id: str,
    scope: str,
    query: str | None = None,
    *,
    page_size: int | None = None,
    task_context: Mapping[str, Any] | None = None,
    semantic_context: str | None = None,
    evidence_mode: Enum | None = None,
    continue_from: str | None = None,
) -> PreparedCall[RecallResult]:
    return prepare(
        "Recall",
        _fields(
            session_id=session_id,
            scope=scope,
            query=query,
            page_size=page_size,
            task_context=task_context,
            semantic_context=semantic_context,
            evidence_mode=evidence_mode,
            continue_from=continue_from,
        ),
    )


MemoryFeedback = Mapping[str, Enum] | Iterable[MemoryFeedbackInput | Message]


def memory_entries(memory_feedback: MemoryFeedback | None) -> list[Any] | None:
    """`{"sch_1": "used", "sch_2": "irrelevant"}` is shorthand for a list of plain assessments."""
    if memory_feedback is None:
        return None
    if isinstance(memory_feedback, Mapping):
        return [{"memory_id": k, "assessment": v} for k, v in memory_feedback.items()]
    return list(memory_feedback)


def feedback(
    retrieval_id: str,
    memory_feedback: MemoryFeedback | None = None,
    procedure_feedback: Iterable[ProcedureFeedbackInput | Message] | None = None,
    *,
    coverage: Enum | None = None,
    retrieval_quality: str | None = None,
    missing: Iterable[str] | None = None,
) -> PreparedCall[FeedbackRecord]:
    return prepare(
        "Feedback",
        _fields(
            retrieval_id=retrieval_id,
            memory_feedback=memory_entries(memory_feedback),
            procedure_feedback=None if procedure_feedback is None else list(procedure_feedback),
            coverage=coverage,
            retrieval_quality=retrieval_quality,
            missing=None if missing is None else list(missing),
        ),
    )


def feedback_batch(items: Iterable[FeedbackItemInput | Message]) -> PreparedCall[list[FeedbackItemResult]]:
    converted: list[Any] = []
    for item in items:
        if isinstance(item, Mapping) and isinstance(item.get("memory_feedback"), Mapping):
            converted.append({**item, "memory_feedback": memory_entries(item["memory_feedback"])})
        else:
            converted.append(item)
    return prepare("Feedback", {"items": converted})


def commit(
    session_id: str,
    final_goal: str,
    outcome: Enum,
    outcome_summary: str,
    verification: VerificationInput | Message,
    *,
    procedure: ProcedureInput | Message | None = None,
    trajectory: Iterable[TrajectoryEntryInput | Message] | None = None,
) -> PreparedCall[CommitResult]:
    return prepare(
        "Commit",
        _fields(
            session_id=session_id,
            final_goal=final_goal,
            outcome=outcome,
            outcome_summary=outcome_summary,
            verification=verification,
            procedure=procedure,
            trajectory=None if trajectory is None else list(trajectory),
        ),
    )


def health(service: str = "") -> PreparedCall[str]:
    """The gRPC health protocol: `serving`, `not_serving`, `unknown` (`service_unknown` is handled by
    the clients, since the protocol reports it as NOT_FOUND)."""
    # The health stubs type DESCRIPTOR as the upb implementation's class; it is an EnumDescriptor.
    status_enum = cast(EnumDescriptor, health_pb2.HealthCheckResponse.DESCRIPTOR.enum_types_by_name["ServingStatus"])
    return PreparedCall(
        HEALTH_CHECK,
        health_pb2.HealthCheckRequest(service=service),
        health_pb2.HealthCheckResponse,
        lambda r: enum_name(status_enum, r.status),
        idempotent=True,
    )
