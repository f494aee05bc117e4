"""Contract §2, Clock: times come from the database's clock where it has one (PostgreSQL), and an
embedded database uses the process clock. Checked over gRPC with the server process's own clock an
hour fast: a memory's `created_at` follows PostgreSQL's clock on PostgreSQL (slowave.clock.
DatabaseClock: read at most once a second, extended by the monotonic clock), the process clock on
SQLite."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, text

import slowave.clock
from tests.support import activate, new_scope, pb, remember, start_test_server

FAST = timedelta(hours=1)
MARGIN = timedelta(milliseconds=250)  # a loaded machine: the window around a call, not the clock's error


class _FastDatetime(datetime):
    """The process's wall clock, an hour fast."""

    @classmethod
    def now(cls, tz=None):  # type: ignore[override]
        return datetime.now(tz) + FAST


@pytest.fixture
def fast_process_clock(monkeypatch):
    monkeypatch.setattr(slowave.clock, "datetime", _FastDatetime)


def _created_at(server, scope: str, content: str) -> datetime:
    opened = activate(server.stub, scope)
    remember(server.stub, opened.session_id, scope, content)
    found = server.stub.Recall(pb.RecallRequest(session_id=opened.session_id, scope=scope, query=content), timeout=30)
    (memory,) = [m for m in found.memories if m.content == content]
    return memory.created_at.ToDatetime(tzinfo=UTC)


def test_times_come_from_the_databases_clock_or_the_process_clock(tmp_path, fast_process_clock):
    server = start_test_server(tmp_path)
    try:
        postgres = server.database_url.startswith("postgresql")
        engine = create_engine(server.database_url) if postgres else None

        def reference() -> datetime:
            if engine is None:
                return datetime.now(UTC) + FAST  # SQLite: the process clock, fast as it is
            with engine.connect() as connection:
                return connection.execute(text("SELECT clock_timestamp()")).scalar_one().astimezone(UTC)

        for i in range(3):  # the first reading of PostgreSQL's clock, then times extended from it
            before = reference()
            created = _created_at(server, new_scope(), f"The ledger export job number {i} runs nightly.")
            after = reference()
            assert before - MARGIN <= created <= after + MARGIN, (before, created, after)
        if engine is not None:
            engine.dispose()
    finally:
        server.stop()
