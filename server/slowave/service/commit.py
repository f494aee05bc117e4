"""Commit: close the task, or update an ended session (seed; behaviour §2.5, 9, 11)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from slowave.domain.commit_gate import ExposedTarget, RetrievalExposure, enforce_commit_gate
from slowave.domain.errors import IncompleteFeedback, SessionNotFound
from slowave.domain.identifiers import procedure_id as make_procedure_id
from slowave.domain.procedure_capture import applicability_text
from slowave.domain.session_note import session_note
from slowave.domain.session_state import SessionState
from slowave.domain.text import normalize_claim
from slowave.domain.trajectory_filter import filter_lifecycle
from slowave.service.commands import CommitCommand, TrajectoryStep
from slowave.service.context import ServiceContext
from slowave.service.episodes import form_episodes
from slowave.service.messages import message
from slowave.service.sessions import end_session
from slowave.storage.unit_of_work import Row, UnitOfWork
from slowave.v1 import memory_service_pb2 as pb


def commit(ctx: ServiceContext, tenant: str, cmd: CommitCommand) -> pb.CommitResponse:
    now = ctx.clock.now()
    refusal: IncompleteFeedback | None = None
    with ctx.db.transaction() as uow:
        # The session lock serialises gate check plus close, reaping and concurrent commits.
        session = uow.sessions.get(tenant, cmd.session_id, lock=True)
        if session is None:
            raise SessionNotFound(f"session {cmd.session_id} not found")
        if session.state == SessionState.OPEN:
            uow.sessions.touch(session.id, now)
        try:
            enforce_commit_gate(session_exposure(uow, session.id))
        except IncompleteFeedback as exc:
            refusal = exc  # raised after the activity touch is committed
        if refusal is None:
            kept, filtered = filter_lifecycle([s.summary for s in cmd.trajectory])
            steps = [cmd.trajectory[i] for i in kept]
            # Each path returns the response fields in which a close and an update differ.
            if session.state == SessionState.OPEN:
                done = _close(uow, tenant, session, cmd, steps, now)
            else:
                done = _update(uow, tenant, session, cmd, steps, now)
            after = uow.sessions.get(tenant, session.id)
            response = message(
                pb.CommitResponse,
                session_id=session.id,
                committed=True,
                outcome=cmd.outcome,
                verification_status=cmd.verification_status,
                feedback_status="complete",
                trajectory_lifecycle_filtered=filtered or None,
                session_note=session_note(after.session_events, after.recall_calls),
                procedure_id=after.procedure_id,
                **done,
            )
    if refusal is not None:
        raise refusal
    return response


def session_exposure(uow: UnitOfWork, session_id: str) -> list[RetrievalExposure]:
    retrievals = uow.retrievals.of_session(session_id)
    by_retrieval: dict[str, list[ExposedTarget]] = {x.id: [] for x in retrievals}
    for e in uow.retrievals.exposures(list(by_retrieval)):
        by_retrieval[e.retrieval_id].append(ExposedTarget(e.target_kind, e.target_id, e.covered))
    return [RetrievalExposure(x.id, by_retrieval[x.id]) for x in retrievals]


def _completion(cmd: CommitCommand) -> dict:
    return {
        "final_goal": cmd.final_goal,
        "outcome": cmd.outcome,
        "outcome_summary": cmd.outcome_summary,
        "verification": {
            "status": cmd.verification_status,
            "summary": cmd.verification_summary,
            "evidence_refs": list(cmd.evidence_refs),
        },
        "feedback_status": "complete",
    }


def _close(
    uow: UnitOfWork, tenant: str, session: Row, cmd: CommitCommand, steps: list[TrajectoryStep], now: datetime
) -> dict[str, Any]:
    _store_trajectory(uow, tenant, session.id, steps, now)
    values = _completion(cmd)
    values.update(
        state=SessionState.CLOSED,
        ended_at=now,
        completion_recorded=True,
        trajectory_stored=len(steps) if steps else None,
    )
    if cmd.procedure is not None:
        values["procedure_id"] = _store_procedure(uow, tenant, session, cmd, now)
    end_session(uow, session.id, **values)
    uow.sessions.add_events(session.id, 1 + len(steps))  # completion record + stored entries
    formed = form_episodes(uow, tenant, session.id, [e.number for e in uow.events.of_session(session.id)], now)
    uow.consolidation.enqueue(tenant, session.id, now)
    return {"operation": "closed", "episodes_formed": formed}


def _update(
    uow: UnitOfWork, tenant: str, session: Row, cmd: CommitCommand, steps: list[TrajectoryStep], now: datetime
) -> dict[str, Any]:
    values = _completion(cmd)
    formed, ignored = 0, None
    if session.state == SessionState.REAPED and session.trajectory_stored is None and steps:
        events = _store_trajectory(uow, tenant, session.id, steps, now)
        formed = form_episodes(uow, tenant, session.id, events, now)
        values["trajectory_stored"] = len(steps)
        uow.sessions.add_events(session.id, len(steps))
    elif steps:
        ignored = len(steps)
    if not session.completion_recorded:
        values["completion_recorded"] = True
        uow.sessions.add_events(session.id, 1)
    if cmd.procedure is not None:
        values["procedure_id"] = _store_procedure(uow, tenant, session, cmd, now)
    uow.sessions.update(session.id, **values)
    summary_changed = session.outcome_summary is None or normalize_claim(session.outcome_summary) != normalize_claim(
        cmd.outcome_summary
    )
    if formed or summary_changed:
        uow.consolidation.enqueue(tenant, session.id, now)
    return {"operation": "updated", "episodes_formed": formed, "already_ended": True, "trajectory_ignored": ignored}


def _store_trajectory(
    uow: UnitOfWork, tenant: str, session_id: str, steps: list[TrajectoryStep], now: datetime
) -> list[int]:
    """Stored as agent-reported source events, in order, with position, kind, status and summary."""
    return [
        uow.events.insert(
            tenant=tenant,
            session_id=session_id,
            kind="trajectory",
            content=step.summary,
            recorded_at=now,
            position=i,
            entry_kind=step.kind,
            entry_status=step.status,
        )
        for i, step in enumerate(steps)
    ]


def _store_procedure(uow: UnitOfWork, tenant: str, session: Row, cmd: CommitCommand, now: datetime) -> str:
    """`proc_<session_id>`: created, or replaced in place keeping its feedback history (behaviour §2.5)."""
    proc = cmd.procedure
    assert proc is not None
    pid = make_procedure_id(session.id)
    values = dict(
        goal=proc.goal,
        summary=proc.summary,
        context=proc.context,
        steps=proc.steps,
        caveats=proc.caveats,
        applicability_text=applicability_text(proc.goal, session.task),
        updated_at=now,
    )
    if uow.procedures.get(tenant, pid, lock=True) is None:
        uow.procedures.insert(
            id=pid, tenant=tenant, scope=session.scope, session_id=session.id, created_at=now, **values
        )
    else:
        uow.procedures.update(pid, **values)
    return pid
