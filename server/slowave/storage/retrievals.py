"""Retrievals (each Activate and Recall), the targets they exposed, and their page cursors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import JSON, String, bindparam, func, select, update

from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, values_of

_r, _x, _cur = t.retrievals, t.exposures, t.cursors
_OF_SESSION = select(_r.c.id, _r.c.number).where(_r.c.session_id == bindparam("session_id")).order_by(_r.c.number)
_EXPOSURES = (
    select(_x).where(any_of(_x.c.retrieval_id, values_of("ids", String()))).order_by(_x.c.retrieval_id, _x.c.position)
)
_target = (
    _x.c.retrieval_id == bindparam("r"),
    _x.c.target_kind == bindparam("k"),
    _x.c.target_id == bindparam("i"),
)
# A retrieval without its frozen catalog: what Feedback reads (the catalog, 50 memories as JSON, is
# only for serving pages).
_HEADER = select(*(c for c in _r.c if c.name != "catalog")).where(
    _r.c.id == bindparam("id"), _r.c.tenant == bindparam("tenant")
)
_HEADER_LOCKED = _HEADER.with_for_update()
RELEASED_CATALOG = {"released": True}
"""What a retrieval keeps of its frozen catalog once its session has ended. The catalog only serves
the session's continuation pages, which an ended session refuses (SESSION_ENDED); feedback, the
commit gate and learning read the retrieval's header and exposures. Kept whole, ~3.4 KB a
retrieval at 50 memories, a store grew by a page per Activate for good (bench/results/history.md,
2026-12-07 15:20)."""
_RELEASE = update(_r).where(_r.c.session_id == bindparam("sid")).values(catalog=bindparam("released", type_=JSON()))
_COVER = update(_x).where(*_target).values(covered=True)
_COVER_EFFECTIVE = update(_x).where(*_target).values(covered=True, effective_seq=bindparam("seq"))
# Exposed targets with no accepted feedback row, over all retrievals of the sessions, by kind.
_UNASSESSED = (
    select(_x.c.target_kind, func.count())
    .join(_r, _r.c.id == _x.c.retrieval_id)
    .where(any_of(_r.c.session_id, values_of("sessions", String())), _x.c.covered.is_(False))
    .group_by(_x.c.target_kind)
)


class RetrievalStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def insert(self, **values: Any) -> None:
        self.ex.insert(_r, values)

    def get(self, tenant: str, retrieval_id: str, *, lock: bool = False) -> Any | None:
        return self.ex.row_where(_r, lock, id=retrieval_id, tenant=tenant)

    def header(self, tenant: str, retrieval_id: str, *, lock: bool = False) -> Any | None:
        """The retrieval without its catalog; `lock` as in `get`."""
        return self.ex.first(_HEADER_LOCKED if lock else _HEADER, {"id": retrieval_id, "tenant": tenant})

    def release_catalogs(self, session_id: str) -> None:
        """Drops the frozen catalogs of the session's retrievals (RELEASED_CATALOG): it has ended."""
        self.ex.run(_RELEASE, {"sid": session_id, "released": RELEASED_CATALOG})

    def of_session(self, session_id: str) -> list[Any]:
        """The session's retrievals (id, number) in creation order."""
        return self.ex.rows(_OF_SESSION, {"session_id": session_id})

    def insert_exposures(self, retrieval_id: str, targets: Sequence[tuple[str, str]], start: int) -> None:
        rows = [
            {"retrieval_id": retrieval_id, "target_kind": k, "target_id": i, "position": start + n, "covered": False}
            for n, (k, i) in enumerate(targets)
        ]
        self.ex.insert_many(_x, rows)

    def exposures(self, retrieval_ids: Sequence[str]) -> list[Any]:
        return self.ex.rows(_EXPOSURES, {"ids": list(retrieval_ids)}) if retrieval_ids else []

    def cover(self, retrieval_id: str, kind: str, target_id: str, effective_seq: int | None = None) -> None:
        """The target has an accepted row now; `effective_seq`: the first effective one's seq."""
        params = {"r": retrieval_id, "k": kind, "i": target_id}
        if effective_seq is None:
            self.ex.run(_COVER, params)
        else:
            self.ex.run(_COVER_EFFECTIVE, dict(params, seq=effective_seq))

    def cover_all(self, retrieval_id: str, targets: Sequence[tuple[str, str]]) -> None:
        self.ex.run_many(_COVER, [{"r": retrieval_id, "k": k, "i": i} for k, i in targets])

    def unassessed_exposure_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Exposed targets without an accepted row, over all retrievals of these sessions, by kind."""
        if not session_ids:
            return {}
        return {kind: n for kind, n in self.ex.rows(_UNASSESSED, {"sessions": list(session_ids)})}

    def get_cursor(self, cursor_id: str) -> Any | None:
        return self.ex.row_where(_cur, id=cursor_id)

    def cursor_at(self, retrieval_id: str, memory_offset: int, procedure_offset: int) -> Any | None:
        return self.ex.row_where(
            _cur, retrieval_id=retrieval_id, memory_offset=memory_offset, procedure_offset=procedure_offset
        )

    def insert_cursor(self, **values: Any) -> None:
        self.ex.insert(_cur, values)
