"""What the RPCs return, as frozen dataclasses.

Each class mirrors one response message of `slowave.v1` field for field, with the same names, so the
contract's documentation of a field is the documentation of the attribute. Conventions:

* enums are the seed's lowercase names without prefix (`"cold_start"`, `"created"`, `"closed"`);
* lists are tuples; `google.protobuf.Struct` is a dict; Timestamps are UTC-aware datetimes;
* proto `optional` fields (and messages the service may omit) are None when unset.

`as_json` renders any result the way the contract's JSON bridge does (unset optionals omitted).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from datetime import datetime
from typing import Any, TypeVar, Union

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from slowave_client.values import enum_name, format_time, from_struct, from_timestamp

R = TypeVar("R")


# ------------------------------------------------------------------------------------ retrieval


@dataclasses.dataclass(frozen=True)
class RankingSignals:
    relevance: float
    learned: float
    score: float


@dataclasses.dataclass(frozen=True)
class Excerpt:
    source_chars: int
    shown_chars: int


@dataclasses.dataclass(frozen=True)
class Provenance:
    source_kind: str
    source_event_id: str | None = None
    redirected_from: str | None = None
    excerpt: Excerpt | None = None
    source_session_id: str | None = None
    source_goal: str | None = None
    source_outcome: str | None = None
    source_verification_status: str | None = None


@dataclasses.dataclass(frozen=True)
class Memory:
    memory_id: str
    content: str
    type: str
    pathway: str
    ranking: RankingSignals
    provenance: Provenance
    created_at: datetime | None = None
    """When the service stored it (UTC)."""
    occurred_at: datetime | None = None
    """When what it describes happened, if the claim said (UTC)."""


@dataclasses.dataclass(frozen=True)
class ProcedureEvidence:
    used: int
    not_used: int
    unassessable: int
    helped: int
    no_effect: int
    harmed: int
    unknown: int


@dataclasses.dataclass(frozen=True)
class ProcedureContribution:
    effect: str
    contribution: str
    recorded_at: datetime | None
    outcome: str | None = None


@dataclasses.dataclass(frozen=True)
class Procedure:
    procedure_id: str
    goal: str
    summary: str
    context: dict[str, Any]
    steps: tuple[str, ...]
    caveats: tuple[str, ...]
    outcome: str
    outcome_summary: str
    verification_status: str
    created_at: datetime | None
    evidence: ProcedureEvidence
    contributions: tuple[ProcedureContribution, ...]
    ranking: RankingSignals


@dataclasses.dataclass(frozen=True)
class RetrievalWarning:
    code: str
    message: str


@dataclasses.dataclass(frozen=True)
class AccessibleField:
    extra_candidates: int
    kinds: tuple[str, ...]
    approx_extra_tokens: int


@dataclasses.dataclass(frozen=True)
class EvidenceRecord:
    evidence_id: str
    source_kind: str
    recorded_at: datetime | None
    occurred_at: datetime | None
    content: str | None
    truncated: bool


@dataclasses.dataclass(frozen=True)
class ActivateResult:
    """A new session and the first page of what fits its task. Everything in `memories` and
    `procedures` is exposed: give Feedback on `retrieval_id` before Commit."""

    retrieval_id: str
    session_id: str
    memory_state: str
    memories: tuple[Memory, ...]
    procedures: tuple[Procedure, ...]
    warnings: tuple[RetrievalWarning, ...]
    continuity_id: str
    continuity_state: str
    retrieval_policy_version: str
    relevant_total: int
    catalog_truncated: bool
    more_available: bool
    continue_from: str | None = None
    accessible_field: AccessibleField | None = None


@dataclasses.dataclass(frozen=True)
class RecallResult:
    retrieval_id: str
    session_id: str
    retrieval_policy_version: str
    relevant_total: int
    catalog_truncated: bool
    memories: tuple[Memory, ...]
    procedures: tuple[Procedure, ...]
    more_available: bool
    continue_from: str | None
    accessible_field: AccessibleField | None
    evidence: tuple[EvidenceRecord, ...]
    evidence_mode: str
    evidence_truncated: bool
    warnings: tuple[RetrievalWarning, ...]


# ------------------------------------------------------------------------------------- remember


@dataclasses.dataclass(frozen=True)
class ItemError:
    """A failed batch item; the call itself succeeded."""

    code: str
    message: str
    retryable: bool


@dataclasses.dataclass(frozen=True)
class RememberResult:
    stored: bool
    memory_id: str
    disposition: str
    type: str
    scope: str
    source_event_id: str
    # Flags only (nothing is retired): active memories of the scope that say nearly the same thing,
    # and those that look like an older version of this fact (retire them with `stale`/`superseded`).
    similar: tuple[str, ...] = ()
    possibly_supersedes: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class RememberItemResult:
    """One item of a batch Remember: exactly one of `data` and `error` is set."""

    index: int
    data: RememberResult | None = None
    error: ItemError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# ------------------------------------------------------------------------------------- feedback


@dataclasses.dataclass(frozen=True)
class TargetIds:
    memory_ids: tuple[str, ...]
    procedure_ids: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class RejectedTarget:
    target_kind: str
    target_id: str
    reason: str
    field: str
    hint: str


@dataclasses.dataclass(frozen=True)
class Applied:
    strengthened: tuple[str, ...]
    weakened: tuple[str, ...]
    unchanged: tuple[str, ...]
    retired: tuple[str, ...]
    replacements: tuple[str, ...]


@dataclasses.dataclass(frozen=True)
class FeedbackRecord:
    """The stored feedback of one call for one retrieval. An OK call may still have `rejected`
    entries: check them."""

    retrieval_id: str
    session_id: str
    requested_coverage: str
    coverage: str
    accepted_event_ids: tuple[str, ...]
    rejected: tuple[RejectedTarget, ...]
    implicitly_assessed: TargetIds
    outstanding: TargetIds
    applied: Applied
    retrieval_quality: str | None
    missing: tuple[str, ...]
    recorded_at: datetime | None


@dataclasses.dataclass(frozen=True)
class FeedbackItemResult:
    """One item of a batch Feedback: exactly one of `data` and `error` is set."""

    data: FeedbackRecord | None = None
    error: ItemError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


# --------------------------------------------------------------------------------------- commit


@dataclasses.dataclass(frozen=True)
class CommitResult:
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


# ----------------------------------------------------------------------------------- conversion


def from_message(cls: type[R], message: Message) -> R:
    """Builds result dataclass `cls` from the response message it mirrors.

    Conversion follows each field's descriptor (enum, Timestamp, Struct, nested message) and the
    dataclass's annotation (which nested class; whether unset means None).
    """
    hints = _hints(typing.cast(type, cls))
    fields = message.DESCRIPTOR.fields_by_name
    values = {f.name: _field(hints[f.name], fields[f.name], message) for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    return cls(**values)


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _field(hint: Any, fd: FieldDescriptor, message: Message) -> Any:
    raw = getattr(message, fd.name)
    if fd.is_repeated:
        return tuple(_single(hint, fd, item) for item in raw)
    if fd.has_presence and not message.HasField(fd.name) and _allows_none(hint):
        return None
    return _single(hint, fd, raw)


def _single(hint: Any, fd: FieldDescriptor, raw: Any) -> Any:
    if fd.enum_type is not None:
        return enum_name(fd.enum_type, raw)
    if fd.message_type is None:
        return raw
    if fd.message_type.full_name == "google.protobuf.Timestamp":
        return from_timestamp(raw)
    if fd.message_type.full_name == "google.protobuf.Struct":
        return from_struct(raw)
    return from_message(_dataclass_in(hint), raw)


def _allows_none(hint: Any) -> bool:
    return typing.get_origin(hint) in (Union, types.UnionType) and type(None) in typing.get_args(hint)


def _dataclass_in(hint: Any) -> type:
    """`Memory` from `tuple[Memory, ...]` or `Excerpt | None`."""
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint
    for arg in typing.get_args(hint):
        if arg is not Ellipsis and arg is not type(None):
            try:
                return _dataclass_in(arg)
            except TypeError:
                continue
    raise TypeError(f"no result dataclass in {hint!r}")


def as_json(value: Any) -> Any:
    """A JSON-ready rendering of a result (or a list of them): unset optionals omitted, times in
    RFC 3339 UTC, tuples as lists."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        rendered = {
            f.name: as_json(getattr(value, f.name))
            for f in dataclasses.fields(value)
            if getattr(value, f.name) is not None
        }
        if isinstance(value, (RememberItemResult, FeedbackItemResult)):
            # The seed's batch envelope: each item says `ok` itself.
            rendered = {"ok": value.ok, **rendered}
        return rendered
    if isinstance(value, (list, tuple)):
        return [as_json(v) for v in value]
    if isinstance(value, dict):
        return {k: as_json(v) for k, v in value.items()}
    if isinstance(value, datetime):
        return format_time(value)
    return value
