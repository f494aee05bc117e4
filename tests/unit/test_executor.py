"""The executor writes and reads on SQLite's driver exactly what SQLAlchemy would (storage.executor),
for every column type the tables use: text, integers, booleans, JSON, UTC datetimes, bytes."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta, timezone

import pytest
from sqlalchemy import Integer, bindparam, insert, select, update

from slowave.domain.errors import StorageUnavailable
from slowave.storage import tables as t
from slowave.storage.database import Database
from slowave.storage.executor import Executor, any_of, store_outage, values_of

NOW = datetime(2026, 11, 30, 12, 34, 56, 789012, tzinfo=UTC)


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
        assert Executor(conn).insert(t.sessions, _session("sess_ex")) == "sess_ex"
        rows = {r.id: r for r in conn.execute(select(t.sessions))}
    assert _without(rows["sess_ex"], "id") == _without(rows["sess_sa"], "id")
    stored = rows["sess_ex"]
    assert stored.started_at == NOW and stored.started_at.tzinfo == UTC
    assert stored.recall_calls == 0 and stored.completion_recorded is False
    assert stored.task_context["nested"]["list"] == [True, None, "ü"]


def test_reads_convert_like_sqlalchemy(db: Database) -> None:
    vector = bytes(range(256)) * 3
    with db.engine.begin() as conn:
        conn.execute(insert(t.sessions), _session("sess_1"))
        conn.execute(insert(t.memory_vectors), dict(number=1, encoder_id="e", tenant="l", scope="s", vector=vector))
        conn.execute(insert(t.scope_terms), dict(tenant="l", scope="s", term="w", docs=2**40))
        ex = Executor(conn)
        for table in (t.sessions, t.memory_vectors, t.scope_terms):
            through_executor = ex.rows(select(table))
            through_sqlalchemy = list(conn.execute(select(table)))
            assert [r._asdict() for r in through_executor] == [dict(r._mapping) for r in through_sqlalchemy]
            assert [tuple(r) for r in through_executor] == [tuple(r) for r in through_sqlalchemy]
    assert through_executor[0].docs == 2**40


def test_insert_returns_the_new_rowid_when_the_key_is_generated(db: Database) -> None:
    values = dict(tenant="local", session_id="s", kind="claim", content="c", recorded_at=NOW)
    with db.engine.begin() as conn:
        first = Executor(conn).insert(t.source_events, values)
        second = conn.execute(insert(t.source_events), values).inserted_primary_key[0]
        third = Executor(conn).insert(t.source_events, values)
    assert (first, second, third) == (1, 2, 3)


def test_insert_many_keeps_list_order_across_rows_with_different_keys(db: Database) -> None:
    rows = [dict(tenant="local", session_id="s", kind="claim", content=f"c{i}", recorded_at=NOW) for i in range(5)]
    rows[2]["memory_number"] = 7  # another key set in the middle: a statement of its own, same order
    with db.engine.begin() as conn:
        Executor(conn).insert_many(t.source_events, rows)
        stored = list(conn.execute(select(t.source_events).order_by(t.source_events.c.number)))
    assert [r.content for r in stored] == [f"c{i}" for i in range(5)]
    assert [r.memory_number for r in stored] == [None, None, 7, None, None]


def test_row_where_and_update_where_match_sqlalchemy(db: Database) -> None:
    later = NOW + timedelta(minutes=5)
    change = dict(
        state="closed", ended_at=later, verification={"status": "verified", "refs": ["a", 1]}, completion_recorded=True
    )
    with db.engine.begin() as conn:
        ex = Executor(conn)
        conn.execute(insert(t.sessions), [_session("sess_sa"), _session("sess_ex")])
        conn.execute(update(t.sessions).where(t.sessions.c.id == "sess_sa").values(**change))
        assert ex.update_where(t.sessions, {"id": "sess_ex", "state": "open"}, change) == 1
        assert ex.update_where(t.sessions, {"id": "sess_ex", "state": "open"}, change) == 0
        through_executor = ex.row_where(t.sessions, id="sess_ex", tenant="local")
        assert ex.row_where(t.sessions, lock=True, id="sess_ex", tenant="other") is None
        through_sqlalchemy = conn.execute(select(t.sessions).where(t.sessions.c.id == "sess_sa")).one()
    assert _without(through_executor, "id") == _without(through_sqlalchemy, "id")
    assert through_executor.ended_at == later and through_executor.completion_recorded is True


def test_bound_values_take_their_columns_types_and_lists_bind_as_one_parameter(db: Database) -> None:
    s = t.sessions
    touch = update(s).where(s.c.id == bindparam("session")).values(last_activity_at=bindparam("now"))
    later = (NOW + timedelta(hours=1)).astimezone(timezone(timedelta(hours=9)))
    in_list = select(s.c.id, s.c.last_activity_at).where(any_of(s.c.id, values_of("ids", s.c.id.type)))
    with db.engine.begin() as conn:
        ex = Executor(conn)
        conn.execute(insert(s), [_session(f"sess_{i}") for i in range(4)])
        assert ex.run(touch, {"session": "sess_2", "now": later}) == 1
        found = ex.rows(in_list.order_by(s.c.id), {"ids": ["sess_1", "sess_2", "absent"]})
        assert ex.rows(in_list, {"ids": []}) == []
        assert ex.scalar(select(s.c.recall_calls + bindparam("n", type_=Integer())), {"n": 2}) == 2
        stored = conn.execute(select(s.c.last_activity_at).where(s.c.id == "sess_2")).scalar_one()
    assert [(r.id, r.last_activity_at) for r in found] == [("sess_1", NOW), ("sess_2", later)]
    assert stored == later and stored.tzinfo == UTC


def test_savepoint_undoes_only_its_own_writes(db: Database) -> None:
    with db.transaction() as uow:
        uow.sessions.insert(**_session("kept"))
        with pytest.raises(RuntimeError), uow.savepoint():
            uow.sessions.insert(**_session("undone"))
            raise RuntimeError("the block fails")
        assert uow.sessions.get_any("undone") is None
    with db.transaction() as uow:
        assert uow.sessions.get_any("kept") is not None and uow.sessions.get_any("undone") is None


def test_errors_of_the_driver_itself_are_an_outage_only_when_the_store_cannot_serve() -> None:
    def error(cls: type[sqlite3.Error], message: str, code: int | None) -> sqlite3.Error:
        exc = cls(message)
        if code is not None:
            exc.sqlite_errorcode = code  # type: ignore[attr-defined]
        return exc

    assert store_outage(error(sqlite3.OperationalError, "database or disk is full", sqlite3.SQLITE_FULL))
    assert store_outage(error(sqlite3.OperationalError, "database is locked", sqlite3.SQLITE_BUSY))
    assert store_outage(error(sqlite3.OperationalError, "disk I/O error", sqlite3.SQLITE_IOERR | (4 << 8)))  # extended
    assert store_outage(error(sqlite3.DatabaseError, "file is not a database", None))
    assert not store_outage(error(sqlite3.OperationalError, "no such table: nowhere", sqlite3.SQLITE_ERROR))
    assert not store_outage(error(sqlite3.IntegrityError, "UNIQUE constraint failed", sqlite3.SQLITE_CONSTRAINT))


def test_a_savepoint_whose_transaction_sqlite_ended_lets_nothing_run_after_it(db: Database) -> None:
    """SQLite may roll back the whole transaction on an error inside a savepoint (a full disk): the
    savepoint then raises TransactionLost, which no `except Exception` stops, and the unit of work
    reports an outage; nothing of it is stored."""
    with pytest.raises(StorageUnavailable), db.transaction() as uow:
        uow.sessions.insert(**_session("before"))
        try:
            with uow.savepoint():
                uow._ex._driver.execute("ROLLBACK")  # what SQLite does itself on SQLITE_FULL
                raise RuntimeError("database or disk is full")
        except Exception:  # a batch's per-item isolation would carry on here
            uow.sessions.insert(**_session("after"))
    with db.transaction() as uow:
        assert uow.sessions.get_any("before") is None and uow.sessions.get_any("after") is None
