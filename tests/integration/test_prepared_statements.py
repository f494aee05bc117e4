"""On SQLite a statement is prepared once per connection and then only run again: Activate's
statements are never re-parsed (storage.executor). SQLite re-prepares a cached statement when
something expires it — `PRAGMA query_only`, which a read-only unit of work used to set and clear —
or when a value bound again can change its plan, as a status compared with a partial index's
condition can. Re-parsing was ≈ 0.7 ms of a 100k-memory Activate. SQLite's `sqlite_stmt` table
counts, per prepared statement, how often it ran and how often it was re-prepared."""

from __future__ import annotations

import pytest

from tests.support import activate, new_scope, remember, start_test_server, wait_until


def _prepared_statements(engine) -> list[tuple[int, str, int, int]] | None:
    """(connection, sql, reprep, run) of every statement prepared on the pool's connections, or
    None while a background thread of the server (gauges, reaper) has one checked out."""
    held = [engine.raw_connection() for _ in range(engine.pool.checkedin())]
    try:
        if engine.pool.checkedout() != len(held):
            return None
        return [
            (id(connection.driver_connection), *row)
            for connection in held
            for row in connection.driver_connection.execute("SELECT sql, reprep, run FROM sqlite_stmt").fetchall()
        ]
    finally:
        for connection in held:
            connection.close()


def test_activate_runs_its_prepared_statements_without_re_preparing_them(tmp_path):
    server = start_test_server(tmp_path)
    try:
        if server.running.ctx.db.sqlite_path is None:
            pytest.skip("SQLite's prepared statements; PostgreSQL plans statements itself")
        scope = new_scope()
        seeding = activate(server.stub, scope, task="Record the ports of the services")
        for i in range(8):
            remember(server.stub, seeding.session_id, scope, f"The ledger service {i} listens on port {7300 + i}.")
        engine = server.running.ctx.db.engine
        # Every connection's statements, the migrations' re-prepared ones included.
        before = {(c, sql): reprep for c, sql, reprep, _ in wait_until(lambda: _prepared_statements(engine))}
        asked = 6
        for i in range(asked):
            response = activate(server.stub, scope, task=f"Which port does ledger service {i} listen on?")
            assert response.memories, "each question finds its claim"
        statements = wait_until(lambda: _prepared_statements(engine))
        full_text = [run for _, sql, _, run in statements if "memories_fts MATCH" in sql]
        assert sum(full_text) >= asked, "the retrievals' full-text statement is among them"
        grown = [(sql, reprep) for c, sql, reprep, _ in statements if reprep > before.get((c, sql), 0)]
        assert grown == []
    finally:
        server.stop()
