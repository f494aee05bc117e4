"""The feedback ledger: append-only rows in `seq` order, the truth that learning projects."""

from __future__ import annotations

import functools
from typing import Any

from sqlalchemy import bindparam, func, select

from slowave.storage import tables as t
from slowave.storage.executor import Executor

_f = t.feedback_rows
_of_retrieval = _f.c.retrieval_id == bindparam("retrieval_id")
_LAST_ACCEPTED_SEQS = (
    select(_f.c.target_kind, _f.c.target_id, func.max(_f.c.seq))
    .where(_of_retrieval, _f.c.accepted.is_(True))
    .group_by(_f.c.target_kind, _f.c.target_id)
)
_MAX_SEQ = select(func.max(_f.c.seq))


@functools.cache
def _rows(of_retrieval: bool):
    stmt = select(_f).order_by(_f.c.seq)
    return stmt.where(_of_retrieval) if of_retrieval else stmt


class LedgerStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def append(self, **values: Any) -> int:
        """Appends one row; returns its seq."""
        return self.ex.insert(_f, values)

    def append_many(self, rows: list[dict[str, Any]]) -> None:
        """Appends rows in list order (their seq follows the order)."""
        self.ex.insert_many(_f, rows)

    def last_accepted_seqs(self, retrieval_id: str) -> dict[tuple[str, str], int]:
        """The latest accepted row of each target of a retrieval."""
        return {(k, i): seq for k, i, seq in self.ex.rows(_LAST_ACCEPTED_SEQS, {"retrieval_id": retrieval_id})}

    def rows(self, retrieval_id: str | None = None) -> list[Any]:
        return self.ex.rows(_rows(bool(retrieval_id)), {"retrieval_id": retrieval_id})

    def max_seq(self) -> int:
        return self.ex.scalar(_MAX_SEQ) or 0
