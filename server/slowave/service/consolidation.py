"""Offline consolidation (behaviour §11.6): a committed session's outcome summary becomes a lesson.

Runs without any language model. Each queue entry is taken exactly once (row lock with skip-locked
selection on PostgreSQL; SQLite transactions hold the write lock). Remembered memories and their
learning state are never modified.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from slowave.background import Periodic
from slowave.domain.claim_identity import claim_hash
from slowave.domain.identifiers import memory_id, new_feedback_event_id
from slowave.service.context import ServiceContext
from slowave.service.knowledge_gaps import close_answered_gaps
from slowave.storage.unit_of_work import UnitOfWork

log = logging.getLogger(__name__)

# A run takes its sessions one by one, each when the process serves no request, so that a request
# arriving meanwhile waits for one session's work (≈ 1 ms), not for the whole run's. It waits this
# long at most for such a gap; once none came, the run takes the rest without waiting: under steady
# load there is none, and the queue must not grow.
CONSOLIDATION_YIELD_SECONDS = 0.02


def consolidate_pending(
    ctx: ServiceContext, limit: int | None = None, idle: Callable[[float], bool] | None = None
) -> int:
    """Consolidates queued sessions until the queue is empty (or `limit`); returns how many.

    `idle(timeout)`: waits until the process serves no request, at most `timeout` seconds (the
    drain's `wait_idle`); asked before each session until it once times out."""
    done = 0
    while limit is None or done < limit:
        if idle is not None and not idle(CONSOLIDATION_YIELD_SECONDS):
            idle = None  # the process stays busy: the rest of the run waits for no gap
        with ctx.db.transaction() as uow:
            entry = uow.consolidation.next()
            if entry is None:
                return done
            consolidate_session(uow, entry.tenant, entry.session_id, ctx.clock.now(), ctx.semantic)
            uow.consolidation.finish(entry.id, ctx.clock.now())
        done += 1
    return done


def consolidate_session(uow: UnitOfWork, tenant: str, session_id: str, now, semantic=None) -> None:
    session = uow.sessions.get(tenant, session_id, lock=True)
    if session is None or not session.outcome_summary:
        return  # a reaped session without an outcome summary yields no derived memory
    summary = session.outcome_summary
    summary_hash = claim_hash(summary)
    uow.memories.lock_claims_of_scope(tenant, session.scope)
    existing = uow.memories.find_active_claim(tenant, session.scope, "lesson", summary)
    if existing is not None:
        number, created = existing.number, False
    else:
        number = uow.memories.insert(
            tenant=tenant,
            scope=session.scope,
            type_="lesson",
            content=summary,
            source_kind="consolidated",
            source_session_id=session.id,
            now=now,
        )
        created = True
        if semantic is not None:  # background work: embedding inside its transaction is acceptable here
            uow.vectors.insert(number, tenant, session.scope, semantic.encoder.encoder_id, semantic.embed([summary])[0])
    uow.consolidation.link(session.id, number, created=created, summary_hash=summary_hash)
    close_answered_gaps(uow, tenant, session.scope, summary)
    for link in uow.consolidation.session_links(session.id):
        if link.memory_number != number:
            _let_go_of_old_summary(uow, tenant, session.id, link, number, now)


def _let_go_of_old_summary(uow: UnitOfWork, tenant: str, session_id: str, link, new_number: int, now) -> None:
    """An updated summary replaces the old derived memory only if nothing else stands behind it."""
    old = uow.memories.get(tenant, link.memory_number, lock=True)
    sole_source = (
        old is not None
        and old.status == "active"
        and link.created_by_session
        and uow.consolidation.memory_link_count(old.number) == 1
        and not uow.events.memory_has_remembered_source(old.number)
    )
    if sole_source:
        # Feedback locks the memory's row before appending its rows, so every later row for it
        # gets a higher seq than any visible now.
        uow.memories.retire(
            old.number,
            stale_reason="superseded",
            superseded_by=new_number,
            now=now,
            retired_seq=uow.ledger.max_seq() + 1,
        )
        uow.ledger.append(
            event_id=new_feedback_event_id(),
            tenant=tenant,
            retrieval_id="",
            session_id=session_id,
            target_kind="memory",
            target_id=memory_id(old.number),
            accepted=True,
            service_authored=True,
            assessment="stale",
            stale_reason="superseded",
            replacement_memory_id=memory_id(new_number),
            reason="the session's outcome summary was updated",
            recorded_at=now,
        )
    uow.consolidation.unlink(session_id, link.memory_number)


# Each Commit notifies the consolidator. Woken at every one, it ran beside the next requests over and
# over: in-process, Activate → Feedback → Commit cycles on the 100k perf store cost an Activate
# 3.17 ms of CPU (p50) with consolidation run after each Commit on the same thread, 3.89 ms with the
# consolidator woken by each Commit, 3.06 ms with it run once a second (history, 2026-12-05). Under
# load it now runs at most this often, taking every queued session at once; after a quiet spell a
# Commit still wakes it at once.
CONSOLIDATION_SETTLE_SECONDS = 0.5


class Consolidator:
    """Background worker present in every replica; normally finishes a commit's entry within seconds."""

    def __init__(self, ctx: ServiceContext, idle: Callable[[float], bool] | None = None) -> None:
        self.ctx = ctx
        self._loop = Periodic(
            "slowave-consolidator",
            ctx.settings.consolidation_poll_seconds,
            lambda: consolidate_pending(ctx, idle=idle),
            on_error=lambda exc: log.error("consolidation failed", exc_info=exc),
            settle=CONSOLIDATION_SETTLE_SECONDS,
        )

    def start(self) -> None:
        self._loop.start()

    def notify(self) -> None:
        self._loop.notify()

    def stop(self) -> None:
        self._loop.stop()
