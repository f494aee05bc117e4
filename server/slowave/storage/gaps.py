"""Knowledge gaps: what feedback reported missing, per scope, until a memory answers it."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, select, update

from slowave.domain.claim_identity import claim_hash
from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, values_of

_g = t.knowledge_gaps
_in_scope = (_g.c.tenant == bindparam("tenant"), _g.c.scope == bindparam("scope"))
_SAME_TEXT = select(_g).where(*_in_scope, _g.c.text_hash == bindparam("hash")).with_for_update()
_ASKED_AGAIN = (
    update(_g)
    .where(_g.c.id == bindparam("gap"))
    .values(occurrences=_g.c.occurrences + 1, open=True, last_seen_at=bindparam("now"), text=bindparam("gap_text"))
)
_newest_first = (_g.c.last_seen_at.desc(), _g.c.id.desc())
_OPEN_IN_SCOPE = select(_g).where(*_in_scope, _g.c.open.is_(True)).order_by(*_newest_first)
_CLOSE = update(_g).where(any_of(_g.c.id, values_of("ids", Integer()))).values(open=False)


@functools.cache
def _listing(tenant: bool, scope: bool, include_closed: bool):
    stmt = select(_g).order_by(*_newest_first)
    if tenant:
        stmt = stmt.where(_g.c.tenant == bindparam("tenant"))
    if scope:
        stmt = stmt.where(_g.c.scope == bindparam("scope"))
    return stmt if include_closed else stmt.where(_g.c.open.is_(True))


class GapStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def record(self, tenant: str, scope: str, text: str, now: datetime) -> None:
        """A gap reported (again): one row per distinct text (claim identity) in the scope."""
        h = claim_hash(text)
        row = self.ex.first(_SAME_TEXT, {"tenant": tenant, "scope": scope, "hash": h})
        if row is None:
            values = dict(
                tenant=tenant,
                scope=scope,
                text_hash=h,
                text=text,
                occurrences=1,
                open=True,
                first_seen_at=now,
                last_seen_at=now,
            )
            self.ex.insert(_g, values)
        else:
            self.ex.run(_ASKED_AGAIN, {"gap": row.id, "now": now, "gap_text": text})

    def open_in_scope(self, tenant: str, scope: str) -> list[Any]:
        return self.ex.rows(_OPEN_IN_SCOPE, {"tenant": tenant, "scope": scope})

    def close(self, ids: Sequence[int]) -> None:
        if ids:
            self.ex.run(_CLOSE, {"ids": list(ids)})

    def list(self, tenant: str | None, scope: str | None, include_closed: bool = False) -> list[Any]:
        stmt = _listing(bool(tenant), bool(scope), include_closed)
        return self.ex.rows(stmt, {"tenant": tenant, "scope": scope})
