"""What the use cases return. Field names and enum words match the protobuf contract, so the API
layer converts them generically (slowave.api.convert); enum values are lowercase value names."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from slowave.domain.learning import ProcedureEvidence


@dataclass
class RankingSignals:
    relevance: float
    learned: float
    score: float


@dataclass
class Excerpt:
    source_chars: int
    shown_chars: int


@dataclass
class Provenance:
    source_kind: str
    source_event_id: str | None = None
    redirected_from: str | None = None
    excerpt: Excerpt | None = None
    source_session_id: str | None = None
    source_goal: str | None = None
    source_outcome: str | None = None
    source_verification_status: str | None = None


@dataclass
class Memory:
    memory_id: str
    content: str
    type: str
    pathway: str
    ranking: RankingSignals
    provenance: Provenance
    created_at: datetime | None = None
    occurred_at: datetime | None = None


@dataclass
class ProcedureContribution:
    effect: str
    contribution: str
    recorded_at: datetime
    outcome: str | None = None


@dataclass
class Procedure:
    procedure_id: str
    goal: str
    summary: str
    context: dict
    steps: list[str]
    caveats: list[str]
    outcome: str
    outcome_summary: str
    verification_status: str
    created_at: datetime
    evidence: ProcedureEvidence
    contributions: list[ProcedureContribution]
    ranking: RankingSignals


@dataclass
class RetrievalWarning:
    code: str
    message: str


@dataclass
class AccessibleField:
    extra_candidates: int
    kinds: list[str]
    approx_extra_tokens: int


@dataclass
class EvidenceRecord:
    evidence_id: str
    source_kind: str
    recorded_at: datetime
    occurred_at: datetime | None = None
    content: str | None = None
    truncated: bool = False


@dataclass
class Page:
    """One page of a frozen catalog, as Activate and Recall return it."""

    retrieval_id: str
    retrieval_policy_version: str
    relevant_total: int
    catalog_truncated: bool
    memories: list[Memory]
    procedures: list[Procedure]
    more_available: bool
    continue_from: str | None
    accessible_field: AccessibleField | None
    warnings: list[RetrievalWarning] = field(default_factory=list)


@dataclass
class ActivateResponse:
    retrieval_id: str
    session_id: str
    memory_state: str
    memories: list[Memory]
    procedures: list[Procedure]
    warnings: list[RetrievalWarning]
    continuity_id: str
    continuity_state: str
    retrieval_policy_version: str
    relevant_total: int
    catalog_truncated: bool
    more_available: bool
    continue_from: str | None
    accessible_field: AccessibleField | None


@dataclass
class RecallResponse:
    retrieval_id: str
    session_id: str
    retrieval_policy_version: str
    relevant_total: int
    catalog_truncated: bool
    memories: list[Memory]
    procedures: list[Procedure]
    more_available: bool
    continue_from: str | None
    accessible_field: AccessibleField | None
    evidence: list[EvidenceRecord]
    evidence_mode: str
    evidence_truncated: bool
    warnings: list[RetrievalWarning]


@dataclass
class ItemError:
    code: str
    message: str
    retryable: bool


@dataclass
class RememberResult:
    stored: bool
    memory_id: str
    disposition: str
    type: str
    scope: str
    source_event_id: str


@dataclass
class TargetIds:
    memory_ids: list[str] = field(default_factory=list)
    procedure_ids: list[str] = field(default_factory=list)


@dataclass
class RejectedTarget:
    target_kind: str
    target_id: str
    reason: str
    field: str
    hint: str


@dataclass
class Applied:
    strengthened: list[str] = field(default_factory=list)
    weakened: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    retired: list[str] = field(default_factory=list)
    replacements: list[str] = field(default_factory=list)


@dataclass
class FeedbackRecord:
    retrieval_id: str
    session_id: str
    requested_coverage: str
    coverage: str
    accepted_event_ids: list[str]
    rejected: list[RejectedTarget]
    implicitly_assessed: TargetIds
    outstanding: TargetIds
    applied: Applied
    retrieval_quality: str | None
    missing: list[str]
    recorded_at: datetime


@dataclass
class CommitResponse:
    session_id: str
    committed: bool
    operation: str
    outcome: str
    verification_status: str
    feedback_status: str
    episodes_formed: int
    trajectory_lifecycle_filtered: int | None = None
    session_note: str | None = None
    already_ended: bool | None = None
    trajectory_ignored: int | None = None
    procedure_id: str | None = None
