"""The shapes of nested request values, for type checkers and readers.

Plain dicts with protobuf field names; enum fields take the seed's names (`"used"`, `"helped"`,
`"superseded"`) or proto ints; Struct fields take dicts; times take aware datetimes or RFC 3339
strings. The corresponding protobuf message is accepted wherever one of these is.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, TypedDict

Enum = str | int
Time = datetime | str


class MemoryFeedbackInput(TypedDict, total=False):
    memory_id: str
    assessment: Enum
    """used, irrelevant, stale, not_used, unassessable, already_known"""
    stale_reason: Enum
    replacement_memory_id: str
    reason: str
    relevance: Enum
    effect: Enum


class ProcedureFeedbackInput(TypedDict, total=False):
    procedure_id: str
    use: Enum
    """used, not_used, unassessable"""
    effect: Enum
    contribution: str
    reason: str


class FeedbackItemInput(TypedDict, total=False):
    retrieval_id: str
    memory_feedback: Sequence[MemoryFeedbackInput]
    procedure_feedback: Sequence[ProcedureFeedbackInput]
    retrieval_quality: str
    missing: Sequence[str]
    coverage: Enum


class RememberItemInput(TypedDict, total=False):
    content: str
    type: Enum
    occurred_at: Time


class VerificationInput(TypedDict, total=False):
    status: Enum
    """verified, partially_verified, unverified"""
    summary: str
    evidence_refs: Sequence[str]


class ProcedureInput(TypedDict, total=False):
    goal: str
    summary: str
    context: Mapping[str, Any]
    steps: Sequence[str]
    caveats: Sequence[str]


class TrajectoryEntryInput(TypedDict, total=False):
    kind: Enum
    """action, observation"""
    summary: str
    status: Enum
