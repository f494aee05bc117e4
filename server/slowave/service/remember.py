"""Remember: store durable, standalone claims in the session's scope (spec 6)."""
from __future__ import annotations

import logging
from datetime import datetime

from slowave.domain.identifiers import event_id, memory_id
from slowave.service import results as r
from slowave.service.commands import Claim, RememberCommand
from slowave.service.context import ServiceContext
from slowave.service.knowledge_gaps import close_answered_gaps
from slowave.service.sessions import open_session_in_scope
from slowave.storage.repository import Repository

log = logging.getLogger(__name__)


def remember(ctx: ServiceContext, tenant: str, cmd: RememberCommand) -> list[r.RememberResult | r.ItemError]:
    # Embedding happens before the transaction: model inference never holds the write lock.
    claims = [c for c in cmd.claims if isinstance(c, Claim)]
    vectors = dict(zip(map(id, claims), ctx.semantic.embed([c.content for c in claims]))) if ctx.semantic else {}
    encoder_id = ctx.semantic.encoder.encoder_id if ctx.semantic else None
    now = ctx.clock.now()
    with ctx.db.transaction() as repo:
        # The session lock makes "state check plus store" atomic: no claim lands in an ended session.
        session, refusal = open_session_in_scope(repo, tenant, cmd.session_id, cmd.scope, now)
        results: list[r.RememberResult | r.ItemError] = []
        if refusal is None:
            for claim in cmd.claims:
                if isinstance(claim, r.ItemError):
                    results.append(claim)
                else:
                    vector = (encoder_id, vectors[id(claim)]) if encoder_id else None
                    store = store_claim if not cmd.batch else _store_batch_item
                    results.append(store(repo, tenant, session.id, session.scope, claim, now, vector))
            stored = sum(isinstance(x, r.RememberResult) for x in results)
            repo.add_session_events(session.id, stored)
    if refusal is not None:
        raise refusal
    return results


def _store_batch_item(repo: Repository, tenant: str, session_id: str, scope: str, claim: Claim, now: datetime,
                      vector: tuple[str, bytes] | None):  # noqa: ANN202
    """Each batch item stands alone: an unexpected failure rolls back that item only."""
    savepoint = repo.conn.begin_nested()
    try:
        result = store_claim(repo, tenant, session_id, scope, claim, now, vector)
    except Exception:  # noqa: BLE001 - reported as the item's internal_error, siblings proceed
        savepoint.rollback()
        log.exception("remember batch item failed")
        return r.ItemError("internal_error", "the item could not be stored; retry it", True)
    savepoint.commit()
    return result


def store_claim(repo: Repository, tenant: str, session_id: str, scope: str, claim: Claim, now: datetime,
                vector: tuple[str, bytes] | None = None) -> r.RememberResult:
    """MATCHED when an equivalent active claim exists (same scope and type, spec 6.3), else CREATED."""
    existing = repo.find_active_claim(tenant, scope, claim.type, claim.content)
    if existing is not None:
        number, disposition = existing.number, "matched"
    else:
        number = repo.insert_memory(tenant=tenant, scope=scope, type_=claim.type, content=claim.content,
                                    source_kind="explicit_remember", source_session_id=session_id, now=now)
        disposition = "created"
        if vector is not None:
            repo.insert_vector(number, tenant, scope, *vector)
    event = repo.insert_source_event(tenant=tenant, session_id=session_id, kind="claim", memory_number=number,
                                     content=claim.content, occurred_at=claim.occurred_at, recorded_at=now)
    repo.set_memory_source_event(number, event)
    close_answered_gaps(repo, tenant, scope, claim.content)
    return r.RememberResult(True, memory_id(number), disposition, claim.type, scope, event_id(event))
