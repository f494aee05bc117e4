"""Retrieval's all-of query (a cue of common words only: the two or three rarest, together) returns
the newest memories holding them all, on both backends, whether its matches are dense among the
newest memories or rare and old. On PostgreSQL the two cases are asked differently
(storage.full_text.RECENT_MATCHES, then MATCHES): two common words that never occur together made
PostgreSQL walk the whole scope (403 ms at 170k memories), and reading the index first costs a row
read per match when they occur together often (168 ms for 24k matches)."""

from __future__ import annotations

import os
from datetime import UTC, datetime

import pytest
from sqlalchemy.dialects import postgresql

from slowave.storage import full_text
from slowave.storage.database import Database
from slowave.storage.full_text import RECENT_WINDOW
from tests.support import new_database_url

SIZE = RECENT_WINDOW * 2 + 500


def _store(db: Database) -> list[int]:
    now = datetime.now(UTC)
    rows = []
    for i in range(SIZE):
        # Every memory holds `alpha` or `beta`; only the oldest ten hold both. Every other memory
        # holds `gamma` too, so `alpha gamma` matches half of the newest ones.
        words = ["alpha", "beta"] if i < 10 else ["alpha", "gamma"] if i % 2 == 0 else ["beta"]
        rows.append(
            dict(
                tenant="local",
                scope="project:x",
                type="fact",
                content=" ".join(words) + f" item{i}",
                source_kind="explicit_remember",
                source_session_id="s1",
                created_at=now,
            )
        )
    with db.transaction() as uow:
        numbers = uow.memories.insert_many(rows)
        uow.memories.insert_many([dict(rows[0], scope="project:other")])  # another scope: never a match
    return numbers


def test_an_all_of_query_returns_the_newest_matches_dense_or_rare(tmp_path):
    db = Database(new_database_url(tmp_path))
    db.migrate()
    try:
        numbers = _store(db)
        with db.transaction(read_only=True) as view:
            rare = view.search.lexical_matches("local", "project:x", ["alpha", "beta"], 64, require_all=True)
            assert [r.number for r in rare] == sorted(numbers[:10], reverse=True)
            dense = view.search.lexical_matches("local", "project:x", ["alpha", "gamma"], 64, require_all=True)
            expected = sorted((n for i, n in enumerate(numbers) if i >= 10 and i % 2 == 0), reverse=True)[:64]
            assert [r.number for r in dense] == expected
            none = view.search.lexical_matches("local", "project:x", ["gamma", "beta"], 64, require_all=True)
            assert none == []
    finally:
        db.dispose()


def test_the_flags_all_of_queries_return_the_newest_matches_dense_or_rare(tmp_path):
    """Remember's flags ask all-of queries of a batch together (on PostgreSQL from the newest
    memories first, read once for the batch): each gets what it gets asked alone."""
    db = Database(new_database_url(tmp_path))
    db.migrate()
    try:
        numbers = _store(db)
        queries = [(["alpha", "beta"], True), (["alpha", "gamma"], True), (["gamma", "beta"], True), (["item7"], False)]
        with db.transaction(read_only=True) as view:
            batch = view.search.lexical_matches_each("local", "project:x", queries, 64)
            for (terms, require_all), got in zip(queries, batch):
                alone = view.search.flag_matches("local", "project:x", terms, require_all, 64)
                assert [r.number for r in got] == [r.number for r in alone], terms
            assert [r.number for r in batch[0]] == sorted(numbers[:10], reverse=True)
            assert len(batch[1]) == 64 and batch[2] == []
    finally:
        db.dispose()


@pytest.mark.skipif(
    os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite") != "postgresql",
    reason="a PostgreSQL query plan: runs in the PostgreSQL suite (SLOWAVE_TEST_BACKEND=postgresql)",
)
@pytest.mark.parametrize("statement", ["RECENT_MATCHES", "RECENT_FLAG_ROWS"])
def test_the_newest_memories_read_are_the_scopes_own_on_postgresql(tmp_path, statement):
    """The window is the scope's newest memories, read through the scope's index by number
    (migration 0018), not the table's: with other scopes written to since, the table's newest held
    none of this scope's, and the GIN index answered a query of two words found together in 24k
    memories by reading every one of them (168 ms)."""
    db = Database(new_database_url(tmp_path))
    db.migrate()
    try:
        with db.engine.begin() as conn:
            # One scope among others written to since: 2,000 of 42,000 memories, the 40,000 newest
            # another's.
            for scope, rows in (("project:x", 2000), ("project:busy", 40000)):
                conn.exec_driver_sql(
                    "INSERT INTO memories (tenant, scope, type, content, content_norm, content_hash, status, "
                    "positive_cues, negative_cues, source_kind, created_at) "
                    "SELECT 'local', %(scope)s, 'fact', 'claim ' || i, 'claim ' || i, md5(i::text), 'active', 0, 0, "
                    "'explicit_remember', now() FROM generate_series(1, %(rows)s) AS i",
                    {"scope": scope, "rows": rows},
                )
            conn.exec_driver_sql("ANALYZE memories")
        stmt = getattr(full_text, statement)
        compiled = (stmt.get("postgresql") if hasattr(stmt, "get") else stmt).compile(
            dialect=postgresql.psycopg.dialect()
        )
        params = dict(compiled.params, tenant="local", scope="project:x", window=RECENT_WINDOW, q="x & y", limit=64)
        with db.engine.connect() as conn:
            plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + str(compiled), params))
        assert "ix_memories_scope_newest" in plan, plan
    finally:
        db.dispose()
