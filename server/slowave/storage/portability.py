"""Whole tables read and written as plain records: what export, import and copy move between stores.

A record is one row with every column of storage.tables, encoded so that JSON carries it exactly
and identically from either backend: UTC ISO 8601 datetimes, base64 bytes, JSON columns as they
are. Rows are read in primary-key order, strings compared bytewise on both backends (SQLite's
BINARY collation, PostgreSQL's "C"), so two stores holding the same rows give the same records in
the same order. The full-text index is not a table of storage.tables: it is rebuilt from each
inserted memory's stored terms, exactly as Remember wrote it.
"""

from __future__ import annotations

import base64
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from alembic.config import Config
from alembic.script import ScriptDirectory
from sqlalchemy import (
    Column,
    ColumnElement,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    bindparam,
    column,
    false,
    func,
    or_,
    select,
    table,
    tuple_,
)
from sqlalchemy.pool import NullPool

from slowave.storage import executor, full_text
from slowave.storage import tables as t
from slowave.storage.database import MIGRATIONS, Database
from slowave.storage.executor import Executor, any_of, values_of
from slowave.storage.search_terms import index_text, scope_key

TABLES: tuple[Table, ...] = (
    t.tenants,
    t.api_keys,
    t.sessions,
    t.continuity_tokens,
    t.occasions,
    t.memories,
    t.memory_vectors,
    t.scope_terms,
    t.source_events,
    t.episodes,
    t.session_memory_links,
    t.procedures,
    t.cues,
    t.retrievals,
    t.cursors,
    t.exposures,
    t.feedback_rows,
    t.memory_cue_evidence,
    t.knowledge_gaps,
    t.consolidation_queue,
    t.erasures,
)
"""Every table, in an order where what a row refers to comes before it (cursors and exposures
reference retrievals by foreign key)."""

BY_NAME = {tbl.name: tbl for tbl in TABLES}


@dataclass(frozen=True)
class Selection:
    """What a stream holds: the whole store, one tenant, or one scope of one tenant."""

    tenant: str | None = None
    scope: str | None = None
    vectors: bool = True
    """Semantic vectors can be left out: `slowave-admin embed` rebuilds them."""

    def __post_init__(self) -> None:
        if self.scope is not None and self.tenant is None:
            raise ValueError("a scope is selected within a tenant: give --tenant too")

    def tables(self) -> list[Table]:
        chosen = list(TABLES)
        if not self.vectors:
            chosen.remove(t.memory_vectors)
        if self.scope is not None:
            # A tenant's state and keys belong to the whole tenant, not to one of its scopes.
            chosen = [tbl for tbl in chosen if tbl not in (t.tenants, t.api_keys)]
        return chosen

    def as_json(self) -> dict[str, Any]:
        return {"tenant": self.tenant, "scope": self.scope, "vectors": self.vectors}


def selected(tbl: Table, sel: Selection) -> list[ColumnElement[bool]]:
    """The conditions that keep a table's rows of the selection (none for the whole store)."""
    if sel.tenant is None:
        return []
    c = tbl.c
    if tbl is t.tenants:
        return [c.name == sel.tenant]
    in_tenant: list[ColumnElement[bool]] = [c.tenant == sel.tenant] if "tenant" in c else []
    if "scope" in c:
        return in_tenant + ([c.scope == sel.scope] if sel.scope is not None else [])
    if tbl is t.session_memory_links:
        return [c.session_id.in_(select(t.sessions.c.id).where(*selected(t.sessions, sel)))]
    if tbl is t.memory_cue_evidence:
        return [c.memory_number.in_(select(t.memories.c.number).where(*selected(t.memories, sel)))]
    if tbl in (t.cursors, t.exposures):
        return [c.retrieval_id.in_(select(t.retrievals.c.id).where(*selected(t.retrievals, sel)))]
    if sel.scope is None:
        return in_tenant
    if tbl is t.cues:
        # The cues the scope's retrievals were ranked for and its memories learned under.
        evidence = t.memory_cue_evidence
        return in_tenant + [
            or_(
                c.number.in_(select(t.retrievals.c.cue_number).where(*selected(t.retrievals, sel))),
                c.number.in_(select(evidence.c.cue_number).where(*selected(evidence, sel))),
            )
        ]
    if "session_id" in c:  # source events, episodes, the ledger, the consolidation queue
        return in_tenant + [c.session_id.in_(select(t.sessions.c.id).where(*selected(t.sessions, sel)))]
    if tbl is t.api_keys:
        return in_tenant
    raise AssertionError(f"no selection rule for table {tbl.name}")


# ------------------------------------------------------------------ encoding


def recorded(tbl: Table) -> list[Column]:
    """The columns a record carries: not those the database generates (memories.content_tail),
    which it writes again from the others."""
    return [c for c in tbl.c if c.computed is None]


def encode(tbl: Table, row: Any) -> dict[str, Any]:
    values = row._mapping
    return {c.name: _encode_value(c, values[c.name]) for c in recorded(tbl)}


def _encode_value(col: Column, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(col.type, t.UtcDateTime):
        return value.astimezone(UTC).isoformat()
    if isinstance(col.type, LargeBinary):
        return base64.b64encode(bytes(value)).decode("ascii")
    return value


def decode(tbl: Table, record: dict[str, Any]) -> dict[str, Any]:
    """A record as the row to insert; refuses a record whose columns are not the table's."""
    columns = recorded(tbl)
    names = {c.name for c in columns}
    if set(record) != names:
        extra, lacking = sorted(set(record) - names), sorted(names - set(record))
        raise ValueError(f"table {tbl.name}: record columns differ (unknown {extra}, missing {lacking})")
    return {c.name: _decode_value(c, record[c.name]) for c in columns}


def _decode_value(col: Column, value: Any) -> Any:
    if value is None:
        return None
    if isinstance(col.type, t.UtcDateTime):
        return datetime.fromisoformat(value).astimezone(UTC)
    if isinstance(col.type, LargeBinary):
        return base64.b64decode(value)
    return value


def key_of(tbl: Table, record: dict[str, Any]) -> tuple:
    return tuple(record[c.name] for c in tbl.primary_key.columns)


# ------------------------------------------------------------------ reading


@contextmanager
def snapshot(db: Database) -> Iterator[Executor]:
    """One consistent read of the whole store that never blocks the server's writers: a deferred
    SQLite read transaction (WAL readers see the database as of their first read), a REPEATABLE
    READ transaction on PostgreSQL. Rolled back at the end: nothing is written through it."""
    if db.sqlite_path is not None:
        from sqlalchemy import create_engine

        engine = create_engine("sqlite://", creator=executor.sqlite_connector(db.sqlite_path), poolclass=NullPool)
        try:
            with engine.connect() as connection:
                driver = connection.connection.driver_connection
                driver.isolation_level = None  # pysqlite would otherwise open no transaction for reads
                driver.execute("BEGIN")
                try:
                    yield Executor(connection)
                finally:
                    driver.execute("ROLLBACK")
        finally:
            engine.dispose()
        return
    with db.engine.connect().execution_options(isolation_level="REPEATABLE READ") as connection:
        with connection.begin() as trans:
            try:
                yield Executor(connection)
            finally:
                trans.rollback()


def _ordered(ex: Executor, col: Column) -> ColumnElement[Any]:
    if ex.dialect == "postgresql" and isinstance(col.type, String | Text):
        return col.collate("C")
    return col


def read_rows(ex: Executor, tbl: Table, sel: Selection, batch: int = 2000) -> Iterator[dict[str, Any]]:
    """The selection's rows of a table, encoded, in primary-key order; one page at a time (keyset
    pagination), so a table of any size is never held whole."""
    pk = list(tbl.primary_key.columns)
    order = [_ordered(ex, c) for c in pk]
    base = select(tbl).where(*selected(tbl, sel)).order_by(*order).limit(batch)
    after = [bindparam(f"k_{c.name}", type_=c.type) for c in pk]
    following = base.where(tuple_(*order) > tuple_(*after) if len(pk) > 1 else order[0] > after[0])
    params: dict[str, Any] = {}
    stmt = base
    while True:
        rows = ex.rows(stmt, params)
        for row in rows:
            yield encode(tbl, row)
        if len(rows) < batch:
            return
        last = rows[-1]._mapping
        params = {f"k_{c.name}": last[c.name] for c in pk}
        stmt = following


_COUNTS = {tbl.name: select(func.count()).select_from(tbl) for tbl in TABLES}


def table_counts(ex: Executor) -> dict[str, int]:
    return {name: ex.scalar(stmt) for name, stmt in _COUNTS.items()}


_ALEMBIC = table("alembic_version", column("version_num", String))


def schema_revision(ex: Executor) -> str | None:
    return ex.scalar(select(_ALEMBIC.c.version_num))


def _scripts() -> ScriptDirectory:
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS))
    return ScriptDirectory.from_config(cfg)


def head_revision() -> str:
    head = _scripts().get_current_head()
    assert head is not None
    return head


def known_revisions() -> set[str]:
    return {script.revision for script in _scripts().walk_revisions()}


# ------------------------------------------------------------------ writing


@contextmanager
def writing(db: Database) -> Iterator[RowWriter]:
    """One transaction of the target store (queued behind its other writers like any unit of work)."""
    with db.transaction() as uow:
        yield RowWriter(uow._ex)


class RowWriter:
    """Inserts decoded rows with their given keys, and what the service derives from them."""

    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def insert(self, tbl: Table, rows: list[dict[str, Any]]) -> None:
        if not rows:
            return
        self.ex.insert_many(tbl, rows)
        if tbl is t.memories:
            # The full-text entry Remember wrote with the memory (storage.memories.insert_many):
            # its own terms and its session context's, under its scope's partition key.
            index = [
                {
                    "n": r["number"],
                    "w": index_text(
                        scope_key(r["tenant"], r["scope"]),
                        (r["own_terms"] or "").split(),
                        (r["context_terms"] or "").split(),
                    ),
                }
                for r in rows
            ]
            self.ex.run_many(full_text.INDEX_WORDS, index)

    def existing(self, tbl: Table, sel: Selection) -> dict[tuple, dict[str, Any]]:
        """The target's rows of the selection, by primary key (what an import compares with)."""
        return {key_of(tbl, r): r for r in read_rows(self.ex, tbl, sel)}

    def taken(self, tbl: Table, keys: list[Any]) -> list[Any]:
        """Which of these keys of a table with a one-column primary key the target already uses,
        in or out of the selection."""
        (col,) = tbl.primary_key.columns
        stmt = select(col).where(any_of(col, values_of("keys", col.type)))
        found: list[Any] = []
        for start in range(0, len(keys), 1000):
            found += [r[0] for r in self.ex.rows(stmt, {"keys": keys[start : start + 1000]})]
        return found

    def reset_sequences(self) -> None:
        """PostgreSQL: rows inserted with their numbers leave the sequences behind; the next number
        each hands out must follow the largest stored (SQLite numbers from the largest row itself)."""
        if self.ex.dialect != "postgresql":
            return
        for tbl in TABLES:
            pk = list(tbl.primary_key.columns)
            if len(pk) != 1 or not isinstance(pk[0].type, Integer):
                continue
            col = pk[0]
            sequence = func.pg_get_serial_sequence(tbl.name, col.name)
            top = select(func.coalesce(func.max(col), 0) + 1).scalar_subquery()
            self.ex.run(select(func.setval(sequence, top, false())).where(sequence.is_not(None)))
