"""The consolidation queue (closed sessions waiting for their lesson) and the links between
sessions and the lessons consolidated from them."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, func, select, update

from slowave.storage import tables as t
from slowave.storage.executor import Executor

_q, _lk = t.consolidation_queue, t.session_memory_links
# Locked so that each entry is consolidated by one replica only.
_NEXT = select(_q).where(_q.c.done_at.is_(None)).order_by(_q.c.id).limit(1).with_for_update(skip_locked=True)
_FINISH = update(_q).where(_q.c.id == bindparam("entry")).values(done_at=bindparam("now"))
_LINKS = select(_lk).where(_lk.c.session_id == bindparam("session_id"))
_link = (_lk.c.session_id == bindparam("session_id"), _lk.c.memory_number == bindparam("memory"))
_LINK = select(_lk).where(*_link)
_UNLINK = _lk.delete().where(*_link)
_LINK_COUNT = select(func.count()).select_from(_lk).where(_lk.c.memory_number == bindparam("memory"))


class ConsolidationStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def enqueue(self, tenant: str, session_id: str, now: datetime) -> None:
        self.ex.insert(_q, {"tenant": tenant, "session_id": session_id, "enqueued_at": now})

    def next(self) -> Any | None:
        return self.ex.first(_NEXT)

    def finish(self, entry_id: int, now: datetime) -> None:
        self.ex.run(_FINISH, {"entry": entry_id, "now": now})

    def session_links(self, session_id: str) -> list[Any]:
        return self.ex.rows(_LINKS, {"session_id": session_id})

    def link(self, session_id: str, memory_number: int, *, created: bool, summary_hash: str) -> None:
        if self.ex.first(_LINK, {"session_id": session_id, "memory": memory_number}) is None:
            values = dict(
                session_id=session_id,
                memory_number=memory_number,
                created_by_session=created,
                summary_hash=summary_hash,
            )
            self.ex.insert(_lk, values)

    def unlink(self, session_id: str, memory_number: int) -> None:
        self.ex.run(_UNLINK, {"session_id": session_id, "memory": memory_number})

    def memory_link_count(self, memory_number: int) -> int:
        return self.ex.scalar(_LINK_COUNT, {"memory": memory_number})
