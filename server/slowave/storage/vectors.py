"""Memory vectors of the semantic channel: one per memory and encoder."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, bindparam, delete, func, select

from slowave.storage import tables as t
from slowave.storage.erasure import NOT_ERASED
from slowave.storage.executor import Executor, any_of, values_of

_m, _v = t.memories, t.memory_vectors
_of_encoder = (
    _v.c.tenant == bindparam("tenant"),
    _v.c.scope == bindparam("scope"),
    _v.c.encoder_id == bindparam("encoder_id"),
)
_LATEST = select(func.max(_v.c.number)).where(*_of_encoder)
_COUNT_UPTO = select(func.count()).select_from(_v).where(*_of_encoder, _v.c.number <= bindparam("upto"))
_AFTER = select(_v.c.number, _v.c.vector).where(*_of_encoder, _v.c.number > bindparam("after")).order_by(_v.c.number)
_has_vector = select(_v.c.number).where(_v.c.number == _m.c.number, _v.c.encoder_id == bindparam("encoder_id")).exists()
_WITHOUT = (
    select(_m.c.number, _m.c.tenant, _m.c.scope, _m.c.content)
    .where(~_has_vector, NOT_ERASED)
    .order_by(_m.c.number)
    .limit(bindparam("limit"))
)
_WITH_VECTOR = select(_v.c.number).where(
    _v.c.encoder_id == bindparam("encoder_id"), any_of(_v.c.number, values_of("numbers", Integer()))
)


_OTHER_ENCODERS = (
    select(_v.c.number)
    .where(_v.c.encoder_id != bindparam("encoder_id"))
    .order_by(_v.c.number)
    .limit(bindparam("limit"))
)
# One list of numbers, not a condition per row: SQLite refuses an expression nested 1,000 deep.
_DELETE_OTHER_ENCODERS = delete(_v).where(
    _v.c.encoder_id != bindparam("encoder_id"), any_of(_v.c.number, values_of("numbers", Integer()))
)


class VectorStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def insert(self, number: int, tenant: str, scope: str, encoder_id: str, vector: bytes) -> None:
        values = dict(number=number, tenant=tenant, scope=scope, encoder_id=encoder_id, vector=vector)
        self.ex.insert(_v, values)

    def insert_many(self, rows: list[dict[str, Any]]) -> None:
        self.ex.insert_many(_v, rows)

    def with_vector(self, encoder_id: str, numbers: list[int]) -> set[int]:
        """Which of the memories have a vector of the encoder."""
        return {r.number for r in self.ex.rows(_WITH_VECTOR, {"encoder_id": encoder_id, "numbers": numbers})}

    def memories_without_vector(self, encoder_id: str, limit: int) -> list[Any]:
        """The oldest memories with no vector of the encoder (erased ones aside)."""
        return self.ex.rows(_WITHOUT, {"encoder_id": encoder_id, "limit": limit})

    def latest_number(self, tenant: str, scope: str, encoder_id: str) -> int:
        """Read before every dense search (the replica's cache is validated against it)."""
        return self.ex.scalar(_LATEST, {"tenant": tenant, "scope": scope, "encoder_id": encoder_id}) or 0

    def count_upto(self, tenant: str, scope: str, encoder_id: str, upto: int) -> int:
        """The scope's vectors numbered up to `upto` (a saved dense graph is checked against it)."""
        params = {"tenant": tenant, "scope": scope, "encoder_id": encoder_id, "upto": upto}
        return self.ex.scalar(_COUNT_UPTO, params) or 0

    def after(self, tenant: str, scope: str, encoder_id: str, after: int) -> list[Any]:
        params = {"tenant": tenant, "scope": scope, "encoder_id": encoder_id, "after": after}
        return self.ex.rows(_AFTER, params)

    def delete_other_encoders(self, encoder_id: str, limit: int) -> int:
        """Deletes the vectors of encoders other than `encoder_id` of up to `limit` memories; returns
        how many (a memory may have vectors of several older encoders)."""
        numbers = [r.number for r in self.ex.rows(_OTHER_ENCODERS, {"encoder_id": encoder_id, "limit": limit})]
        if not numbers:
            return 0
        return self.ex.run(_DELETE_OTHER_ENCODERS, {"encoder_id": encoder_id, "numbers": numbers})
