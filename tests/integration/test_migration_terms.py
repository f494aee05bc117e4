"""Migration 0007 on a store written before it: occurrence times, session context and the stemmed
index are rebuilt from what the store holds, and retrieval over gRPC then finds the old memories
by other word forms (both backends: the suite runs again on PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import text

from slowave.storage.database import Database
from tests.support import activate, new_database_url, start_test_server

_CLAIMS = [
    ("We pinned the payments dependencies last week.", datetime(2023, 5, 8, 13, 56)),
    ("It broke the nightly build.", None),
    ("Ana reviews every migration.", datetime(2024, 1, 2, 9, 0)),
]


def _old_store(url: str) -> None:
    db = Database(url)
    db.migrate("0006")
    with db.engine.begin() as c:
        for i, (content, occurred) in enumerate(_CLAIMS, start=1):
            c.execute(
                text(
                    "INSERT INTO memories (number, tenant, scope, type, content, content_norm, content_hash, status, "
                    "learned_units, source_kind, source_session_id, created_at) VALUES (:n, 'local', 'project:old', "
                    "'fact', :c, lower(:c), :h, 'active', 0, 'explicit_remember', 's1', :t)"
                ),
                {"n": i, "c": content, "h": f"h{i}", "t": datetime(2023, 5, 9)},
            )
            c.execute(
                text(
                    "INSERT INTO source_events (number, tenant, session_id, kind, memory_number, content, occurred_at, "
                    "recorded_at) VALUES (:n, 'local', 's1', 'claim', :n, :c, :o, :t)"
                ),
                {"n": i, "c": content, "o": occurred, "t": datetime(2023, 5, 9)},
            )
    db.engine.dispose()


def test_0007_rebuilds_terms_context_and_time_of_an_existing_store(tmp_path):
    url = new_database_url(tmp_path)
    _old_store(url)
    srv = start_test_server(tmp_path, database_url=url)  # migrates to head on start
    try:
        with Database(url).engine.connect() as c:
            rows = {
                n: (on, ctx)
                for n, on, ctx in c.execute(
                    text("SELECT number, occurred_on, context_terms FROM memories ORDER BY number")
                )
            }
        assert rows[1] == ("2023-05-08", None)
        assert rows[2] == (None, "pin payment depend last week")
        assert rows[3][0] == "2024-01-02" and rows[3][1].startswith("pin payment")
        with Database(url).engine.connect() as c:  # 0009: each memory's own terms, as indexed
            own = dict(c.execute(text("SELECT number, own_terms FROM memories ORDER BY number")).all())
        assert own == {
            1: "pin payment depend last week 2023",
            2: "break night build",  # "may": a stop word; "broke": an irregular form (0014)
            3: "ana review migrat januari 2024",
        }

        found = activate(srv.stub, "project:old", task="Who is pinning dependencies?").memories
        assert [m.content for m in found][:1] == [_CLAIMS[0][0]]
        assert found[0].occurred_at.ToDatetime(tzinfo=UTC) == _CLAIMS[0][1].replace(tzinfo=UTC)
        assert [
            m.content for m in activate(srv.stub, "project:old", task="What happened in January 2024?").memories
        ] == [_CLAIMS[2][0]]
    finally:
        srv.stop()
