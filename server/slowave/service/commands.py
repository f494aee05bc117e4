"""Validated requests: what the API layer hands the use cases after the shape rules passed."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from slowave.domain.feedback_entries import FeedbackItem
from slowave.domain.procedure_capture import CapturedProcedure
from slowave.v1.resources_pb2 import ItemError


@dataclass(frozen=True)
class ActivateCommand:
    task: str
    initial_goal: str
    scope: str
    page_size: int
    continuity_id: str | None
    task_context: dict
    semantic_context: str | None


@dataclass(frozen=True)
class Claim:
    content: str
    type: str
    occurred_at: datetime | None = None


@dataclass(frozen=True)
class RememberCommand:
    session_id: str
    scope: str
    claims: list[Claim | ItemError]  # batch items that broke their own rules are ItemErrors
    batch: bool


@dataclass(frozen=True)
class RecallCommand:
    session_id: str
    scope: str
    continue_from: str | None = None
    query: str | None = None
    page_size: int = 5
    task_context: dict | None = None
    semantic_context: str | None = None
    evidence_mode: str = "references"


@dataclass(frozen=True)
class FeedbackCommand:
    items: list[FeedbackItem | ItemError]
    batch: bool


@dataclass(frozen=True)
class TrajectoryStep:
    kind: str
    summary: str
    status: str = "unknown"


@dataclass(frozen=True)
class CommitCommand:
    session_id: str
    final_goal: str
    outcome: str
    outcome_summary: str
    verification_status: str
    verification_summary: str
    evidence_refs: list[str] = field(default_factory=list)
    procedure: CapturedProcedure | None = None
    trajectory: list[TrajectoryStep] = field(default_factory=list)
