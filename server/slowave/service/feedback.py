"""Feedback: append assessments of exposed targets to the ledger (seed; behaviour §8, 10, 12).

Each scalar call or batch item is one transaction holding the retrieval's lock, so the rows of one
retrieval event have a single ledger order, and "first accepted explicit row" is well defined.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from slowave.domain.assessment_effects import memory_effect
from slowave.domain.coverage import apply_coverage
from slowave.domain.errors import DomainError, RetrievalNotFound
from slowave.domain.feedback_authorization import (
    Rejection,
    ReplacementState,
    incomplete_coverage,
    memory_entry_rejection,
    procedure_entry_rejection,
)
from slowave.domain.feedback_entries import FeedbackItem, MemoryEntry, ProcedureEntry
from slowave.domain.identifiers import memory_number, new_feedback_event_id
from slowave.domain.learning import MemoryEvidence, applied_bucket, learned_for_cue, procedure_counts
from slowave.domain.session_state import SessionState
from slowave.service.commands import FeedbackCommand
from slowave.service.context import ServiceContext
from slowave.service.knowledge_gaps import record_missing
from slowave.service.learned import memory_evidence
from slowave.service.messages import message
from slowave.storage.unit_of_work import Row, UnitOfWork
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res

log = logging.getLogger(__name__)


def feedback(ctx: ServiceContext, tenant: str, cmd: FeedbackCommand) -> list[pb.FeedbackRecord | res.ItemError]:
    if not cmd.batch:
        item = cmd.items[0]
        assert isinstance(item, FeedbackItem)
        with ctx.db.transaction() as uow:
            retrieval = uow.retrievals.header(tenant, item.retrieval_id, lock=True)
            if retrieval is None:
                raise RetrievalNotFound(f"retrieval {item.retrieval_id} not found")
            return [record_item(uow, tenant, retrieval, item, ctx.clock.now())]
    return [_batch_item(ctx, tenant, item) for item in cmd.items]


def _batch_item(
    ctx: ServiceContext, tenant: str, item: FeedbackItem | res.ItemError
) -> pb.FeedbackRecord | res.ItemError:
    """Items are processed in order, each in its own transaction; a failure fails that item only."""
    if isinstance(item, res.ItemError):
        return item
    try:
        with ctx.db.transaction() as uow:
            retrieval = uow.retrievals.header(tenant, item.retrieval_id, lock=True)
            if retrieval is None:
                return res.ItemError(
                    code="not_found", message=f"retrieval {item.retrieval_id} not found", retryable=False
                )
            return record_item(uow, tenant, retrieval, item, ctx.clock.now())
    except DomainError as exc:
        return res.ItemError(code=exc.code, message=exc.message, retryable=exc.retryable)
    except Exception:
        log.exception("feedback batch item failed")
        return res.ItemError(code="internal_error", message="the item could not be recorded; retry it", retryable=True)


@dataclass
class _Call:
    """What one call (or batch item) has done so far, to build its FeedbackRecord."""

    cue: int | None  # the retrieval's cue: `applied` judges learned(m, q) for it (behaviour §12.1)
    cue_terms: frozenset[str]
    accepted_explicit: list[str] = field(default_factory=list)
    rejected: list[pb.RejectedTarget] = field(default_factory=list)
    accepted_now: set[tuple[str, str]] = field(default_factory=set)
    # memory id -> its evidence at the call's start, and the units this call added under the cue
    evidence_before: dict[str, MemoryEvidence] = field(default_factory=dict)
    units_added: dict[str, int] = field(default_factory=dict)
    retired: list[str] = field(default_factory=list)
    replacements: list[str] = field(default_factory=list)


def record_item(uow: UnitOfWork, tenant: str, retrieval: Row, item: FeedbackItem, now: datetime) -> pb.FeedbackRecord:
    session = uow.sessions.get(tenant, retrieval.session_id)
    if session is not None and session.state == SessionState.OPEN:
        uow.sessions.touch(session.id, now)
    exposures = uow.retrievals.exposures([retrieval.id])
    exposure = [(e.target_kind, e.target_id) for e in exposures]
    exposed = set(exposure)
    effective = {(e.target_kind, e.target_id): e.effective_seq for e in exposures}
    covered_before = {(e.target_kind, e.target_id) for e in exposures if e.covered}
    call = _Call(retrieval.cue_number, uow.cues.terms(retrieval.cue_number))
    row = _RowWriter(uow, tenant, retrieval, now)

    for entry in item.memory_feedback:
        target = ("memory", entry.memory_id)
        rejection = memory_entry_rejection(
            entry,
            exposed=target in exposed,
            retrieval_scope=retrieval.scope,
            lookup_replacement=lambda rid: _replacement_state(uow, tenant, rid),
        )
        if rejection:
            row.rejected("memory", entry.memory_id, rejection, _memory_fields(entry))
            call.rejected.append(_rejected("memory", entry.memory_id, rejection))
            continue
        _accept_memory_entry(uow, tenant, row, call, entry, effective, now)
        call.accepted_now.add(target)

    for entry in item.procedure_feedback:
        target = ("procedure", entry.procedure_id)
        rejection = procedure_entry_rejection(entry, exposed=target in exposed)
        if rejection:
            row.rejected("procedure", entry.procedure_id, rejection, _procedure_fields(entry))
            call.rejected.append(_rejected("procedure", entry.procedure_id, rejection))
            continue
        _accept_procedure_entry(uow, tenant, row, call, entry, effective)
        call.accepted_now.add(target)

    mentioned = {e.memory_id for e in item.memory_feedback} | {e.procedure_id for e in item.procedure_feedback}
    result = apply_coverage(exposure, covered_before, mentioned, call.accepted_now, item.coverage)
    implicit_ids = row.implicitly_accepted(result.implicit)
    uow.retrievals.cover_all(retrieval.id, result.implicit)

    level = {"requested_coverage": item.coverage, "retrieval_quality": item.retrieval_quality, "missing": item.missing}
    accepted_ids = call.accepted_explicit + implicit_ids
    if result.declaration_accepted:
        level_id, recorded_at = row.accepted("retrieval", retrieval.id, level), now
        accepted_ids.append(level_id)
        record_missing(uow, tenant, retrieval.scope, item.missing, now)
    else:
        rejection = incomplete_coverage()
        row.rejected("retrieval", retrieval.id, rejection, level)
        call.rejected.append(_rejected("retrieval", retrieval.id, rejection))
        recorded_at = now

    return message(
        pb.FeedbackRecord,
        retrieval_id=retrieval.id,
        session_id=retrieval.session_id,
        requested_coverage=item.coverage,
        coverage="complete" if item.coverage == "complete" and result.declaration_accepted else "partial",
        accepted_event_ids=accepted_ids,
        rejected=call.rejected,
        implicitly_assessed=_target_ids(result.implicit),
        outstanding=_target_ids(result.outstanding),
        applied=_applied(call),
        retrieval_quality=item.retrieval_quality,
        missing=list(item.missing),
        recorded_at=recorded_at,
    )


def _accept_memory_entry(
    uow: UnitOfWork, tenant: str, row: _RowWriter, call: _Call, entry: MemoryEntry, effective: dict, now: datetime
) -> None:
    target = ("memory", entry.memory_id)
    number = memory_number(entry.memory_id)
    memory = uow.memories.get(tenant, number, lock=True) if number is not None else None
    if entry.memory_id not in call.evidence_before and memory is not None:
        call.evidence_before[entry.memory_id] = memory_evidence(uow, memory, call.cue)
    first = effective.get(target) is None
    seq_id = row.accepted("memory", entry.memory_id, _memory_fields(entry), effective=first)
    call.accepted_explicit.append(seq_id)
    if first:
        effective[target] = row.last_seq
        uow.retrievals.cover(row.retrieval.id, "memory", entry.memory_id, effective_seq=row.last_seq)
    else:
        uow.retrievals.cover(row.retrieval.id, "memory", entry.memory_id)
    if memory is None:
        return
    effect = memory_effect(entry, effective=first, active=memory.status == "active", has_cue=call.cue is not None)
    if effect.learning_units:
        assert call.cue is not None
        uow.cues.add_units(memory.number, call.cue, effect.learning_units, row.last_seq)
        call.units_added[entry.memory_id] = call.units_added.get(entry.memory_id, 0) + effect.learning_units
    if effect.retirement is not None:
        retirement = effect.retirement
        replacement = retirement.replacement_memory_id
        uow.memories.retire(
            memory.number,
            stale_reason=retirement.stale_reason,
            superseded_by=memory_number(replacement) if replacement else None,
            now=now,
            retired_seq=row.last_seq,
        )
        call.retired.append(entry.memory_id)
        if retirement.supersedes:
            call.replacements.append(f"{entry.memory_id}->{replacement}")


def _accept_procedure_entry(
    uow: UnitOfWork, tenant: str, row: _RowWriter, call: _Call, entry: ProcedureEntry, effective: dict
) -> None:
    target = ("procedure", entry.procedure_id)
    first = effective.get(target) is None
    call.accepted_explicit.append(
        row.accepted("procedure", entry.procedure_id, _procedure_fields(entry), effective=first)
    )
    if first:
        effective[target] = row.last_seq
        uow.retrievals.cover(row.retrieval.id, "procedure", entry.procedure_id, effective_seq=row.last_seq)
        procedure = uow.procedures.get(tenant, entry.procedure_id, lock=True)
        if procedure is not None:
            counts = procedure_counts(entry.use, entry.effect)
            uow.procedures.update(procedure.id, **{f"ev_{c}": getattr(procedure, f"ev_{c}") + 1 for c in counts})
    else:
        uow.retrievals.cover(row.retrieval.id, "procedure", entry.procedure_id)


def _applied(call: _Call) -> pb.Applied:
    """Each assessed memory's learned(m, q) before and after the call, judged. The call changed
    only the memory's sum under q itself (what it added is kept in `units_added`), so the value
    after is computed from the evidence read before, not read again."""
    applied = pb.Applied(retired=list(call.retired), replacements=list(call.replacements))
    for mid, evidence in call.evidence_before.items():
        if mid in call.retired:
            continue
        before = learned_for_cue(evidence, call.cue_terms)
        after = learned_for_cue(evidence.with_own_units(call.units_added.get(mid, 0)), call.cue_terms)
        getattr(applied, applied_bucket(before, after)).append(mid)
    return applied


def _replacement_state(uow: UnitOfWork, tenant: str, replacement_id: str) -> ReplacementState | None:
    number = memory_number(replacement_id)
    row = uow.memories.get(tenant, number) if number is not None else None
    return ReplacementState(row.scope, row.status == "active") if row is not None else None


def _memory_fields(e: MemoryEntry) -> dict:
    return {
        "assessment": e.assessment,
        "stale_reason": e.stale_reason,
        "replacement_memory_id": e.replacement_memory_id,
        "reason": e.reason,
        "relevance": e.relevance,
        "effect": e.effect,
    }


def _procedure_fields(e: ProcedureEntry) -> dict:
    return {"use": e.use, "effect": e.effect, "contribution": e.contribution, "reason": e.reason}


def _rejected(kind: str, target_id: str, rejection: Rejection) -> pb.RejectedTarget:
    return message(
        pb.RejectedTarget,
        target_kind=kind,
        target_id=target_id,
        reason=rejection.reason,
        field=rejection.field,
        hint=rejection.hint,
    )


def _target_ids(targets: list[tuple[str, str]]) -> pb.TargetIds:
    return pb.TargetIds(
        memory_ids=[i for k, i in targets if k == "memory"], procedure_ids=[i for k, i in targets if k == "procedure"]
    )


class _RowWriter:
    """Appends ledger rows for one call; each accepted row references its pair's previous one."""

    def __init__(self, uow: UnitOfWork, tenant: str, retrieval: Row, now: datetime) -> None:
        self.uow, self.tenant, self.retrieval, self.now = uow, tenant, retrieval, now
        self.last_seq: int | None = None
        # Each target's latest accepted row in the retrieval: read once, then kept as rows are appended
        # (a call appends several; reading it per row was a statement each). Targets whose latest
        # row was appended without its seq coming back (`implicitly_accepted`) are read again.
        self._latest: dict[tuple[str, str], int] | None = None
        self._unknown: set[tuple[str, str]] = set()

    def _previous(self, target: tuple[str, str]) -> int | None:
        if self._latest is None or target in self._unknown:
            self._latest, self._unknown = self.uow.ledger.last_accepted_seqs(self.retrieval.id), set()
        return self._latest.get(target)

    def _append(self, kind: str, target_id: str, accepted: bool, fields: dict, **flags) -> str:
        event_id = new_feedback_event_id()
        previous = self._previous((kind, target_id)) if accepted else None
        self.last_seq = self.uow.ledger.append(
            event_id=event_id,
            tenant=self.tenant,
            retrieval_id=self.retrieval.id,
            session_id=self.retrieval.session_id,
            target_kind=kind,
            target_id=target_id,
            accepted=accepted,
            previous_accepted_seq=previous,
            recorded_at=self.now,
            **fields,
            **flags,
        )
        if accepted and self._latest is not None:
            self._latest[(kind, target_id)] = self.last_seq
        return event_id

    def accepted(
        self, kind: str, target_id: str, fields: dict, *, implicit: bool = False, effective: bool = False
    ) -> str:
        return self._append(kind, target_id, True, fields, implicit=implicit, effective=effective)

    def implicitly_accepted(self, targets: list[tuple[str, str]]) -> list[str]:
        """One `not_used` row per target a complete declaration covers, appended in one statement."""
        if not targets:
            return []
        rows = [
            dict(
                event_id=new_feedback_event_id(),
                tenant=self.tenant,
                retrieval_id=self.retrieval.id,
                session_id=self.retrieval.session_id,
                target_kind=kind,
                target_id=target_id,
                accepted=True,
                previous_accepted_seq=self._previous((kind, target_id)),
                recorded_at=self.now,
                implicit=True,
                assessment="not_used" if kind == "memory" else None,
                use=None if kind == "memory" else "not_used",
                effect=None if kind == "memory" else "unknown",
            )
            for kind, target_id in targets
        ]
        self.uow.ledger.append_many(rows)
        self._unknown.update(targets)
        return [row["event_id"] for row in rows]

    def rejected(self, kind: str, target_id: str, rejection: Rejection, fields: dict) -> str:
        return self._append(
            kind, target_id, False, fields, rejection_reason=rejection.reason, rejection_field=rejection.field
        )
