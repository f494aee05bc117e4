"""Activate: open a session for a task and return the first page of what fits it (behaviour §5)."""

from __future__ import annotations

from slowave.domain.errors import InvalidInput, ScopeMismatch, Violation
from slowave.domain.identifiers import new_activation_id, new_continuity_id, new_session_id
from slowave.domain.relevance import Cue
from slowave.domain.session_state import SessionState
from slowave.service.commands import ActivateCommand
from slowave.service.context import ServiceContext
from slowave.service.messages import message
from slowave.service.retrieval import (
    build_catalog,
    cue_number,
    cue_warnings,
    fragmentation_warning,
    known_cue_number,
    new_retrieval,
    policy_version,
    serve_page,
)
from slowave.v1 import memory_service_pb2 as pb


def activate(ctx: ServiceContext, tenant: str, cmd: ActivateCommand) -> pb.ActivateResponse:
    """All-or-nothing: a failed Activate leaves no session, retrieval, catalog or token behind."""
    limits = ctx.settings.limits
    cue = Cue(cmd.task, cmd.semantic_context)
    query_vector = ctx.semantic.embed_query(cue.text) if ctx.semantic else None  # never inside a transaction
    # The catalog is read in a snapshot that does not take SQLite's writer lock, so server processes
    # rank in parallel; only the session, the retrieval and its first page are written under it.
    # The catalog is then as of the snapshot: a claim stored in between is not in it, as if the
    # Activate had come first.
    with ctx.db.transaction(read_only=True) as view:
        cold = not view.memories.scope_has_active(tenant, cmd.scope)
        catalog = build_catalog(
            view,
            tenant,
            cmd.scope,
            cue,
            known_cue_number(view, tenant, cue),
            cmd.task_context,
            limits,
            ctx.semantic,
            query_vector,
        )
        warnings = (fragmentation_warning(view, tenant, cmd.scope) if cold else []) + cue_warnings(
            view, tenant, cmd.scope, cue
        )
    now = ctx.clock.now()
    with ctx.db.transaction() as uow:
        if cmd.continuity_id is not None:
            token = uow.sessions.get_continuity(tenant, cmd.continuity_id)
            if token is None:
                raise InvalidInput([Violation("continuity_id", "unknown continuity token")])
            if token.scope != cmd.scope:
                raise ScopeMismatch(f"continuity token was issued for scope {token.scope!r}")
            uow.sessions.touch_continuity(token.id, now)
            continuity_id, continuity_state = token.id, "continued"
        else:
            continuity_id, continuity_state = new_continuity_id(), "started"
            uow.sessions.insert_continuity(
                id=continuity_id, tenant=tenant, scope=cmd.scope, created_at=now, last_seen_at=now
            )

        session_id = new_session_id()
        uow.sessions.insert(
            id=session_id,
            tenant=tenant,
            scope=cmd.scope,
            task=cmd.task,
            initial_goal=cmd.initial_goal,
            task_context=cmd.task_context,
            continuity_id=continuity_id,
            state=SessionState.OPEN,
            feedback_status="pending",
            started_at=now,
            last_activity_at=now,
            recall_calls=0,
            session_events=1,  # the activation event
            completion_recorded=False,
        )
        retrieval_id = new_activation_id()
        retrieval = new_retrieval(
            uow,
            retrieval_id,
            tenant,
            session_id,
            "activation",
            cmd.scope,
            now,
            cmd.page_size,
            policy_version(ctx.semantic, limits),
            catalog,
            cue_number(uow, tenant, cue),
        )
        page = serve_page(uow, tenant, retrieval, 0, 0, limits, fresh=True).page
        warnings += page.warnings
    return message(
        pb.ActivateResponse,
        **page.response_fields(),
        session_id=session_id,
        memory_state="cold_start" if cold else "available",
        warnings=warnings,
        continuity_id=continuity_id,
        continuity_state=continuity_state,
    )
