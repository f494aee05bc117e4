"""Source events (each stored claim and trajectory entry) and the episodes that chain them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Integer, bindparam, func, or_, select

from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, values_of
from slowave.storage.numbering import allocate_numbers

_e, _ep = t.source_events, t.episodes
_numbers = values_of("numbers", Integer())
_OF_SESSION = select(_e).where(_e.c.session_id == bindparam("session_id")).order_by(_e.c.number)
_OF_SESSION_KIND = _OF_SESSION.where(_e.c.kind == bindparam("kind"))
_OF_MEMORIES = select(_e).where(any_of(_e.c.memory_number, _numbers)).order_by(_e.c.number)
_BY_NUMBERS = select(_e).where(any_of(_e.c.number, _numbers))
_FIRST_OF_MEMORIES = (
    select(_e.c.memory_number, func.min(_e.c.number))
    .where(any_of(_e.c.memory_number, _numbers))
    .group_by(_e.c.memory_number)
)
_RECENT_CLAIMS = (
    select(_e.c.content)
    .where(_e.c.session_id == bindparam("session_id"), _e.c.kind == "claim")
    .order_by(_e.c.number.desc())
    .limit(bindparam("limit"))
)
_REMEMBERED = select(_e.c.number).where(_e.c.memory_number == bindparam("memory"), _e.c.kind == "claim").limit(1)
_EPISODES = (
    select(_ep)
    .where(or_(any_of(_ep.c.event_number, _numbers), any_of(_ep.c.previous_event_number, _numbers)))
    .order_by(_ep.c.number)
)


class EventStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def insert(self, **values: Any) -> int:
        return self.ex.insert(_e, values)

    def insert_many(self, rows: list[dict[str, Any]]) -> list[int]:
        numbers = allocate_numbers(self.ex, "source_events", len(rows))
        self.ex.insert_many(_e, [dict(row, number=n) for n, row in zip(numbers, rows)])
        return numbers

    def of_session(self, session_id: str, kind: str | None = None) -> list[Any]:
        if kind:
            return self.ex.rows(_OF_SESSION_KIND, {"session_id": session_id, "kind": kind})
        return self.ex.rows(_OF_SESSION, {"session_id": session_id})

    def of_memories(self, numbers: Sequence[int]) -> list[Any]:
        return self.ex.rows(_OF_MEMORIES, {"numbers": list(numbers)}) if numbers else []

    def get_many(self, numbers: Iterable[int]) -> dict[int, Any]:
        nums = [n for n in set(numbers) if n is not None]
        return {r.number: r for r in self.ex.rows(_BY_NUMBERS, {"numbers": nums})} if nums else {}

    def first_of_memories(self, numbers: Sequence[int]) -> dict[int, int]:
        """Each memory's first source event (the claim that created it)."""
        if not numbers:
            return {}
        return {m: n for m, n in self.ex.rows(_FIRST_OF_MEMORIES, {"numbers": list(numbers)})}

    def recent_claims(self, session_id: str, limit: int) -> list[str]:
        """The contents of the session's last `limit` claims, oldest first (session context)."""
        return [c for (c,) in self.ex.rows(_RECENT_CLAIMS, {"session_id": session_id, "limit": limit})][::-1]

    def memory_has_remembered_source(self, memory_number: int) -> bool:
        return self.ex.first(_REMEMBERED, {"memory": memory_number}) is not None

    def insert_episodes(self, rows: list[dict[str, Any]]) -> None:
        """Inserts episodes in list order (their numbers follow it)."""
        self.ex.insert_many(_ep, rows)

    def episodes_of_events(self, numbers: Sequence[int]) -> list[Any]:
        return self.ex.rows(_EPISODES, {"numbers": list(numbers)}) if numbers else []
