"""Stage 2 of every RPC (behaviour §4.5): the shape and content rules of the request.

Each function reads one protobuf request, collects every violation (path in protobuf field names),
and either raises InvalidInput with all of them or returns the validated command. Rules that fail
only one batch item become that item's ItemError instead (behaviour §6, 8.3).
"""

from __future__ import annotations

from google.protobuf.message import Message

from slowave.api.protovalues import struct_to_python, timestamp_to_datetime
from slowave.domain.errors import Violation, require_no_violations
from slowave.domain.feedback_entries import UNSPECIFIED, FeedbackItem, MemoryEntry, ProcedureEntry
from slowave.domain.identifiers import CONTINUITY_PATTERN
from slowave.domain.procedure_capture import capture, describes_a_method
from slowave.domain.scope import check_scope
from slowave.domain.structs import normalize_procedure_context, normalize_task_context
from slowave.domain.text import (
    BATCH_LIMIT,
    CONTENT_LIMIT_BYTES,
    TRAJECTORY_LIMIT,
    TRAJECTORY_SUMMARY_LIMIT_CHARS,
    check_identifier,
    check_list_length,
    check_text,
    clean_text_list,
    is_blank,
)
from slowave.service.commands import (
    ActivateCommand,
    Claim,
    CommitCommand,
    FeedbackCommand,
    RecallCommand,
    RememberCommand,
    TrajectoryStep,
)
from slowave.service.messages import enum_word, enum_words
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res

PAGE_SIZE_DEFAULT, PAGE_SIZE_MIN, PAGE_SIZE_MAX = 5, 1, 10


def _has(msg: Message, name: str) -> bool:
    return msg.HasField(name)


def _page_size(violations: list[Violation], msg: Message) -> int:
    if not _has(msg, "page_size"):
        return PAGE_SIZE_DEFAULT
    if not PAGE_SIZE_MIN <= msg.page_size <= PAGE_SIZE_MAX:
        violations.append(Violation("page_size", f"must be between {PAGE_SIZE_MIN} and {PAGE_SIZE_MAX}"))
    return msg.page_size


def _enum(violations: list[Violation], path: str, descriptor, number: int, allowed: tuple[str, ...]) -> str | None:
    word = enum_word(descriptor, number)
    if word not in allowed:
        violations.append(Violation(path, f"must be one of: {', '.join(allowed)}"))
        return None
    return word


def _timestamp(violations: list[Violation], path: str, msg: Message, field: str):
    if not _has(msg, field):
        return None
    try:
        return timestamp_to_datetime(getattr(msg, field))
    except (ValueError, OverflowError):
        violations.append(Violation(path, "is not a valid timestamp"))
        return None


def _optional_text(violations: list[Violation], path: str, msg: Message, field: str, **kw) -> str | None:
    return check_text(violations, path, getattr(msg, field), required=False, **kw) if _has(msg, field) else None


# ------------------------------------------------------------------------------------------ Activate


def activate_command(req: pb.ActivateRequest) -> ActivateCommand:
    v: list[Violation] = []
    task = check_text(v, "task", req.task, required=True)
    goal = check_text(v, "initial_goal", req.initial_goal, required=True)
    scope = check_scope(v, req.scope)
    page_size = _page_size(v, req)
    continuity = None
    if _has(req, "continuity_id") and not is_blank(req.continuity_id):
        continuity = req.continuity_id.strip()
        if not CONTINUITY_PATTERN.match(continuity):
            v.append(Violation("continuity_id", "must match ^cont_[A-Za-z0-9_-]{32,96}$"))
    context = (
        normalize_task_context(v, "task_context", struct_to_python(req.task_context))
        if _has(req, "task_context")
        else {}
    )
    semantic = _optional_text(v, "semantic_context", req, "semantic_context")
    require_no_violations(v)
    return ActivateCommand(task, goal, scope, page_size, continuity, context, semantic)  # type: ignore[arg-type]


# ------------------------------------------------------------------------------------------ Remember

_MEMORY_TYPES = enum_words(res.MemoryType.DESCRIPTOR)


def _claim(v: list[Violation], prefix: str, content: str | None, type_number: int | None, occurred_at) -> Claim | None:
    start = len(v)
    text = check_text(v, f"{prefix}content", content, required=True, limit_bytes=CONTENT_LIMIT_BYTES)
    type_ = _enum(v, f"{prefix}type", res.MemoryType.DESCRIPTOR, type_number or 0, _MEMORY_TYPES)
    if len(v) > start:
        return None
    return Claim(text, type_, occurred_at)  # type: ignore[arg-type]


def remember_command(req: pb.RememberRequest) -> RememberCommand:
    v: list[Violation] = []
    session_id = check_identifier(v, "session_id", req.session_id, required=True)
    scope = check_scope(v, req.scope)
    scalar = _has(req, "content") or _has(req, "type")
    batch = len(req.memories) > 0
    claims: list = []
    if scalar and batch:
        # Behaviour §6: "Both → a violation on each of `content` and `type`".
        v += [Violation(f, "the scalar fields and `memories` are exclusive") for f in ("content", "type")]
    elif not scalar and not batch:
        v.append(Violation("", "either `content` and `type` or `memories` is required"))
    elif scalar:
        occurred = _timestamp(v, "occurred_at", req, "occurred_at")
        claim = _claim(
            v, "", req.content if _has(req, "content") else None, req.type if _has(req, "type") else None, occurred
        )
        claims = [claim]
    else:
        if _has(req, "occurred_at"):
            v.append(Violation("occurred_at", "is for the scalar form; set it on each item of `memories`"))
        if check_list_length(v, "memories", list(req.memories), BATCH_LIMIT):
            claims = [_remember_item(i, item) for i, item in enumerate(req.memories)]
    require_no_violations(v)
    return RememberCommand(session_id, scope, claims, batch)  # type: ignore[arg-type]


def _remember_item(i: int, item: pb.RememberItem) -> Claim | res.ItemError:
    v: list[Violation] = []
    occurred = _timestamp(v, f"memories[{i}].occurred_at", item, "occurred_at")
    claim = _claim(v, f"memories[{i}].", item.content, item.type, occurred)
    if v or claim is None:
        return _item_error(v)
    return claim


def _item_error(v: list[Violation]) -> res.ItemError:
    detail = "; ".join(f"{x.path}: {x.description}" for x in v)
    return res.ItemError(code="invalid_input", message=f"invalid item: {detail}", retryable=False)


# ------------------------------------------------------------------------------------------ Recall

# Unset means REFERENCES (proto).
_EVIDENCE_MODES = enum_words(res.EvidenceMode.DESCRIPTOR, with_unspecified=True)


def recall_command(req: pb.RecallRequest) -> RecallCommand:
    v: list[Violation] = []
    session_id = check_identifier(v, "session_id", req.session_id, required=True)
    scope = check_scope(v, req.scope)
    mode = _enum(v, "evidence_mode", res.EvidenceMode.DESCRIPTOR, req.evidence_mode, _EVIDENCE_MODES)
    cursor = None
    if _has(req, "continue_from") and not is_blank(req.continue_from):
        cursor = check_identifier(v, "continue_from", req.continue_from, required=True)
        for f in ("query", "page_size", "task_context", "semantic_context"):
            if _has(req, f):
                v.append(Violation(f, "is not allowed with `continue_from` (continuation pages inherit the catalog)"))
        if mode == "full":
            v.append(Violation("evidence_mode", "continuation pages allow only REFERENCES"))
        require_no_violations(v)
        return RecallCommand(session_id, scope, continue_from=cursor)  # type: ignore[arg-type]
    if not _has(req, "query"):
        v.append(Violation("", "`query` or `continue_from` is required"))
        query = None
    else:
        query = check_text(v, "query", req.query, required=True)
    page_size = _page_size(v, req)
    context = (
        normalize_task_context(v, "task_context", struct_to_python(req.task_context))
        if _has(req, "task_context")
        else None
    )
    semantic = _optional_text(v, "semantic_context", req, "semantic_context")
    require_no_violations(v)
    return RecallCommand(
        session_id,
        scope,
        None,
        query,
        page_size,
        context,
        semantic,  # type: ignore[arg-type]
        "full" if mode == "full" else "references",
    )


# ------------------------------------------------------------------------------------------ Feedback

_SCALAR_FEEDBACK_FIELDS = ("retrieval_id", "memory_feedback", "procedure_feedback", "retrieval_quality", "missing")


def _is_set(msg: Message, field: str) -> bool:
    value = getattr(msg, field)
    return len(value) > 0 if field in ("memory_feedback", "procedure_feedback", "missing") else _has(msg, field)


def feedback_command(req: pb.FeedbackRequest) -> FeedbackCommand:
    v: list[Violation] = []
    set_scalar = [f for f in _SCALAR_FEEDBACK_FIELDS if _is_set(req, f)]
    coverage = _coverage(v, "coverage", req)
    if req.items and set_scalar:
        v += [Violation(f, "the scalar feedback fields and `items` are exclusive") for f in set_scalar]
        if coverage == "complete":
            v.append(Violation("coverage", "must stay at its default (partial) with `items`"))
    elif not req.items and not set_scalar:
        v.append(Violation("", "either `retrieval_id` or `items` is required"))
    elif req.items:
        if coverage == "complete":
            v.append(Violation("coverage", "must stay at its default (partial) with `items`"))
        if check_list_length(v, "items", list(req.items), BATCH_LIMIT):
            require_no_violations(v)
            return FeedbackCommand([_batch_item(i, item) for i, item in enumerate(req.items)], batch=True)
    else:
        item = _feedback_item(v, "", req, coverage)
        require_no_violations(v)
        return FeedbackCommand([item], batch=False)
    require_no_violations(v)
    raise AssertionError("unreachable")


# Unset means PARTIAL (proto).
_COVERAGES = enum_words(pb.Coverage.DESCRIPTOR, with_unspecified=True)


def _coverage(v: list[Violation], path: str, msg: Message) -> str:
    if not _has(msg, "coverage"):
        return "partial"
    word = _enum(v, path, pb.Coverage.DESCRIPTOR, msg.coverage, _COVERAGES)
    return "complete" if word == "complete" else "partial"


def _batch_item(i: int, item: pb.FeedbackItem) -> FeedbackItem | res.ItemError:
    v: list[Violation] = []
    coverage = _coverage(v, f"items[{i}].coverage", item)
    parsed = _feedback_item(v, f"items[{i}].", item, coverage)
    return _item_error(v) if v else parsed


def _label(descriptor, msg: Message, field: str, *, optional: bool = True) -> str | None:
    """Feedback label fields: an undefined number reads as UNSPECIFIED, a per-target rejection later."""
    if optional and not _has(msg, field):
        return None
    return enum_word(descriptor, getattr(msg, field)) or UNSPECIFIED


def _feedback_item(v: list[Violation], prefix: str, msg: Message, coverage: str) -> FeedbackItem:
    retrieval_id = check_identifier(
        v, f"{prefix}retrieval_id", msg.retrieval_id if _has(msg, "retrieval_id") else None, required=True
    )
    memories, procedures = [], []
    if check_list_length(v, f"{prefix}memory_feedback", list(msg.memory_feedback)):
        for j, e in enumerate(msg.memory_feedback):
            p = f"{prefix}memory_feedback[{j}]."
            memories.append(
                MemoryEntry(
                    memory_id=check_identifier(v, p + "memory_id", e.memory_id, required=True) or "",
                    assessment=_label(pb.MemoryAssessment.DESCRIPTOR, e, "assessment", optional=False),  # type: ignore[arg-type]
                    stale_reason=_label(pb.StaleReason.DESCRIPTOR, e, "stale_reason"),
                    replacement_memory_id=check_identifier(
                        v, p + "replacement_memory_id", e.replacement_memory_id, required=False
                    )
                    if _has(e, "replacement_memory_id")
                    else None,
                    reason=_optional_text(v, p + "reason", e, "reason"),
                    relevance=_label(pb.Relevance.DESCRIPTOR, e, "relevance"),
                    effect=_label(res.Effect.DESCRIPTOR, e, "effect"),
                )
            )
    if check_list_length(v, f"{prefix}procedure_feedback", list(msg.procedure_feedback)):
        for j, e in enumerate(msg.procedure_feedback):
            p = f"{prefix}procedure_feedback[{j}]."
            procedures.append(
                ProcedureEntry(
                    procedure_id=check_identifier(v, p + "procedure_id", e.procedure_id, required=True) or "",
                    use=_label(pb.ProcedureUse.DESCRIPTOR, e, "use", optional=False),  # type: ignore[arg-type]
                    effect=_label(res.Effect.DESCRIPTOR, e, "effect"),
                    contribution=_optional_text(v, p + "contribution", e, "contribution"),
                    reason=_optional_text(v, p + "reason", e, "reason"),
                )
            )
    quality = _optional_text(v, f"{prefix}retrieval_quality", msg, "retrieval_quality")
    missing = clean_text_list(v, f"{prefix}missing", list(msg.missing))
    return FeedbackItem(retrieval_id or "", memories, procedures, quality, missing, coverage)


# ------------------------------------------------------------------------------------------ Commit

# UNKNOWN is the reaper's outcome for a session nobody committed; an agent cannot claim it.
_OUTCOMES = tuple(w for w in enum_words(res.Outcome.DESCRIPTOR) if w != "unknown")
_VERIFICATION = enum_words(res.VerificationStatus.DESCRIPTOR)
_KINDS = enum_words(pb.TrajectoryKind.DESCRIPTOR)
# Unset means UNKNOWN (proto).
_STATUSES = enum_words(pb.TrajectoryStatus.DESCRIPTOR, with_unspecified=True)


def commit_command(req: pb.CommitRequest) -> CommitCommand:
    v: list[Violation] = []
    session_id = check_identifier(v, "session_id", req.session_id, required=True)
    final_goal = check_text(v, "final_goal", req.final_goal, required=True)
    outcome = _enum(v, "outcome", res.Outcome.DESCRIPTOR, req.outcome, _OUTCOMES)
    summary = check_text(v, "outcome_summary", req.outcome_summary, required=True)
    status = vsummary = None
    refs: list[str] = []
    if not _has(req, "verification"):
        v.append(Violation("verification", "is required"))
    else:
        status = _enum(
            v, "verification.status", res.VerificationStatus.DESCRIPTOR, req.verification.status, _VERIFICATION
        )
        vsummary = check_text(v, "verification.summary", req.verification.summary, required=True)
        refs = clean_text_list(v, "verification.evidence_refs", list(req.verification.evidence_refs))
    procedure = None
    if _has(req, "procedure"):
        p = req.procedure
        goal = _optional_text(v, "procedure.goal", p, "goal")
        psummary = _optional_text(v, "procedure.summary", p, "summary")
        context = (
            normalize_procedure_context(v, "procedure.context", struct_to_python(p.context))
            if _has(p, "context")
            else {}
        )
        steps = clean_text_list(v, "procedure.steps", list(p.steps))
        caveats = clean_text_list(v, "procedure.caveats", list(p.caveats))
        if not describes_a_method(psummary, steps):
            v.append(Violation("procedure", "a procedure needs a summary or steps"))
        procedure = capture(goal, final_goal or "", psummary, context, steps, caveats)
    trajectory = []
    if len(req.trajectory) > TRAJECTORY_LIMIT:
        v.append(Violation("trajectory", f"must have at most {TRAJECTORY_LIMIT} entries"))
    for i, entry in enumerate(req.trajectory):
        kind = _enum(v, f"trajectory[{i}].kind", pb.TrajectoryKind.DESCRIPTOR, entry.kind, _KINDS)
        step_status = _enum(v, f"trajectory[{i}].status", pb.TrajectoryStatus.DESCRIPTOR, entry.status, _STATUSES)
        text = None
        if len(entry.summary) > TRAJECTORY_SUMMARY_LIMIT_CHARS:
            v.append(
                Violation(f"trajectory[{i}].summary", f"must be at most {TRAJECTORY_SUMMARY_LIMIT_CHARS} characters")
            )
        else:
            text = check_text(
                v,
                f"trajectory[{i}].summary",
                entry.summary,
                required=True,
                limit_bytes=4 * TRAJECTORY_SUMMARY_LIMIT_CHARS,
            )
        if kind and text:
            trajectory.append(
                TrajectoryStep(kind, text, "unknown" if step_status in (None, "unspecified") else step_status)
            )
    require_no_violations(v)
    return CommitCommand(session_id, final_goal, outcome, summary, status, vsummary, refs, procedure, trajectory)  # type: ignore[arg-type]
