"""The SQLite driver path writes and reads exactly what SQLAlchemy would (storage.driver_path)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from sqlalchemy import insert, select

from slowave.storage import driver_path
from slowave.storage import tables as t
from slowave.storage.database import Database

NOW = datetime(2026, 11, 30, 12, 34, 56, 789012, tzinfo=UTC)


@pytest.fixture
def db(tmp_path: Path) -> Database:
    database = Database(f"sqlite:///{tmp_path / 'store.db'}")
    database.migrate()
    yield database
    database.dispose()


def _session(session_id: str) -> dict:
    # A non-UTC offset: both paths must store the same UTC instant.
    started = NOW.astimezone(timezone(timedelta(hours=-5)))
    return dict(
        id=session_id,
        tenant="local",
        scope="project:x",
        task="Ship it",
        initial_goal="Ship it",
        task_context={"repo": "a", "nested": {"n": 1.5, "list": [True, None, "ü"]}},
        continuity_id="cont_1",
        state="open",
        feedback_status="pending",
        started_at=started,
        last_activity_at=started,
    )  # recall_calls, session_events, completion_recorded: defaults


def _without(row, *keys: str) -> dict:
    return {k: v for k, v in row._mapping.items() if k not in keys}


def test_insert_stores_what_sqlalchemy_stores_including_defaults_json_and_utc(db: Database) -> None:
    with db.engine.begin() as conn:
        conn.execute(insert(t.sessions), _session("sess_sa"))
        assert driver_path.insert(conn, t.sessions, _session("sess_driver")) == "sess_driver"
        rows = {r.id: r for r in conn.execute(select(t.sessions))}
    assert _without(rows["sess_driver"], "id") == _without(rows["sess_sa"], "id")
    stored = rows["sess_driver"]
    assert stored.started_at == NOW and stored.started_at.tzinfo == UTC
    assert stored.recall_calls == 0 and stored.completion_recorded is False
    assert stored.task_context["nested"]["list"] == [True, None, "ü"]


def test_insert_returns_the_new_rowid_when_the_key_is_generated(db: Database) -> None:
    values = dict(tenant="local", session_id="s", kind="claim", content="c", recorded_at=NOW)
    with db.engine.begin() as conn:
        first = driver_path.insert(conn, t.source_events, values)
        second = conn.execute(insert(t.source_events), values).inserted_primary_key[0]
        third = driver_path.insert(conn, t.source_events, values)
    assert (first, second, third) == (1, 2, 3)


def test_insert_many_keeps_list_order_across_rows_with_different_keys(db: Database) -> None:
    rows = [dict(tenant="local", session_id="s", kind="claim", content=f"c{i}", recorded_at=NOW) for i in range(5)]
    rows[2]["memory_number"] = 7  # another key set in the middle: a statement of its own, same order
    with db.engine.begin() as conn:
        driver_path.insert_many(conn, t.source_events, rows)
        stored = list(conn.execute(select(t.source_events).order_by(t.source_events.c.number)))
    assert [r.content for r in stored] == [f"c{i}" for i in range(5)]
    assert [r.memory_number for r in stored] == [None, None, 7, None, None]


def test_select_converts_like_sqlalchemy(db: Database) -> None:
    with db.engine.begin() as conn:
        conn.execute(insert(t.sessions), _session("sess_1"))
        through_driver = driver_path.select(conn, "SELECT * FROM sessions", (), list(t.sessions.c))
        through_sqlalchemy = list(conn.execute(select(t.sessions)))
    assert [r._asdict() for r in through_driver] == [dict(r._mapping) for r in through_sqlalchemy]


def test_row_where_and_update_where_match_sqlalchemy(db: Database) -> None:
    from sqlalchemy import update

    later = NOW + timedelta(minutes=5)
    change = dict(
        state="closed", ended_at=later, verification={"status": "verified", "refs": ["a", 1]}, completion_recorded=True
    )
    with db.engine.begin() as conn:
        conn.execute(insert(t.sessions), [_session("sess_sa"), _session("sess_driver")])
        conn.execute(update(t.sessions).where(t.sessions.c.id == "sess_sa").values(**change))
        assert driver_path.update_where(conn, t.sessions, {"id": "sess_driver", "state": "open"}, change) == 1
        assert driver_path.update_where(conn, t.sessions, {"id": "sess_driver", "state": "open"}, change) == 0
        through_driver = driver_path.row_where(conn, t.sessions, {"id": "sess_driver", "tenant": "local"})
        assert driver_path.row_where(conn, t.sessions, {"id": "sess_driver", "tenant": "other"}) is None
        through_sqlalchemy = conn.execute(select(t.sessions).where(t.sessions.c.id == "sess_sa")).one()
    assert _without(through_driver, "id") == _without(through_sqlalchemy, "id")
    assert through_driver.ended_at == later and through_driver.completion_recorded is True
