"""SQLite statements of the hot path, run straight through the driver with SQLAlchemy's own types.

SQLAlchemy's execution machinery costs ≈ 0.1–0.3 ms per statement, more than SQLite needs to run
the small statements every Activate, Recall, Feedback and Commit issues a dozen of. On SQLite those
statements go through `sqlite3` directly; values still pass through the bind and result processors
SQLAlchemy derives from the table definitions (UTC datetimes, JSON, booleans), so a row written or
read this way is the same as one written or read through SQLAlchemy. PostgreSQL keeps SQLAlchemy.
"""

from __future__ import annotations

from collections import namedtuple
from collections.abc import Callable, Sequence
from typing import Any

from sqlalchemy import Column, Connection, Table
from sqlalchemy.engine import Dialect

_Processor = Callable[[Any], Any] | None


class _InsertPlan:
    def __init__(self, table: Table, keys: tuple[str, ...], dialect: Dialect) -> None:
        columns = [table.c[k] for k in keys]
        # Scalar Python-side defaults of omitted columns, as SQLAlchemy would fill them in.
        defaults = [c for c in table.c if c.key not in keys and c.default is not None and c.default.is_scalar]
        self.keys = keys
        self.defaults = tuple(c.default.arg for c in defaults)
        names = [c.name for c in columns + defaults]
        self.sql = f"INSERT INTO {table.name} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
        self.processors: tuple[_Processor, ...] = tuple(
            c.type._cached_bind_processor(dialect) for c in columns + defaults
        )
        pk = list(table.primary_key.columns)
        self.given_key = pk[0].key if pk and pk[0].key in keys else None

    def parameters(self, values: dict[str, Any]) -> list[Any]:
        raw = [values[k] for k in self.keys]
        raw.extend(self.defaults)
        return [p(v) if p is not None else v for p, v in zip(self.processors, raw)]


_INSERT_PLANS: dict[tuple[str, tuple[str, ...]], _InsertPlan] = {}
_RESULT_SHAPES: dict[tuple, tuple[type, tuple[_Processor, ...]]] = {}


def _driver(conn: Connection) -> Any:
    return conn.connection.driver_connection


def raw(conn: Connection, sql: str, params: dict[str, Any] | Sequence[Any] = ()) -> Any:
    """Runs a statement whose values need no conversion (text and numbers); returns the cursor."""
    return _driver(conn).execute(sql, params)


def raw_many(conn: Connection, sql: str, rows: Sequence[dict[str, Any] | Sequence[Any]]) -> None:
    """`raw` once per row, in one call."""
    _driver(conn).executemany(sql, rows)


def _insert_plan(conn: Connection, table: Table, keys: tuple[str, ...]) -> _InsertPlan:
    plan = _INSERT_PLANS.get((table.name, keys))
    if plan is None:
        plan = _INSERT_PLANS[(table.name, keys)] = _InsertPlan(table, keys, conn.dialect)
    return plan


def insert(conn: Connection, table: Table, values: dict[str, Any]) -> Any:
    """Inserts one row; returns its primary key (the given one, else the new rowid)."""
    plan = _insert_plan(conn, table, tuple(values))
    cursor = _driver(conn).execute(plan.sql, plan.parameters(values))
    return values[plan.given_key] if plan.given_key else cursor.lastrowid


def insert_many(conn: Connection, table: Table, rows: Sequence[dict[str, Any]]) -> None:
    """Inserts rows in list order (one statement per run of rows with the same keys)."""
    driver, start = _driver(conn), 0
    while start < len(rows):
        keys = tuple(rows[start])
        end = start + 1
        while end < len(rows) and tuple(rows[end]) == keys:
            end += 1
        plan = _insert_plan(conn, table, keys)
        driver.executemany(plan.sql, [plan.parameters(r) for r in rows[start:end]])
        start = end


def _row_type(names: list[str]) -> type:
    """A named tuple that also answers `_mapping`, like SQLAlchemy's Row."""
    base = namedtuple("DriverRow", names)
    return type("DriverRow", (base,), {"__slots__": (), "_mapping": property(lambda self: self._asdict())})


def select(
    conn: Connection, sql: str, params: dict[str, Any] | Sequence[Any], columns: Sequence[Column | tuple[str, Any]]
) -> list[Any]:
    """Runs a SELECT whose result columns are `columns` (table columns, or (name, type) pairs for
    computed ones, `None` type meaning no conversion); rows come back as named tuples."""
    key = (sql, tuple(id(c) if isinstance(c, Column) else c for c in columns))
    shape = _RESULT_SHAPES.get(key)
    if shape is None:
        names, processors = [], []
        for c in columns:
            name, type_ = (c.key, c.type) if isinstance(c, Column) else c
            names.append(name)
            processors.append(type_._cached_result_processor(conn.dialect, None) if type_ is not None else None)
        shape = _RESULT_SHAPES[key] = (_row_type(names), tuple(processors))
    row_type, processors = shape
    out = []
    for raw in _driver(conn).execute(sql, params):
        out.append(row_type._make([p(v) if p is not None else v for p, v in zip(processors, raw)]))
    return out


_ROW_SQL: dict[tuple[str, tuple[str, ...]], str] = {}
_UPDATE_SQL: dict[tuple[str, tuple[str, ...], tuple[str, ...]], str] = {}


def _bound(conn: Connection, table: Table, values: dict[str, Any]) -> list[Any]:
    out = []
    for key, value in values.items():
        processor = table.c[key].type._cached_bind_processor(conn.dialect)
        out.append(processor(value) if processor is not None else value)
    return out


def row_where(conn: Connection, table: Table, equals: dict[str, Any]) -> Any | None:
    """The row of `table` whose columns equal the given values (keys are unique), or None."""
    key = (table.name, tuple(equals))
    sql = _ROW_SQL.get(key)
    if sql is None:
        where = " AND ".join(f"{table.c[k].name} = ?" for k in equals)
        sql = _ROW_SQL[key] = f"SELECT {', '.join(c.name for c in table.c)} FROM {table.name} WHERE {where} LIMIT 1"
    rows = select(conn, sql, _bound(conn, table, equals), list(table.c))
    return rows[0] if rows else None


def update_where(conn: Connection, table: Table, equals: dict[str, Any], values: dict[str, Any]) -> int:
    """Sets plain values on the rows whose columns equal `equals`; returns how many rows matched."""
    key = (table.name, tuple(values), tuple(equals))
    sql = _UPDATE_SQL.get(key)
    if sql is None:
        sets = ", ".join(f"{table.c[k].name} = ?" for k in values)
        where = " AND ".join(f"{table.c[k].name} = ?" for k in equals)
        sql = _UPDATE_SQL[key] = f"UPDATE {table.name} SET {sets} WHERE {where}"
    return _driver(conn).execute(sql, _bound(conn, table, values) + _bound(conn, table, equals)).rowcount
