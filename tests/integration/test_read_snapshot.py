"""The read-only unit of work Activate and Recall rank in (Database.transaction(read_only=True)), on
both backends: it refuses writes, sees what was committed before it began, and on SQLite does not
wait for the writer — so server processes rank while another one writes."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
from sqlalchemy import bindparam, delete, select

from slowave.domain.errors import StorageUnavailable
from slowave.storage import tables
from slowave.storage.database import Database, PoolOptions
from slowave.storage.executor import ReadOnlyUnitOfWork
from tests.support import activate, new_database_url, new_scope, remember, start_test_server


def test_a_read_only_unit_refuses_writes(tmp_path):
    db = Database(new_database_url(tmp_path))
    db.migrate()
    try:
        with pytest.raises(ReadOnlyUnitOfWork), db.transaction(read_only=True) as view:
            view.gaps.record("local", "project:x", "what is missing", datetime.now(UTC))
        with db.transaction() as uow:
            assert uow.table_counts()["knowledge_gaps"] == 0
        with db.transaction(read_only=True) as view:  # the connection went back to the pool writable again
            assert view.table_counts()["knowledge_gaps"] == 0
        with db.transaction() as uow:
            uow.gaps.record("local", "project:x", "what is missing", datetime.now(UTC))
            assert uow.table_counts()["knowledge_gaps"] == 1
    finally:
        db.dispose()


def test_a_read_only_unit_refuses_every_kind_of_write_before_it_reaches_the_database(tmp_path):
    db = Database(new_database_url(tmp_path))
    db.migrate()
    gaps = tables.knowledge_gaps
    row = dict(tenant="local", scope="project:x", text_hash="h", text="t", occurrences=1, open=True)
    row |= dict(first_seen_at=datetime.now(UTC), last_seen_at=datetime.now(UTC))
    writes = {
        "insert": lambda ex: ex.insert(gaps, row),
        "insert_many": lambda ex: ex.insert_many(gaps, [row]),
        "run": lambda ex: ex.run(delete(gaps)),
        "run_many": lambda ex: ex.run_many(delete(gaps).where(gaps.c.id == bindparam("i")), [{"i": 1}]),
        "update_where": lambda ex: ex.update_where(gaps, {"tenant": "local"}, {"open": False}),
        "rows of a DML statement": lambda ex: ex.rows(delete(gaps).returning(gaps.c.id)),
        "a locking read": lambda ex: ex.rows(select(gaps).with_for_update()),
        "row_where with its lock": lambda ex: ex.row_where(gaps, lock=True, tenant="local"),
    }
    try:
        for name, write in writes.items():
            with pytest.raises(ReadOnlyUnitOfWork), db.transaction(read_only=True) as view:
                write(view._ex)
            with db.transaction(read_only=True) as view:
                assert view.table_counts()["knowledge_gaps"] == 0, name
    finally:
        db.dispose()


def test_sqlite_snapshot_reads_while_another_thread_holds_the_writer(tmp_path):
    url = new_database_url(tmp_path)
    if not url.startswith("sqlite"):
        pytest.skip("SQLite's writer lock; PostgreSQL readers never wait for writers")
    db = Database(url, PoolOptions(timeout=30))
    db.migrate()
    held, release = threading.Event(), threading.Event()

    def writer() -> None:
        with db.transaction() as uow:
            uow.gaps.record("local", "project:x", "held open", datetime.now(UTC))
            held.set()
            release.wait(60)

    t = threading.Thread(target=writer)
    t.start()
    try:
        assert held.wait(60)
        # A writing unit would wait for the writer (and time out); the snapshot reads at once and
        # does not see the uncommitted row.
        with pytest.raises(StorageUnavailable):
            Database(url, PoolOptions(timeout=0.2)).transaction().__enter__()
        with db.transaction(read_only=True) as view:
            assert view.table_counts()["knowledge_gaps"] == 0
    finally:
        release.set()
        t.join(60)
        db.dispose()


def test_activate_after_remember_sees_it_and_a_new_cue_learns(tmp_path):
    """Over gRPC: the catalog read in the snapshot holds what was acknowledged before; the cue
    first seen by that Activate is stored with its retrieval (the write phase)."""
    server = start_test_server(tmp_path)
    try:
        scope = new_scope()
        a = activate(server.stub, scope, task="Record the port")
        claim = "The ingest gateway listens on port 7311."
        remember(server.stub, a.session_id, scope, claim)
        b = activate(server.stub, scope, task="Which port does the ingest gateway listen on?")
        assert claim in [m.content for m in b.memories]
        with server.running.ctx.db.transaction() as uow:
            retrieval = uow.retrievals.get("local", b.retrieval_id)
            assert retrieval is not None and retrieval.cue_number is not None
    finally:
        server.stop()
