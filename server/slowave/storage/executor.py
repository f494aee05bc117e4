"""Runs the storage's SQLAlchemy Core statements: each one compiled once, then executed on the fastest
path its backend allows. The only module that talks to `sqlite3` and to psycopg's connection itself.

SQLAlchemy's execution machinery costs ≈ 0.1–0.3 ms per statement, more than SQLite needs to run
the small statements every Activate, Recall, Feedback and Commit issues a dozen of. So on SQLite a
statement is compiled once (to SQLite's own SQL with named parameters) and then runs through the
driver's cursor on the unit of work's connection and transaction, its values converted by the bind
and result processors its column types give for the dialect (UTC datetimes, JSON, booleans): a row
written or read this way is the one SQLAlchemy would write or read.

PostgreSQL's statements take the same path on psycopg's connection: the SQL SQLAlchemy would send
for the dialect (its bind casts; a list parameter expanded to one placeholder per value, as
SQLAlchemy's expanding IN does, so the server sees, and psycopg prepares, the same texts), compiled
once; an INSERT reads its new key back with RETURNING. Measured on one SELECT by key: 0.137 ms of CPU
through SQLAlchemy against 0.072 ms on the driver, and SQLAlchemy asked psycopg for the result's
column descriptions on every statement; an Activate at 10k memories went from 6.5–6.9 to 4.0–4.6 ms
of CPU (bench/results/history.md, 2026-12-05 20:30). A driver error is wrapped as SQLAlchemy would
wrap it (a lost connection invalidated), so storage.database maps both paths alike. Only a list
parameter with no values (SQLAlchemy renders a condition no row meets) runs through SQLAlchemy.

Statements are built once (module constants, or builders cached per shape): the compiled forms are
kept per statement object for as long as the statement lives.
"""

from __future__ import annotations

import functools
import json
import re
import sqlite3
import weakref
from collections import namedtuple
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Connection, String, Table, bindparam, insert, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.dialects.sqlite.base import SQLiteCompiler
from sqlalchemy.engine import Dialect
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql import Executable
from sqlalchemy.sql.elements import BindParameter
from sqlalchemy.sql.functions import FunctionElement
from sqlalchemy.types import TypeDecorator, TypeEngine

# ------------------------------------------------------------------ constructs written once for both backends


class Values(TypeDecorator):
    """A list bound as one parameter, JSON text for SQLite's json_each (see `any_of`)."""

    impl = String
    cache_ok = True

    def __init__(self, element: TypeEngine) -> None:
        super().__init__()
        self.element = element

    def process_bind_param(self, value: Sequence[Any] | None, dialect: Dialect) -> Any:
        return None if value is None else json.dumps(list(value))


def values_of(name: str, element: TypeEngine) -> Any:
    """The list parameter `name` (its elements of type `element`), for `any_of`."""
    return bindparam(name, type_=Values(element))


class any_of(FunctionElement):
    """`column` equals one of the values of a list parameter (`values_of`).

    SQLite reads the list as one JSON parameter, so the statement the executor compiles once serves
    every length. PostgreSQL gets SQLAlchemy's expanding IN (one parameter per value, its compiled
    cache renders the length): with `= ANY(array)` psycopg's prepared statements soon ran on
    generic plans, 6 ms instead of 1 ms for the window over a memory's cue evidence."""

    # No Boolean type: SQLite's compiler would write `… = 1` after it, which no index can serve.
    inherit_cache = True
    name = "any_of"


@compiles(any_of, "sqlite")
def _any_of_sqlite(element: any_of, compiler, **kw: Any) -> str:
    column, values = element.clauses
    return f"{compiler.process(column, **kw)} IN (SELECT value FROM json_each({compiler.process(values, **kw)}))"


@compiles(any_of)
def _any_of(element: any_of, compiler, **kw: Any) -> str:
    column, values = element.clauses
    expanding = bindparam(values.key, expanding=True, type_=values.type.element)
    return compiler.process(column.in_(expanding), **kw)


class not_indexed(FunctionElement):
    """A column that must not choose SQLite's index (`+column`, a no-op on the value): keeps the
    planner on the row lookups a statement is written for. PostgreSQL plans by statistics; it reads
    the plain column."""

    inherit_cache = True
    name = "not_indexed"

    @property
    def type(self) -> TypeEngine:  # the column's own, so comparisons bind as they would to it
        return next(iter(self.clauses)).type


@compiles(not_indexed)
def _not_indexed(element: not_indexed, compiler, **kw: Any) -> str:
    return compiler.process(next(iter(element.clauses)), **kw)


@compiles(not_indexed, "sqlite")
def _not_indexed_sqlite(element: not_indexed, compiler, **kw: Any) -> str:
    return "+" + compiler.process(next(iter(element.clauses)), **kw)


class occurs_in(FunctionElement):
    """The text `part` occurs in the text `whole`."""

    inherit_cache = True
    name = "occurs_in"


@compiles(occurs_in, "sqlite")
def _occurs_in_sqlite(element: occurs_in, compiler, **kw: Any) -> str:
    part, whole = element.clauses
    return f"instr({compiler.process(whole, **kw)}, {compiler.process(part, **kw)}) > 0"


@compiles(occurs_in)
def _occurs_in(element: occurs_in, compiler, **kw: Any) -> str:
    part, whole = element.clauses
    return f"strpos({compiler.process(whole, **kw)}, {compiler.process(part, **kw)}) > 0"


class PerDialect:
    """A statement whose text depends on the backend (full-text search, sequences, upserts): built
    once per backend, on first use, by `build(dialect name)`; None where the backend needs none."""

    def __init__(self, build: Callable[[str], Executable | None]) -> None:
        self._build = build
        self._built: dict[str, Executable | None] = {}

    def get(self, dialect: str) -> Executable | None:
        try:
            return self._built[dialect]
        except KeyError:
            stmt = self._built[dialect] = self._build(dialect)
            return stmt


_DIALECT_INSERT = {"sqlite": sqlite.insert, "postgresql": postgresql.insert}


def upsert(build: Callable[[Callable[[Table], Any]], Executable]) -> PerDialect:
    """An INSERT … ON CONFLICT, built with the backend's `insert` (both spell the clause alike)."""
    return PerDialect(lambda dialect: build(_DIALECT_INSERT[dialect]))


# ------------------------------------------------------------------ statements of one shape, built once


@functools.cache
def _row_where(table: Table, keys: tuple[str, ...], lock: bool) -> Executable:
    stmt = select(table).where(*(table.c[k] == bindparam(f"w_{k}") for k in keys)).limit(1)
    return stmt.with_for_update() if lock else stmt


@functools.cache
def _update_where(table: Table, keys: tuple[str, ...], columns: tuple[str, ...]) -> Executable:
    return (
        update(table)
        .where(*(table.c[k] == bindparam(f"w_{k}") for k in keys))
        .values({c: bindparam(f"v_{c}") for c in columns})
    )


@functools.cache
def _insert(table: Table) -> Executable:
    return insert(table)


# ------------------------------------------------------------------ SQLite: compiled once, run on the driver

_Processor = Callable[[Any], Any] | None
_CONSTANT_WORD = re.compile(r"[A-Za-z0-9_]{1,32}")


def _is_constant(bind: BindParameter) -> bool:
    """A value the statement itself carries (`status == "active"`, `.limit(1)`), as opposed to one
    the caller binds at each run; only numbers and enum-like words, which read the same inline."""
    value = bind.value
    if bind.required or bind.callable is not None or bind.expanding or value is None:
        return False
    return isinstance(value, int) or (isinstance(value, str) and _CONSTANT_WORD.fullmatch(value) is not None)


class _ConstantsInline(SQLiteCompiler):
    """Writes a statement's own constants into its SQL instead of binding them.

    SQLite re-prepares a statement every time a bound value that can change its plan is bound
    again, and a value compared with a partial index's condition can (`status = :status_1` against
    `uq_memories_active_claim ... WHERE status = 'active'`): every retrieval re-parsed its four
    largest statements, ≈ 0.7 ms of a 100k-memory Activate. A literal is compiled once."""

    def visit_bindparam(self, bindparam, **kw):
        if _is_constant(bindparam):
            kw["literal_binds"] = True
        return super().visit_bindparam(bindparam, **kw)


_NAMED_SQLITE = sqlite.dialect(paramstyle="named")
_NAMED_SQLITE.statement_compiler = _ConstantsInline


def _row_type(names: Sequence[str]) -> type:
    """A named tuple that also answers `_mapping`, like SQLAlchemy's Row."""
    base = namedtuple("StoredRow", names, rename=True)
    return type("StoredRow", (base,), {"__slots__": (), "_mapping": property(lambda self: self._asdict())})


class _Results:
    """What a statement's rows come back as: named tuples (`_row_type`, named from the first result's
    columns), each value through its column type's result processor for the dialect."""

    __slots__ = ("results", "row_type")

    def __init__(self, stmt: Executable, dialect: Dialect) -> None:
        columns = getattr(stmt, "selected_columns", ())
        results = [c.type.dialect_impl(dialect).result_processor(dialect, None) for c in columns]
        self.results: tuple[_Processor, ...] | None = tuple(results) if any(results) else None
        self.row_type: type | None = None

    def rows(self, cursor: Any) -> list[Any]:
        """Every row of a driver cursor's result (sqlite3's or psycopg's: both iterate over it)."""
        row_type = self.row_type
        if row_type is None:
            row_type = self.row_type = _row_type([d[0] for d in cursor.description])
        results = self.results
        if results is None:
            return [row_type._make(raw) for raw in cursor]
        return [row_type._make([p(v) if p is not None else v for p, v in zip(results, raw)]) for raw in cursor]


class _Compiled(_Results):
    """A compiled statement: its SQL, the values it binds itself and how to convert what the caller
    binds (each by its type's bind processor for the dialect). `defaults`: an INSERT's columns, each
    _GIVEN or the value written when it is omitted."""

    __slots__ = ("fixed", "processors", "sql")

    def __init__(self, stmt: Executable, compiled: Any, dialect: Dialect, defaults: dict[str, Any] | None) -> None:
        self.sql: str | None = compiled.string
        self.processors: dict[str, _Processor] = {}
        self.fixed: dict[str, Any] = {}
        for name, value in compiled.params.items():
            bind = compiled.binds[name]
            processor = _bind_processor(bind.type, dialect)
            if processor is not None:
                self.processors[name] = processor
            if bind.expanding:
                continue  # a list, bound per call (_PgPlan)
            if defaults is not None:
                value = defaults.get(name, _GIVEN)
                if value is _GIVEN:
                    continue
            self.fixed[name] = processor(value) if processor is not None else value
        super().__init__(stmt, dialect)

    def parameters(self, given: dict[str, Any]) -> dict[str, Any]:
        params = dict(self.fixed)
        processors = self.processors
        for name, value in given.items():
            processor = processors.get(name)
            params[name] = processor(value) if processor is not None else value
        return params


class _Plan(_Compiled):
    """A statement as SQLite runs it (named parameters, its own constants inline)."""

    __slots__ = ()

    def __init__(self, stmt: Executable, dialect: Dialect, defaults: dict[str, Any] | None = None) -> None:
        column_keys = None if defaults is None else list(defaults)
        compiled = stmt.compile(dialect=_NAMED_SQLITE, column_keys=column_keys)
        if "POSTCOMPILE" in compiled.string:
            raise ValueError("a list parameter must be one value (any_of/values_of), not an expanding IN")
        super().__init__(stmt, compiled, dialect, defaults)


def _bind_processor(type_: TypeEngine, dialect: Dialect) -> _Processor:
    return type_.dialect_impl(dialect).bind_processor(dialect)


_PLANS: weakref.WeakKeyDictionary[Executable, _Plan] = weakref.WeakKeyDictionary()
_INSERT_PLANS: dict[tuple[Table, tuple[str, ...]], tuple[_Plan, str | None]] = {}
_GIVEN = object()  # an insert's column whose value the caller gives


def _insert_defaults(table: Table, keys: tuple[str, ...]) -> dict[str, Any]:
    """An INSERT's columns: the given ones (_GIVEN), and the scalar Python-side defaults of the
    omitted ones, as SQLAlchemy would fill them in."""
    values: dict[str, Any] = dict.fromkeys(keys, _GIVEN)
    values.update(
        (c.key, c.default.arg) for c in table.c if c.key not in keys and c.default is not None and c.default.is_scalar
    )
    return values


# ------------------------------------------------------------------ PostgreSQL: compiled once, run on psycopg

_LENGTHS_KEPT = 64  # SQL texts kept per statement for the lengths of its list parameters


class _PgPlan(_Compiled):
    """A statement as psycopg runs it: the SQL SQLAlchemy sends for the dialect. A list parameter
    (`any_of`) is expanded per call into one placeholder per value, exactly as SQLAlchemy's expanding
    IN renders it; `sql` is None for a statement this path does not run (a parameter SQLAlchemy
    renders at execution time for another reason)."""

    __slots__ = ("_by_lengths", "lists")

    def __init__(self, stmt: Executable, dialect: Dialect, defaults: dict[str, Any] | None = None) -> None:
        column_keys = None if defaults is None else list(defaults)
        compiled = stmt.compile(dialect=dialect, column_keys=column_keys)
        super().__init__(stmt, compiled, dialect, defaults)
        # A list parameter's name → the placeholder of one of its values, with its bind cast.
        self.lists: dict[str, str] = {
            name: bindparam(name, type_=compiled.binds[name].type).compile(dialect=dialect).string
            for name in compiled.params
            if compiled.binds[name].expanding
        }
        if compiled.string.count("__[POSTCOMPILE_") != len(self.lists):
            self.sql = None
        self._by_lengths: dict[tuple[int, ...], str] = {}

    def bind(self, given: dict[str, Any]) -> tuple[str, dict[str, Any]] | None:
        """The SQL and parameters of one call; None when SQLAlchemy must run it (an empty list,
        which SQLAlchemy renders as a condition no row meets)."""
        lists = self.lists
        if not lists:
            return self.sql, self.parameters(given)  # type: ignore[return-value]
        lengths = tuple(len(given[name]) for name in lists)
        if 0 in lengths:
            return None
        sql = self._by_lengths.get(lengths)
        if sql is None:
            sql = self.sql
            for (name, one), n in zip(lists.items(), lengths):
                placeholders = ", ".join(one.replace(f"%({name})s", f"%({name}_{i})s") for i in range(1, n + 1))
                sql = sql.replace(f"__[POSTCOMPILE_{name}]", placeholders)  # type: ignore[union-attr]
            if len(self._by_lengths) < _LENGTHS_KEPT:
                self._by_lengths[lengths] = sql
        params = self.parameters({name: value for name, value in given.items() if name not in lists})
        for name in lists:
            processor = self.processors.get(name)
            for i, value in enumerate(given[name], 1):
                params[f"{name}_{i}"] = processor(value) if processor is not None else value
        return sql, params  # type: ignore[return-value]


_PG_PLANS: weakref.WeakKeyDictionary[Executable, _PgPlan] = weakref.WeakKeyDictionary()
_PG_INSERT_PLANS: dict[tuple[Table, tuple[str, ...], bool], _PgPlan] = {}


# ------------------------------------------------------------------ the executor


def _locks_or_writes(stmt: Executable) -> bool:
    """INSERT/UPDATE/DELETE … RETURNING, or a read that takes row locks (SELECT … FOR UPDATE)."""
    return getattr(stmt, "is_dml", False) or getattr(stmt, "_for_update_arg", None) is not None


class ReadOnlyUnitOfWork(RuntimeError):
    """A statement that writes was run in a read-only unit of work (a bug, never a client's error)."""


class Executor:
    """The statements of one unit of work, on its connection and transaction.

    `read_only`: every statement that writes is refused before it reaches the database. SQLite's
    own switch for that (`PRAGMA query_only`) expires every prepared statement of the connection
    each time it is set, so the snapshot that every Activate ranks in re-parsed all its statements;
    PostgreSQL also refuses the write itself (`SET TRANSACTION READ ONLY`). Every write goes through
    `run`, `run_many`, `insert`, `insert_many` or `savepoint`; `rows` refuses Core INSERT, UPDATE and
    DELETE (… RETURNING) and SELECT … FOR UPDATE. A textual statement given to `rows` is not
    inspected: the stores write text (PRAGMA) only through `run`."""

    def __init__(self, connection: Connection, read_only: bool = False) -> None:
        self.connection = connection
        self.dialect = connection.dialect.name
        self.read_only = read_only
        driver = connection.connection.driver_connection
        self._driver = driver if self.dialect == "sqlite" else None
        self._pg = driver if self.dialect == "postgresql" else None
        self._pg_cursor: Any = driver.cursor() if self._pg is not None else None  # one per unit of work

    def _refuse_in_read_only(self) -> None:
        if self.read_only:
            raise ReadOnlyUnitOfWork("a read-only unit of work does not write")

    def _resolve(self, stmt: Executable | PerDialect) -> Executable | None:
        return stmt.get(self.dialect) if type(stmt) is PerDialect else stmt

    def _plan(self, stmt: Executable) -> _Plan:
        plan = _PLANS.get(stmt)
        if plan is None:
            plan = _PLANS[stmt] = _Plan(stmt, self.connection.dialect)
        return plan

    def _pg_plan(self, stmt: Executable) -> _PgPlan:
        plan = _PG_PLANS.get(stmt)
        if plan is None:
            plan = _PG_PLANS[stmt] = _PgPlan(stmt, self.connection.dialect)
        return plan

    def _pg_run(self, plan: _PgPlan, params: dict[str, Any] | None) -> Any | None:
        """Runs a statement on psycopg's connection; returns its cursor, or None when SQLAlchemy
        must run it (`_PgPlan.bind`)."""
        if plan.sql is None:
            return None
        bound = plan.bind(params or {})
        if bound is None:
            return None
        sql, values = bound
        try:
            self._pg_cursor.execute(sql, values)
        except self.connection.dialect.loaded_dbapi.Error as exc:
            raise self._pg_error(exc, sql, values) from exc
        return self._pg_cursor

    def _pg_run_many(self, plan: _PgPlan, rows: Sequence[dict[str, Any]]) -> bool:
        """Runs a statement once per parameter set (psycopg's executemany, pipelined); False when
        SQLAlchemy must run it (a statement with list parameters)."""
        if plan.sql is None or plan.lists:
            return False
        values = [plan.parameters(r) for r in rows]
        try:
            self._pg_cursor.executemany(plan.sql, values)
        except self.connection.dialect.loaded_dbapi.Error as exc:
            raise self._pg_error(exc, plan.sql, values[0]) from exc
        return True

    def _pg_error(self, error: Exception, sql: str, values: dict[str, Any]) -> sa_exc.DBAPIError:
        """A driver error as SQLAlchemy's connection reports it: the same exception class, and a lost
        connection invalidated (not handed to the next request by the pool)."""
        dialect = self.connection.dialect
        lost = dialect.is_disconnect(error, self._pg, self._pg_cursor)
        if lost:
            self.connection.invalidate(error)
        return sa_exc.DBAPIError.instance(
            sql, values, error, dialect.loaded_dbapi.Error, connection_invalidated=lost, dialect=dialect
        )

    def _cursor(self, stmt: Executable, params: dict[str, Any] | None) -> sqlite3.Cursor:
        plan = self._plan(stmt)
        return self._driver.execute(plan.sql, plan.parameters(params or {}))

    # -------------------------------------------------------------- reads

    def rows(self, stmt: Executable | PerDialect, params: dict[str, Any] | None = None) -> list[Any]:
        stmt = self._resolve(stmt)
        if self.read_only and _locks_or_writes(stmt):
            self._refuse_in_read_only()
        if self._driver is None:
            if self._pg is not None:
                pg_plan = self._pg_plan(stmt)
                cursor = self._pg_run(pg_plan, params)
                if cursor is not None:
                    return pg_plan.rows(cursor)
            return list(self.connection.execute(stmt, params))
        plan = self._plan(stmt)
        return plan.rows(self._driver.execute(plan.sql, plan.parameters(params or {})))

    def first(self, stmt: Executable | PerDialect, params: dict[str, Any] | None = None) -> Any | None:
        rows = self.rows(stmt, params)
        return rows[0] if rows else None

    def scalar(self, stmt: Executable | PerDialect, params: dict[str, Any] | None = None) -> Any:
        """The first column of the first row (None without rows)."""
        row = self.first(stmt, params)
        return row[0] if row is not None else None

    def row_where(self, table: Table, lock: bool = False, **equals: Any) -> Any | None:
        """The row whose columns equal the given values (a unique key); `lock` takes its row lock
        where the backend has row locks (SQLite's transactions hold the database's write lock)."""
        stmt = _row_where(table, tuple(equals), lock)
        return self.first(stmt, {f"w_{k}": v for k, v in equals.items()})

    def total_changes(self) -> int:
        """SQLite: rows (and, for FTS5's commands, pages) written by this connection so far."""
        return self._driver.total_changes if self._driver is not None else 0

    # -------------------------------------------------------------- writes

    def run(self, stmt: Executable | PerDialect, params: dict[str, Any] | None = None) -> int:
        """Runs a statement that returns no rows; returns how many rows it matched."""
        self._refuse_in_read_only()
        stmt = self._resolve(stmt)
        if stmt is None:
            return 0
        if self._driver is None:
            if self._pg is not None:
                cursor = self._pg_run(self._pg_plan(stmt), params)
                if cursor is not None:
                    return cursor.rowcount
            return self.connection.execute(stmt, params).rowcount
        return self._cursor(stmt, params).rowcount

    def run_many(self, stmt: Executable | PerDialect, rows: Sequence[dict[str, Any]]) -> None:
        """Runs a statement once per parameter set, in one call."""
        self._refuse_in_read_only()
        stmt = self._resolve(stmt)
        if not rows:
            return
        if self._driver is None:
            if self._pg is None or not self._pg_run_many(self._pg_plan(stmt), rows):
                self.connection.execute(stmt, list(rows))
            return
        plan = self._plan(stmt)
        self._driver.executemany(plan.sql, [plan.parameters(r) for r in rows])

    def update_where(self, table: Table, equals: dict[str, Any], values: dict[str, Any]) -> int:
        """Sets plain values (no SQL expressions) on the rows matching `equals`; returns their count."""
        stmt = _update_where(table, tuple(equals), tuple(values))
        params = {f"w_{k}": v for k, v in equals.items()}
        params.update((f"v_{k}", v) for k, v in values.items())
        return self.run(stmt, params)

    def insert(self, table: Table, values: dict[str, Any]) -> Any:
        """Inserts one row; returns its primary key (the given one, else the new one)."""
        self._refuse_in_read_only()
        if self._driver is None:
            if self._pg is not None:
                pg_plan, key = self._pg_insert_plan(table, tuple(values))
                cursor = self._pg_run(pg_plan, values)
                if cursor is not None:
                    return values[key] if key in values else cursor.fetchone()[0]
            return self.connection.execute(_insert(table), values).inserted_primary_key[0]
        plan, given_key = self._insert_plan(table, tuple(values))
        cursor = self._driver.execute(plan.sql, plan.parameters(values))
        return values[given_key] if given_key else cursor.lastrowid

    def insert_many(self, table: Table, rows: Sequence[dict[str, Any]]) -> None:
        """Inserts rows in list order (on SQLite one statement per run of rows with the same keys)."""
        self._refuse_in_read_only()
        if not rows:
            return
        if self._driver is None and self._pg is None:
            self.connection.execute(_insert(table), list(rows))
            return
        start = 0
        while start < len(rows):
            keys = tuple(rows[start])
            end = start + 1
            while end < len(rows) and tuple(rows[end]) == keys:
                end += 1
            if self._pg is not None:
                pg_plan, _ = self._pg_insert_plan(table, keys, returning=False)
                if not self._pg_run_many(pg_plan, rows[start:end]):
                    self.connection.execute(_insert(table), list(rows[start:end]))
            else:
                plan, _ = self._insert_plan(table, keys)
                self._driver.executemany(plan.sql, [plan.parameters(r) for r in rows[start:end]])
            start = end

    def _insert_plan(self, table: Table, keys: tuple[str, ...]) -> tuple[_Plan, str | None]:
        found = _INSERT_PLANS.get((table, keys))
        if found is None:
            plan = _Plan(_insert(table), self.connection.dialect, _insert_defaults(table, keys))
            pk = list(table.primary_key.columns)
            found = _INSERT_PLANS[(table, keys)] = (plan, pk[0].key if pk and pk[0].key in keys else None)
        return found

    def _pg_insert_plan(self, table: Table, keys: tuple[str, ...], returning: bool = True) -> tuple[_PgPlan, str]:
        """An INSERT of these columns on psycopg, and the primary key's column; `returning`: the new
        key is read back (RETURNING) when the caller does not give it."""
        pk = list(table.primary_key.columns)
        key = pk[0].key if pk else ""
        returning = returning and bool(pk) and key not in keys
        found = _PG_INSERT_PLANS.get((table, keys, returning))
        if found is None:
            stmt = _insert(table).returning(pk[0]) if returning else _insert(table)
            found = _PG_INSERT_PLANS[(table, keys, returning)] = _PgPlan(
                stmt, self.connection.dialect, _insert_defaults(table, keys)
            )
        return found, key

    @contextmanager
    def savepoint(self) -> Iterator[None]:
        """A nested transaction: rolled back alone if the block raises (the error goes on) — unless
        SQLite ended the whole transaction (TransactionLost)."""
        self._refuse_in_read_only()
        nested = self.connection.begin_nested()
        try:
            yield
        except BaseException as exc:
            if self._driver is not None and not self._driver.in_transaction:
                raise TransactionLost(str(exc)) from exc
            nested.rollback()
            raise
        nested.commit()


class TransactionLost(BaseException):
    """SQLite rolled back the whole transaction on an error inside a savepoint: a full disk, an I/O
    error, a lock or memory it could not get (SQLITE_FULL, SQLITE_IOERR, SQLITE_BUSY and SQLITE_NOMEM
    may end the transaction, not only the statement). The unit of work is gone: a caller that went
    on after the savepoint (a batch retrying its items one by one) would write outside it, each
    statement committed alone, the session's lock already released. A BaseException, like
    storage.database.CallerGone, so that no `except Exception` carries on;
    storage.database.Database.transaction reports it as the outage it is."""


# ------------------------------------------------------------------ SQLite files

SQLiteError = sqlite3.Error
SQLiteIntegrityError = sqlite3.IntegrityError


def create_sqlite_file(path: str) -> None:
    """Creates the database file (later connections never create one: see `sqlite_connector`)."""
    sqlite3.connect(path).close()


def sqlite_connector(path: str, timeout: float = 30) -> Callable[[], sqlite3.Connection]:
    def connect() -> sqlite3.Connection:
        # mode=rw: a store that disappeared is an outage (UNAVAILABLE), not a fresh empty database.
        return sqlite3.connect(f"file:{path}?mode=rw", uri=True, check_same_thread=False, timeout=timeout)

    return connect


def unreadable_database(error: BaseException | None) -> bool:
    """sqlite3.DatabaseError itself (not a subclass): the file is not, or no longer, a readable
    database ("file is not a database", "disk image is malformed")."""
    return type(error) is sqlite3.DatabaseError


# Primary result codes of a store that cannot serve just now, whatever the statement: its lock held
# past the busy timeout, an I/O error, a full disk, a file that cannot be opened or written.
# Others (SQLITE_ERROR: a statement the schema does not know) are a bug, not an outage.
_OUTAGE_CODES = frozenset(
    (
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_NOMEM,
        sqlite3.SQLITE_PROTOCOL,
    )
)


def store_outage(error: BaseException) -> bool:
    """Whether an error the sqlite3 driver raised itself means the store is unavailable. The
    executor runs SQLite statements on the driver directly, so their errors are the driver's own,
    not SQLAlchemy's wrapped ones (storage.database.Database.transaction maps both)."""
    if unreadable_database(error):
        return True
    code = getattr(error, "sqlite_errorcode", None)
    return isinstance(error, sqlite3.OperationalError) and code is not None and code & 0xFF in _OUTAGE_CODES


def wal_checkpoint(path: str) -> tuple[int, int]:
    """One PASSIVE checkpoint on a connection of its own; returns (pages in the log, pages copied)."""
    # Closed before returning: a connection still open when the next transaction begins would keep
    # its read mark, and SQLite would not restart the log.
    connection = sqlite3.connect(f"file:{path}?mode=rw", uri=True, timeout=0)
    try:
        ((_busy, in_log, copied),) = connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
    finally:
        connection.close()
    return in_log, copied


def sqlite_backup(path: str, destination: str) -> str:
    """Copies the store at `path` into a new file `destination` with SQLite's online backup API,
    while the server goes on writing; returns the copy's `PRAGMA integrity_check` verdict ("ok").

    One step copies every page: in WAL mode the source connection is then a reader holding one
    snapshot, which writers never wait for, and the copy is the database as of the step's start —
    every transaction committed before it. (A backup in several steps restarts whenever another
    connection writes in between, which under steady load may be forever.) The copy is switched to
    a rollback journal so that it is one self-contained file; a server opening it returns to WAL."""
    source = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        target = sqlite3.connect(destination)
        try:
            source.backup(target)
            target.execute("PRAGMA journal_mode=DELETE")
            ((verdict,),) = target.execute("PRAGMA integrity_check").fetchall()
        finally:
            target.close()
    finally:
        source.close()
    return str(verdict)


def sqlite_integrity(path: str) -> str:
    """`PRAGMA integrity_check` of a SQLite file ("ok" when sound)."""
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return "; ".join(str(r[0]) for r in connection.execute("PRAGMA integrity_check").fetchall())
    finally:
        connection.close()
