"""SQLite's write-ahead log is copied back off the request path, and stays small (WalCheckpointer)."""

from __future__ import annotations

import os
import sqlite3

import pytest
from sqlalchemy import text

from slowave.storage.database import Database, WalCheckpointer
from tests.support import wait_until


@pytest.fixture(autouse=True)
def filler(db: Database) -> None:
    with db.engine.begin() as conn:
        conn.execute(text("CREATE TABLE filler (x BLOB)"))


def _write(db: Database, transactions: int, rows: int = 20) -> None:
    for _ in range(transactions):
        with db.transaction() as uow:  # a request's lock, transaction and pace
            for _ in range(rows):
                uow._ex.connection.execute(text("INSERT INTO filler VALUES (randomblob(2000))"))


def _log_frames(path: str) -> int:
    """Frames the WAL file has room for (read from its size: asking SQLite would checkpoint)."""
    size = os.path.getsize(path + "-wal") if os.path.exists(path + "-wal") else 0
    with sqlite3.connect(path) as check:
        page = check.execute("PRAGMA page_size").fetchone()[0]
    return max(0, (size - 32) // (page + 24))  # a 32-byte log header, 24 bytes per frame header


def test_request_connections_never_checkpoint_in_their_commit(db: Database) -> None:
    with db.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar() == 0


def test_a_checkpoint_copies_the_log_and_the_next_write_starts_it_afresh(db: Database) -> None:
    checkpointer = WalCheckpointer(db.sqlite_path, writer_lock=db._writer)
    _write(db, 30)
    grown = _log_frames(db.sqlite_path)
    assert grown > 300  # ≈ 1.2 MB written, nothing copied yet (no autocheckpoint)
    in_log, copied = checkpointer.checkpoint()
    assert in_log == copied == grown and checkpointer.checkpoints == 1
    _write(db, 15)
    # Half as much again, written from the log's beginning: the file did not grow.
    assert _log_frames(db.sqlite_path) == grown
    with sqlite3.connect(db.sqlite_path) as check:
        assert check.execute("SELECT count(*) FROM filler").fetchone()[0] == 45 * 20


def test_the_background_checkpointer_keeps_up_with_writes_and_stops(db: Database) -> None:
    checkpointer = db.background_checkpoints(interval=0.05)
    try:

        def written_and_checkpointed() -> bool:
            _write(db, 2)  # an idle store is left alone, so keep writing while waiting
            return checkpointer.checkpoints >= 2

        wait_until(written_and_checkpointed, timeout=60, what="background checkpoints")
    finally:
        checkpointer.stop()
    assert not checkpointer._loop.alive


def test_an_idle_store_is_checkpointed_once(db: Database) -> None:
    checkpointer = WalCheckpointer(db.sqlite_path, writer_lock=db._writer)
    _write(db, 5)
    first = checkpointer.checkpoint()
    assert first[0] == first[1] > 0 and checkpointer.checkpoints == 1
    assert checkpointer.checkpoint() == first and checkpointer.checkpoints == 1  # nothing new: no work


def test_under_back_to_back_writes_the_log_still_restarts(db: Database) -> None:
    """A transaction is nearly always open; the log must not grow with everything ever written."""
    import threading

    done = threading.Event()
    written = [0]

    def writer() -> None:
        while not done.is_set():
            _write(db, 1, rows=5)
            written[0] += 1

    thread = threading.Thread(target=writer)
    thread.start()
    checkpointer = db.background_checkpoints(interval=0.05)

    # ≥ 3 pages per transaction (2 KB rows, table and its interior): a log that never restarted
    # would hold at least that many frames. Polled rather than read once at the end, so a loaded
    # machine that delays one checkpoint past the last write does not fail the property.
    def restarted() -> bool:
        return checkpointer.checkpoints >= 10 and written[0] >= 400 and _log_frames(db.sqlite_path) < written[0] * 3 / 2

    try:
        wait_until(restarted, timeout=120, what="the log to restart under back-to-back writes")
    finally:
        done.set()
        thread.join()
        checkpointer.stop()
