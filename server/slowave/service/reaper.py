"""The idle-session reaper (seed; behaviour §2.4): closes sessions nobody commits."""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import dataclass, field
from datetime import timedelta

from slowave.background import Periodic
from slowave.domain.session_state import SessionState
from slowave.service.context import ServiceContext
from slowave.service.episodes import form_episodes
from slowave.service.sessions import end_session

log = logging.getLogger(__name__)
_BATCH = 100


@dataclass
class Sweep:
    """What one sweep did: the sessions it reaped, and how many exposed targets of theirs (by kind,
    `memory` / `procedure`) were left without any accepted feedback."""

    session_ids: list[str] = field(default_factory=list)
    unassessed: Counter = field(default_factory=Counter)


def reap_idle_sessions(ctx: ServiceContext) -> Sweep:
    """One sweep. Each session is reaped in its own transaction, at most once across replicas."""
    timeout = ctx.settings.session_idle_timeout
    sweep = Sweep()
    if timeout <= 0:
        return sweep
    reaped = sweep.session_ids
    while True:
        now = ctx.clock.now()
        with ctx.db.transaction() as uow:
            idle = uow.sessions.idle_open(now - timedelta(seconds=timeout), limit=_BATCH)
            sweep.unassessed.update(uow.retrievals.unassessed_exposure_counts([s.id for s in idle]))
            for session in idle:
                # No feedback enforcement, no goal, summary, verification, procedure or trajectory;
                # episodes are still formed from the remembered claims.
                end_session(
                    uow,
                    session.id,
                    state=SessionState.REAPED,
                    ended_at=now,
                    outcome="unknown",
                    feedback_status="incomplete",
                )
                events = [e.number for e in uow.events.of_session(session.id, kind="claim")]
                form_episodes(uow, session.tenant, session.id, events, now)
                reaped.append(session.id)
        if len(idle) < _BATCH:
            return sweep


class Reaper:
    """Sweeps every min(120, max(1, timeout / 2)) seconds in a daemon thread."""

    def __init__(self, ctx: ServiceContext, on_reaped=None) -> None:
        self.ctx = ctx
        self.on_reaped = on_reaped
        self._loop = Periodic(
            "slowave-reaper",
            ctx.settings.reaper_interval,
            self._sweep,
            on_error=lambda exc: log.error("reaper sweep failed", exc_info=exc),
        )

    def start(self) -> None:
        if self.ctx.settings.session_idle_timeout <= 0:
            log.info("session reaper disabled (SLOWAVE_SESSION_IDLE_TIMEOUT <= 0)")
            return
        self._loop.start()

    def _sweep(self) -> None:
        sweep = reap_idle_sessions(self.ctx)
        if sweep.session_ids:
            log.info(
                "reaped %d idle session(s), %d exposed target(s) left unassessed",
                len(sweep.session_ids),
                sum(sweep.unassessed.values()),
            )
            if self.on_reaped:
                self.on_reaped(sweep)

    def stop(self) -> None:
        self._loop.stop()
