"""The executor runs statements on the driver itself (storage.executor): sqlite3's connection, and
psycopg's for PostgreSQL's reads and plain writes. What it reads must be what SQLAlchemy's own
execution reads, value for value and type for type, and a driver error must reach
storage.database as SQLAlchemy would have raised it. Checked on the store a full cycle over gRPC
leaves behind, on both backends."""

from __future__ import annotations

import os

import pytest
from sqlalchemy import BigInteger, String, select, text, update
from sqlalchemy import exc as sa_exc

from slowave.domain.errors import StorageUnavailable
from slowave.storage import executor
from slowave.storage import tables as t
from slowave.storage.database import Database
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res
from tests.support import assess_all, commit, new_scope, start_test_server

ON_POSTGRESQL = pytest.mark.skipif(
    os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite") != "postgresql",
    reason="psycopg's errors: runs in the PostgreSQL suite (SQLite's driver errors are mapped apart, test_outage_sqlite.py)",
)
CLAIMS = [
    "The payments service pins every dependency to an exact version.",
    "Deploys to production need a second reviewer since INC-4411.",
    "Priya Raman owns the ledger export job, which runs nightly at 02:00 UTC.",
]


@pytest.fixture
def cycled(tmp_path):
    """A server's store after Remember, Activate, Feedback, Commit and consolidation; the server
    is stopped, the database kept."""
    server = start_test_server(tmp_path)
    try:
        scope = new_scope()
        opened = server.stub.Activate(
            pb.ActivateRequest(
                task="Which version policy applies?", initial_goal="Find the version policy", scope=scope
            )
        )
        server.stub.Remember(
            pb.RememberRequest(
                session_id=opened.session_id,
                scope=scope,
                memories=[pb.RememberItem(content=c, type=res.MEMORY_TYPE_FACT) for c in CLAIMS],
            )
        )
        asked = server.stub.Recall(
            pb.RecallRequest(session_id=opened.session_id, scope=scope, query="who owns the ledger export")
        )
        assert asked.memories, "the recall found nothing to assess"
        assess_all(server.stub, asked)
        assess_all(server.stub, opened)
        commit(server.stub, opened.session_id)
        server.consolidate()
    finally:
        server.stop()
    db = Database(server.database_url)
    yield db
    db.dispose()


def _through_sqlalchemy(connection, stmt, params=None):
    return [tuple(row) for row in connection.execute(stmt, params)]


def test_every_table_reads_the_same_on_the_driver_as_through_sqlalchemy(cycled):
    with cycled.engine.begin() as connection:
        ex = executor.Executor(connection, read_only=True)
        checked = 0
        for table in t.metadata.sorted_tables:
            stmt = select(table)
            direct = [tuple(row) for row in ex.rows(stmt)]
            assert direct == _through_sqlalchemy(connection, stmt), table.name
            # Types too: a datetime stays aware, JSON stays decoded, a flag stays a bool.
            assert [[type(v) for v in row] for row in direct] == [
                [type(v) for v in row] for row in _through_sqlalchemy(connection, stmt)
            ], table.name
            checked += bool(direct)
        assert checked >= 8, "the cycle should have written most tables"
        # Rows answer by name as well as by position, as SQLAlchemy's do.
        first = ex.first(select(t.memories).order_by(t.memories.c.number))
        assert first._mapping["content"] == first.content


def test_list_parameters_of_every_length_read_what_sqlalchemy_reads(cycled):
    m = t.memories
    stmt = (
        select(m.c.number, m.c.content)
        .where(
            executor.any_of(m.c.number, executor.values_of("numbers", BigInteger())),
            executor.any_of(m.c.type, executor.values_of("types", String())),
        )
        .order_by(m.c.number)
    )
    with cycled.engine.begin() as connection:
        ex = executor.Executor(connection, read_only=True)
        numbers = [row.number for row in ex.rows(select(m.c.number).order_by(m.c.number))]
        assert len(numbers) >= 4
        for count in range(len(numbers) + 1):  # the empty list included
            for types in (["fact"], ["fact", "lesson"], []):
                expected = _through_sqlalchemy(
                    connection,
                    select(m.c.number, m.c.content)
                    .where(m.c.number.in_(numbers[:count]), m.c.type.in_(types))
                    .order_by(m.c.number),
                )
                got = ex.rows(stmt, {"numbers": numbers[:count], "types": types})
                assert [tuple(r) for r in got] == expected, (count, types)


def test_a_write_on_the_driver_counts_its_rows_and_rolls_back_with_its_unit(cycled):
    m = t.memories
    retag = update(m).where(m.c.type == "fact").values(type="decision")
    with pytest.raises(RuntimeError):
        with cycled.engine.begin() as connection:
            assert executor.Executor(connection).run(retag) == len(CLAIMS)
            raise RuntimeError("abandon the unit")
    with cycled.engine.begin() as connection:
        assert executor.Executor(connection).scalar(select(m.c.number).where(m.c.type == "decision")) is None


@ON_POSTGRESQL
def test_a_driver_error_is_the_error_sqlalchemy_would_raise(cycled):
    m = t.memories
    with pytest.raises(sa_exc.IntegrityError), cycled.engine.begin() as connection:
        ex = executor.Executor(connection)
        first, second = [r.number for r in ex.rows(select(m.c.number).order_by(m.c.number).limit(2))]
        ex.run(update(m).where(m.c.number == second).values(number=first))
    with pytest.raises(sa_exc.DBAPIError) as raised, cycled.engine.begin() as connection:
        executor.Executor(connection).rows(text("SELECT no_such_column FROM memories"))
    assert not raised.value.connection_invalidated


@ON_POSTGRESQL
def test_a_connection_lost_on_the_driver_is_an_outage_and_the_pool_recovers(cycled):
    """The database ends every other connection in the middle of a unit of work (as a restart or a
    failover would): the unit's next read is an outage (StorageUnavailable: UNAVAILABLE, retryable),
    its dead connection is not handed out again, and the next units read normally."""
    with pytest.raises(StorageUnavailable):
        with cycled.transaction(read_only=True) as uow:
            before = uow.table_counts()
            with cycled.engine.connect() as other:
                other.execute(
                    text(
                        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                        "WHERE datname = current_database() AND pid <> pg_backend_pid()"
                    )
                )
            uow.table_counts()
    for _ in range(3):
        with cycled.transaction(read_only=True) as uow:
            assert uow.table_counts() == before
