"""Row numbers taken ahead of a multi-row INSERT, so that a batch is one statement (INSERT …
RETURNING in parameter order runs row by row)."""

from __future__ import annotations

from sqlalchemy import Integer, bindparam, func, select

from slowave.storage import tables as t
from slowave.storage.executor import Executor, PerDialect

# PostgreSQL: from the column's sequence. SQLite: after the largest number, as the transaction holds
# the database's write lock and nobody else takes numbers meanwhile.
_NEXT = {
    name: PerDialect(
        lambda dialect, table=table: (
            select(func.coalesce(func.max(table.c.number), 0))
            if dialect == "sqlite"
            else select(func.nextval(func.pg_get_serial_sequence(table.name, "number"))).select_from(
                func.generate_series(1, bindparam("count", type_=Integer))
            )
        )
    )
    for name, table in (("memories", t.memories), ("source_events", t.source_events))
}


def allocate_numbers(ex: Executor, table: str, count: int) -> list[int]:
    """The next `count` row numbers of a table, ascending."""
    if count == 0:
        return []
    if ex.dialect == "sqlite":
        top = ex.scalar(_NEXT[table])
        return list(range(top + 1, top + 1 + count))
    return sorted(n for (n,) in ex.rows(_NEXT[table], {"count": count}))
