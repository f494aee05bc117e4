"""Feedback entries as the domain sees them, after the API layer has read the request.

Label fields hold lowercase value names (`used`, `superseded`, …); `"unspecified"` stands for the
zero value or any number the contract does not define (behaviour §13.2), and None for "absent".
"""

from __future__ import annotations

from dataclasses import dataclass, field

UNSPECIFIED = "unspecified"


@dataclass(frozen=True)
class MemoryEntry:
    memory_id: str
    assessment: str
    stale_reason: str | None = None
    replacement_memory_id: str | None = None
    reason: str | None = None
    relevance: str | None = None
    effect: str | None = None


@dataclass(frozen=True)
class ProcedureEntry:
    procedure_id: str
    use: str
    effect: str | None = None
    contribution: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class FeedbackItem:
    """One scalar-shaped feedback object: the scalar call itself, or one batch item."""

    retrieval_id: str
    memory_feedback: list[MemoryEntry] = field(default_factory=list)
    procedure_feedback: list[ProcedureEntry] = field(default_factory=list)
    retrieval_quality: str | None = None
    missing: list[str] = field(default_factory=list)
    coverage: str = "partial"
