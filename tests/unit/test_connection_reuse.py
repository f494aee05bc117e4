"""A SQLite server hands each transaction the connection returned last (storage.database): SQLite
drops a connection's page cache when another connection has committed since it last read, so the
connection that just wrote is the one whose cache is still good."""

from __future__ import annotations

from pathlib import Path

from slowave.storage.database import Database


def _raw(uow) -> object:
    return uow._ex.connection.connection.dbapi_connection


def test_the_next_transaction_gets_the_connection_returned_last(tmp_path: Path) -> None:
    db = Database(f"sqlite:///{tmp_path / 'store.db'}")
    db.migrate()
    try:
        with db.transaction(read_only=True) as outer:
            held = _raw(outer)
            with db.transaction() as inner:  # a second connection, returned first
                first_returned = _raw(inner)
        assert first_returned is not held
        for _ in range(3):
            with db.transaction() as uow:
                assert _raw(uow) is held
            with db.transaction(read_only=True) as view:
                assert _raw(view) is held
    finally:
        db.dispose()
