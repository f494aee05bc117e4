"""Remember's flags read their candidates for a whole batch in one index query
(storage.memory_search.MemorySearch.lexical_matches_each): each query's rows must be exactly those
`flag_matches` returns for it alone (own words only, the query PostgreSQL runs), on both backends,
also when the joined query fills its room."""

from __future__ import annotations

import os
import random
from datetime import UTC, datetime

import pytest
from sqlalchemy import text
from sqlalchemy.dialects import postgresql

from slowave.domain.terms import terms
from slowave.storage import full_text
from slowave.storage.database import Database
from slowave.storage.search_terms import index_token, scope_key
from tests.support import new_database_url

WORDS = ["redis", "port", "deploy", "payments", "cache", "eu", "west", "ledger", "timeout", "owner", "canary", "web"]


def test_joined_candidate_query_returns_each_querys_own_matches(tmp_path):
    db = Database(new_database_url(tmp_path))
    db.migrate()
    rnd = random.Random(17)
    now = datetime.now(UTC)
    try:
        with db.transaction() as uow:
            rows = []
            for i in range(300):
                content = " ".join(rnd.sample(WORDS, 4)) + f" item{i % 7}"
                context = " ".join(sorted(set(terms(" ".join(rnd.sample(WORDS, 2)))))) if i % 3 == 0 else None
                rows.append(
                    dict(
                        tenant="local",
                        scope="project:x",
                        type="fact",
                        content=content,
                        source_kind="explicit_remember",
                        source_session_id="s1",
                        created_at=now,
                        context_terms=context,
                    )
                )
            uow.memories.insert_many(rows)
            uow.memories.insert_many([dict(rows[0], scope="project:other")])  # another scope: never a match
            queries = [
                (sorted(set(terms(" ".join(rnd.sample(WORDS, k))))), rnd.random() < 0.5) for k in (1, 2, 2, 3, 1, 2)
            ]
            queries += [(["item3"], False), (["item3", "redis"], True), (["nosuchterm"], False)]
            for limit in (5, 64, 1000):  # the joined query fills its room at 5 and 64, never at 1000
                joined = uow.search.lexical_matches_each("local", "project:x", queries, limit)
                assert len(joined) == len(queries)
                for (words, require_all), got in zip(queries, joined):
                    alone = uow.search.flag_matches("local", "project:x", words, require_all, limit)
                    assert [(r.number, r.content, r.status) for r in got] == [
                        (r.number, r.content, r.status) for r in alone
                    ], (words, require_all, limit)
            assert uow.search.lexical_matches_each("local", "project:x", [], 64) == []
    finally:
        db.dispose()


@pytest.mark.skipif(
    os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite") != "postgresql",
    reason="a PostgreSQL query plan: runs in the PostgreSQL suite (SLOWAVE_TEST_BACKEND=postgresql)",
)
@pytest.mark.parametrize("statement", ["FLAG_MATCHES", "FLAG_MATCHES_EACH", "MATCHES"])
def test_queries_of_new_words_come_from_the_index_on_postgresql(tmp_path, statement):
    """A new claim's own values (a ticket, a port) are words no stored memory has, and a task
    quoting a claim asks for such words. Planned newest first with a LIMIT, PostgreSQL expected to
    meet matches soon and walked the scope testing each memory: 87 ms per query at 100k memories, 7 s
    for a batch of 100 claims (bench/results/history.md, 2026-12-05); an Activate whose task quoted
    one claim, 144 ms (2026-12-07). The flags' statements (one query, and a batch's queries in
    one statement) and retrieval's any-of statement must read the GIN index, also for a scope that
    PostgreSQL's statistics do not know yet (a new one, filling): with the scope's conditions beside
    the words, the batch's statement read such a scope row by row through the scope's index (3.6
    ms a query at 1,000 memories, the load of a new scope at half speed, 2026-12-07)."""
    db = Database(new_database_url(tmp_path))
    db.migrate()
    insert = (
        "INSERT INTO memories (tenant, scope, type, content, content_norm, content_hash, status, "
        "positive_cues, negative_cues, source_kind, created_at, content_tsv) "
        "SELECT 'local', %(scope)s, 'fact', %(text)s || i, %(text)s || i, md5(i::text), 'active', 0, 0, "
        "'explicit_remember', now(), to_tsvector('simple', %(words)s || ' ' || %(prefix)s || 'n' || i || ' ' || "
        "(SELECT string_agg(%(prefix)s || 'w' || mod(i::bigint * k * 7919 + k, 2000), ' ') "
        "FROM generate_series(1, 20) AS k)) "
        "FROM generate_series(1, %(rows)s) AS i"
    )
    try:
        for scope, rows in (("project:big", 50000), ("project:new", 2000)):
            key = scope_key("local", scope)
            with db.engine.begin() as conn:
                # Memories as a large scope's are indexed: a few words in most of them, a value of
                # their own, and twenty of a vocabulary of 2,000 (own and session context words).
                conn.exec_driver_sql(
                    insert,
                    {
                        "scope": scope,
                        "rows": rows,
                        "words": " ".join(index_token(key, w) for w in ("deploy", "port", "service")),
                        "prefix": index_token(key, ""),
                        "text": "The deploy service of the payments team listens on port ",
                    },
                )
                if scope == "project:big":
                    conn.exec_driver_sql("ANALYZE memories")  # before the new scope: it has no statistics
        compiled = getattr(full_text, statement).get("postgresql").compile(dialect=postgresql.psycopg.dialect())
        for scope in ("project:big", "project:new"):
            key = scope_key("local", scope)
            unseen = [index_token(key, w, context=c) for w in ("inc4375299", "48213") for c in (False, True)]
            q = full_text.query("postgresql", unseen, False)
            params = dict(compiled.params, q=q, queries=[q, full_text.query("postgresql", unseen[:2], True)], limit=64)
            params.update(tenant="local", scope=scope)
            with db.engine.connect() as conn:
                plan = "\n".join(row[0] for row in conn.exec_driver_sql("EXPLAIN " + str(compiled), params))
            assert "ix_memories_content_tsv" in plan, (scope, plan)
            # Neither backwards by number ("Index Scan Backward using") nor by scope ("Index Scan using").
            assert "Index Scan Backward" not in plan and "Index Scan using" not in plan, (scope, plan)
    finally:
        db.dispose()


@pytest.mark.skipif(
    os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite") != "postgresql",
    reason="a PostgreSQL session setting: runs in the PostgreSQL suite (SLOWAVE_TEST_BACKEND=postgresql)",
)
def test_postgresql_sessions_compile_no_statement(tmp_path):
    """A batch's flag queries in one statement cost enough for PostgreSQL to compile it (JIT, 8 ms
    of 41 for 100 claims at 100k memories); no statement of this service is long enough to gain
    from that, so every session turns it off, also after a unit of work rolled back."""
    db = Database(new_database_url(tmp_path))
    db.migrate()
    try:
        with pytest.raises(RuntimeError), db.transaction() as uow:
            assert uow.search.ex.scalar(text("SHOW jit")) == "off"
            raise RuntimeError("roll back")
        for read_only in (False, True):
            with db.transaction(read_only=read_only) as uow:
                assert uow.search.ex.scalar(text("SHOW jit")) == "off"
    finally:
        db.dispose()
