"""Procedures captured at Commit, with their evidence counters (a projection of the ledger)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import String, bindparam, select

from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, values_of

_p, _s, _f = t.procedures, t.sessions, t.feedback_rows
# Each procedure with its source session's current outcome metadata.
_with_sessions = (
    select(_p, _s.c.outcome, _s.c.outcome_summary, _s.c.verification, _s.c.task.label("session_task"))
    .join(_s, _s.c.id == _p.c.session_id)
    .where(_p.c.tenant == bindparam("tenant"))
)
_IN_SCOPE = _with_sessions.where(_p.c.scope == bindparam("scope"))
_BY_IDS = _with_sessions.where(any_of(_p.c.id, values_of("ids", String())))
_BY_IDS_IN_SCOPE = _BY_IDS.where(_p.c.scope == bindparam("scope"))
_CONTRIBUTIONS = (
    select(_f.c.effect, _f.c.contribution, _f.c.recorded_at, _s.c.state, _s.c.outcome)
    .join(_s, _s.c.id == _f.c.session_id)
    .where(
        _f.c.target_kind == "procedure",
        _f.c.target_id == bindparam("procedure"),
        _f.c.effective.is_(True),
        _f.c.use == "used",
    )
    .order_by(_f.c.seq.desc())
    .limit(bindparam("limit"))
)


class ProcedureStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def get(self, tenant: str, procedure_id: str, *, lock: bool = False) -> Any | None:
        return self.ex.row_where(_p, lock, id=procedure_id, tenant=tenant)

    def insert(self, **values: Any) -> None:
        self.ex.insert(_p, values)

    def update(self, procedure_id: str, **values: Any) -> None:
        self.ex.update_where(_p, {"id": procedure_id}, values)

    def with_sessions(self, tenant: str, scope: str | None = None, ids: Sequence[str] | None = None) -> list[Any]:
        """The tenant's procedures (of a scope, with given ids) joined with their source session's
        outcome metadata."""
        params = {"tenant": tenant, "scope": scope, "ids": list(ids) if ids is not None else None}
        if ids is None:
            return self.ex.rows(_IN_SCOPE if scope is not None else _with_sessions, params)
        return self.ex.rows(_BY_IDS_IN_SCOPE if scope is not None else _BY_IDS, params)

    def contributions(self, procedure_id: str, limit: int = 3) -> list[Any]:
        """The latest effective uses of the procedure, with the using session's state and outcome."""
        return self.ex.rows(_CONTRIBUTIONS, {"procedure": procedure_id, "limit": limit})
