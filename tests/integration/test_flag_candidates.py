"""Remember's flags read their candidates for a whole batch in one index query
(storage.memory_search.MemorySearch.lexical_matches_each): each query's rows must be exactly those
`lexical_matches` returns for it alone, on both backends, also when the joined query fills its room."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from slowave.domain.terms import terms
from slowave.storage.database import Database
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
                    alone = uow.search.lexical_matches("local", "project:x", words, limit, require_all)
                    assert [(r.number, r.content, r.status) for r in got] == [
                        (r.number, r.content, r.status) for r in alone
                    ], (words, require_all, limit)
            assert uow.search.lexical_matches_each("local", "project:x", [], 64) == []
    finally:
        db.dispose()
