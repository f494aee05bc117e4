"""Sessions and the continuity tokens that carry a scope from one session to the next."""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update

from slowave.domain.session_state import SessionState
from slowave.storage import tables as t
from slowave.storage.executor import Executor

_s, _c = t.sessions, t.continuity_tokens
_RECALLED = (
    update(_s)
    .where(_s.c.id == bindparam("session_id"), _s.c.state == SessionState.OPEN)
    .values(last_activity_at=bindparam("now"), recall_calls=_s.c.recall_calls + 1)
)
_ADD_EVENTS = (
    update(_s).where(_s.c.id == bindparam("session_id")).values(session_events=_s.c.session_events + bindparam("count"))
)
# Locked so that each is reaped by one replica only.
_IDLE_OPEN = (
    select(_s)
    .where(_s.c.state == SessionState.OPEN, _s.c.last_activity_at < bindparam("cutoff"))
    .order_by(_s.c.last_activity_at)
    .limit(bindparam("limit"))
    .with_for_update(skip_locked=True)
)
_COUNT_OPEN = select(func.count()).select_from(_s).where(_s.c.state == SessionState.OPEN)
# The newest sessions of one state, newest first (ix_sessions_state_activity serves it).
_LATEST_OF_STATE = (
    select(_s.c.tenant, _s.c.scope, _s.c.task, _s.c.last_activity_at)
    .where(_s.c.state == bindparam("state"))
    .order_by(_s.c.last_activity_at.desc())
    .limit(bindparam("limit"))
)
_TOUCH_CONTINUITY = update(_c).where(_c.c.id == bindparam("token")).values(last_seen_at=bindparam("now"))


@functools.cache
def _listing(tenant: bool, state: bool):
    stmt = select(_s).order_by(_s.c.started_at.desc()).limit(bindparam("limit"))
    if tenant:
        stmt = stmt.where(_s.c.tenant == bindparam("tenant"))
    if state:
        stmt = stmt.where(_s.c.state == bindparam("state"))
    return stmt


class SessionStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def insert(self, **values: Any) -> None:
        self.ex.insert(_s, values)

    def get(self, tenant: str, session_id: str, *, lock: bool = False) -> Any | None:
        return self.ex.row_where(_s, lock, id=session_id, tenant=tenant)

    def get_any(self, session_id: str) -> Any | None:
        """A session by id whatever its tenant (provenance of memories the caller already sees)."""
        return self.ex.row_where(_s, id=session_id)

    def update(self, session_id: str, **values: Any) -> None:
        self.ex.update_where(_s, {"id": session_id}, values)

    def touch(self, session_id: str, now: datetime, *, recall: bool = False) -> None:
        """Activity of an open session (behaviour §2.3); a Recall also counts as a recall call."""
        if recall:
            self.ex.run(_RECALLED, {"session_id": session_id, "now": now})
        else:
            self.ex.update_where(_s, {"id": session_id, "state": SessionState.OPEN}, {"last_activity_at": now})

    def add_events(self, session_id: str, count: int) -> None:
        self.ex.run(_ADD_EVENTS, {"session_id": session_id, "count": count})

    def list(self, tenant: str | None, state: str | None, limit: int) -> list[Any]:
        params = {"limit": limit, "tenant": tenant, "state": state}
        return self.ex.rows(_listing(bool(tenant), bool(state)), params)

    def idle_open(self, cutoff: datetime, limit: int) -> list[Any]:
        """Open sessions idle since before `cutoff`."""
        return self.ex.rows(_IDLE_OPEN, {"cutoff": cutoff, "limit": limit})

    def recently_active_scopes(self, limit: int, sessions: int = 1000) -> list[tuple[str, str, str]]:
        """Up to `limit` (tenant, scope, task of its latest session), the most recently active scope
        first, read from the `sessions` latest sessions of each state (an index range each, however
        many sessions the store holds)."""
        latest: dict[tuple[str, str], tuple[datetime, str]] = {}
        for state in SessionState:
            for row in self.ex.rows(_LATEST_OF_STATE, {"state": state.value, "limit": sessions}):
                key = (row.tenant, row.scope)
                if key not in latest or row.last_activity_at > latest[key][0]:
                    latest[key] = (row.last_activity_at, row.task)
        ranked = sorted(latest.items(), key=lambda item: item[1][0], reverse=True)[:limit]
        return [(tenant, scope, task) for (tenant, scope), (_at, task) in ranked]

    def count_open(self) -> int:
        return self.ex.scalar(_COUNT_OPEN)

    def get_continuity(self, tenant: str, token: str) -> Any | None:
        return self.ex.row_where(_c, id=token, tenant=tenant)

    def insert_continuity(self, **values: Any) -> None:
        self.ex.insert(_c, values)

    def touch_continuity(self, token: str, now: datetime) -> None:
        self.ex.run(_TOUCH_CONTINUITY, {"token": token, "now": now})
