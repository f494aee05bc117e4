"""Fixtures of the unit tests that need a real store."""

from __future__ import annotations

from pathlib import Path

import pytest

from slowave.storage.database import Database


@pytest.fixture
def db(tmp_path: Path) -> Database:
    """A migrated SQLite store of its own."""
    database = Database(f"sqlite:///{tmp_path / 'store.db'}")
    database.migrate()
    yield database
    database.dispose()
