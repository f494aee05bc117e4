"""Recall: a fresh lookup (new retrieval event) or the next page of an earlier one (behaviour §7)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from slowave.domain.errors import CursorNotFound, DomainError, InvalidInput
from slowave.domain.identifiers import new_recall_id
from slowave.domain.relevance import Cue
from slowave.domain.retrieval import Catalog
from slowave.domain.session_state import SessionState
from slowave.domain.structs import merge_task_context, normalize_task_context
from slowave.service.commands import RecallCommand
from slowave.service.context import ServiceContext
from slowave.service.messages import message
from slowave.service.retrieval import (
    Page,
    build_catalog,
    cue_number,
    cue_warnings,
    evidence_records,
    known_cue_number,
    new_retrieval,
    policy_version,
    serve_page,
)
from slowave.service.sessions import open_session_in_scope
from slowave.storage.unit_of_work import Row
from slowave.v1 import memory_service_pb2 as pb


def recall(ctx: ServiceContext, tenant: str, cmd: RecallCommand) -> pb.RecallResponse:
    limits = ctx.settings.limits
    cue = Cue(cmd.query, cmd.semantic_context) if cmd.query is not None else None
    query_vector = ctx.semantic.embed_query(cue.text) if ctx.semantic and cue else None  # outside the transaction
    ranked = _rank_in_snapshot(ctx, tenant, cmd, cue, query_vector) if cue is not None else None
    now = ctx.clock.now()
    refusal: DomainError | None
    with ctx.db.transaction() as uow:
        session, refusal = open_session_in_scope(uow, tenant, cmd.session_id, cmd.scope, now, recall=True)
        if refusal is None and cmd.continue_from is not None:
            cursor = uow.retrievals.get_cursor(cmd.continue_from)
            retrieval = uow.retrievals.get(tenant, cursor.retrieval_id) if cursor else None
            if retrieval is None or retrieval.session_id != session.id:
                refusal = CursorNotFound(f"cursor {cmd.continue_from} was not issued for this session")
            else:
                served = serve_page(uow, tenant, retrieval, cursor.memory_offset, cursor.procedure_offset, limits)
                return _response(session.id, served.page, [], "references", False, served.page.warnings)
        if refusal is None:
            context, violations = _task_context(session, cmd)
            if violations:
                refusal = InvalidInput(violations)
            elif cmd.task_context is not None:
                uow.sessions.update(session.id, task_context=context)
        if refusal is None:
            assert cue is not None
            cue_id = cue_number(uow, tenant, cue)
            if ranked is not None and ranked.context == context:
                catalog, cue_notes = ranked.catalog, ranked.warnings
            else:  # the session's context changed since the snapshot (or it had none): rank here
                catalog = build_catalog(
                    uow, tenant, session.scope, cue, cue_id, context, limits, ctx.semantic, query_vector
                )
                cue_notes = cue_warnings(uow, tenant, session.scope, cue)
            retrieval = new_retrieval(
                uow,
                new_recall_id(),
                tenant,
                session.id,
                "recall",
                session.scope,
                now,
                cmd.page_size,
                policy_version(ctx.semantic, limits),
                catalog,
                cue_id,
            )
            uow.sessions.add_events(session.id, 1)  # the recall event
            served = serve_page(uow, tenant, retrieval, 0, 0, limits, fresh=True)
            evidence, truncated = evidence_records(uow, served.memory_numbers, cmd.evidence_mode == "full")
            warnings = cue_notes + served.page.warnings
            return _response(session.id, served.page, evidence, cmd.evidence_mode, truncated, warnings)
    raise refusal


@dataclass(frozen=True)
class _Ranked:
    context: dict | None
    catalog: Catalog
    warnings: list


def _task_context(session: Row, cmd: RecallCommand) -> tuple[dict | None, list]:
    """The session's task context with the request's merged in (behaviour §3.5), and its violations."""
    if cmd.task_context is None:
        return session.task_context, []
    violations: list = []
    merged = normalize_task_context(
        violations, "task_context", merge_task_context(session.task_context, cmd.task_context)
    )
    return merged, violations


def _rank_in_snapshot(
    ctx: ServiceContext, tenant: str, cmd: RecallCommand, cue: Cue, query_vector: Any
) -> _Ranked | None:
    """A new lookup's catalog, ranked in a read-only snapshot beside SQLite's writer (as Activate's).
    Only for a request that looks acceptable; the write phase checks it again and decides."""
    if cmd.continue_from is not None:
        return None
    with ctx.db.transaction(read_only=True) as view:
        session = view.sessions.get(tenant, cmd.session_id)
        if session is None or session.state != SessionState.OPEN or session.scope != cmd.scope:
            return None
        context, violations = _task_context(session, cmd)
        if violations:
            return None
        limits = ctx.settings.limits
        catalog = build_catalog(
            view,
            tenant,
            session.scope,
            cue,
            known_cue_number(view, tenant, cue),
            context,
            limits,
            ctx.semantic,
            query_vector,
        )
        return _Ranked(context, catalog, cue_warnings(view, tenant, session.scope, cue))


def _response(
    session_id: str, page: Page, evidence: list, mode: str, truncated: bool, warnings: list
) -> pb.RecallResponse:
    return message(
        pb.RecallResponse,
        **page.response_fields(),
        session_id=session_id,
        evidence=evidence,
        evidence_mode=mode,
        evidence_truncated=truncated,
        warnings=warnings,
    )
