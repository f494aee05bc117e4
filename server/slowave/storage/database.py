"""Engine, migrations and the unit of work: one database transaction per use case."""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from alembic import command
from alembic.config import Config
from sqlalchemy import Connection, Engine, create_engine, event, func, select
from sqlalchemy.exc import DBAPIError, DisconnectionError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from sqlalchemy.pool import QueuePool

from slowave.background import Periodic
from slowave.domain.errors import StorageUnavailable
from slowave.storage import executor
from slowave.storage.unit_of_work import UnitOfWork
from slowave.storage.writer_lock import WriterLock
from slowave.tracing import span

log = logging.getLogger(__name__)
MIGRATIONS = Path(__file__).with_name("migrations")
_SERVER_TIME = select(func.clock_timestamp())


class CallerGone(BaseException):
    """The caller no longer waits for the result (deadline passed, or cancelled): the unit of work
    is rolled back instead of committed. A BaseException, like asyncio.CancelledError, so that the
    per-item failure isolation of batches (`except Exception`) never swallows it."""


_caller_waiting: contextvars.ContextVar[Callable[[], bool] | None] = contextvars.ContextVar(
    "caller_waiting", default=None
)


@contextlib.contextmanager
def caller_deadline(waiting: Callable[[], bool]) -> Iterator[None]:
    """While active, every unit of work of this request commits only if `waiting()` is still true."""
    token = _caller_waiting.set(waiting)
    try:
        yield
    finally:
        _caller_waiting.reset(token)


def ensure_caller_waiting() -> None:
    waiting = _caller_waiting.get()
    if waiting is not None and not waiting():
        raise CallerGone()


@dataclass(frozen=True)
class PoolOptions:
    """Connection pool of a server database (PostgreSQL); SQLite needs none of it."""

    size: int = 10
    """Connections kept open per replica (SLOWAVE_DB_POOL_SIZE)."""
    overflow: int = 10
    """Extra connections under load (SLOWAVE_DB_POOL_OVERFLOW)."""
    timeout: float = 5.0
    """Seconds a request waits for a free connection — on SQLite also for its turn to write — before
    failing UNAVAILABLE (SLOWAVE_DB_POOL_TIMEOUT)."""
    connect_timeout: int = 5
    """Seconds to establish a connection (SLOWAVE_DB_CONNECT_TIMEOUT)."""
    recycle: int = 1800
    """Connections older than this are replaced (SLOWAVE_DB_POOL_RECYCLE)."""


READ_ONLY = "slowave_read_only"  # execution option of a read-only unit of work (Database.transaction)


def create_database_engine(url: str, pool: PoolOptions | None = None) -> Engine:
    if url.startswith("sqlite"):
        return _sqlite_engine(url)
    pool = pool or PoolOptions()
    # pre-ping: a connection broken by a database restart is replaced instead of failing a request.
    engine = create_engine(
        url,
        pool_size=pool.size,
        max_overflow=pool.overflow,
        pool_timeout=pool.timeout,
        pool_recycle=pool.recycle,
        pool_pre_ping=True,
        connect_args={"connect_timeout": pool.connect_timeout},
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, _record) -> None:
        # No JIT compilation: every statement here is short, and compiling one costs more than it
        # saves (Remember's flags for a batch of 100 claims at 100k memories: 8 ms of 41). Set per
        # session, not as a startup option, which PgBouncer refuses.
        with dbapi_connection.cursor() as cursor:
            cursor.execute("SET jit = off")
        dbapi_connection.commit()

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        if conn.get_execution_options().get(READ_ONLY):
            conn.exec_driver_sql("SET TRANSACTION READ ONLY")

    return engine


def sqlite_path(url: str) -> str:
    """The file of a `sqlite:///path` URL."""
    return url.split("///", 1)[-1]


def _sqlite_engine(url: str) -> Engine:
    path = sqlite_path(url)
    if not path or path == ":memory:":
        raise ValueError("the SQLite store must be a file: sqlite:///path/to/slowave.db")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    executor.create_sqlite_file(path)  # once; afterwards connections never create a file

    # An explicit QueuePool: with a creator and a bare "sqlite://" URL SQLAlchemy would pick its
    # in-memory-database pool (one connection per thread, recycled arbitrarily). Last in, first
    # out: SQLite drops a connection's whole page cache when another connection has committed
    # since its last transaction, and a first-in-first-out pool handed each request the connection
    # idle longest — the one most likely to have missed commits — so every statement re-read its
    # pages. Handing out the connection returned last keeps the cache of the one that just wrote.
    # Measured at 100k memories, one caller running Activate/Feedback/Commit cycles: server CPU
    # 19.8–19.9 → 16.2–18.5 ms per cycle (bench/results/history.md, 2026-12-04 15:00).
    engine = create_engine(
        "sqlite://",
        creator=executor.sqlite_connector(path),
        poolclass=QueuePool,
        pool_size=8,
        max_overflow=16,
        pool_use_lifo=True,
    )

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection, record) -> None:
        # Let SQLAlchemy's "begin" event issue BEGIN itself (pysqlite's implicit BEGIN is deferred).
        dbapi_connection.isolation_level = None
        cur = dbapi_connection.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")  # durable across process crashes in WAL mode
        # No checkpoint inside a request's commit: copying the WAL back into the database took
        # ≈ 20–30 ms in every thousandth-page commit (the p99 of every RPC). WalCheckpointer does it
        # in the background; a process without one (an admin command) checkpoints when it closes.
        cur.execute("PRAGMA wal_autocheckpoint=0")
        cur.execute(f"PRAGMA journal_size_limit={WAL_SIZE_LIMIT}")
        cur.execute("PRAGMA busy_timeout=30000")
        cur.execute("PRAGMA foreign_keys=ON")
        # Reads through a memory map of the file instead of a read() per page: every commit of
        # another connection empties a connection's page cache, so without it each retrieval read
        # its full-text postings, rows and occasions back page by page through system calls.
        cur.execute(f"PRAGMA mmap_size={SQLITE_MMAP_BYTES}")
        cur.close()
        record.info["file"] = _identity(path)

    @event.listens_for(engine, "checkout")
    def _on_checkout(_dbapi_connection, record, _proxy) -> None:
        # An open connection keeps working on a file that was replaced, moved or deleted under it;
        # noticing that here makes the pool reconnect, which then fails cleanly (UNAVAILABLE) or
        # finds the restored file (recovery without a restart).
        if record.info.get("file") != _identity(path):
            raise DisconnectionError("the SQLite database file changed or disappeared")

    @event.listens_for(engine, "begin")
    def _on_begin(conn) -> None:
        if conn.get_execution_options().get(READ_ONLY):
            # A snapshot read beside the writer (WAL): it never takes the lock. Its unit of work
            # refuses writes itself (storage.executor.Executor, `read_only`).
            conn.exec_driver_sql("BEGIN")
            return
        # Every unit of work that writes takes SQLite's write lock up front: the per-session and
        # per-retrieval serialisation of behaviour §2.6 then holds trivially, and no transaction
        # fails on lock upgrade.
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


WAL_SIZE_LIMIT = 64 * 1024 * 1024  # bytes of WAL file kept after a checkpoint reset; the rest is truncated
# Bytes of the database file each connection reads through a memory map (address space, not
# memory: the pages are the operating system's file cache, shared by every connection and process).
SQLITE_MMAP_BYTES = 1 << 30


class WalCheckpointer:
    """Copies a SQLite store's write-ahead log back into the database, off the request path.

    Every `interval` seconds, on a connection of its own, a PASSIVE checkpoint copies what it can
    while requests go on (the sqlite3 module releases the GIL while SQLite works). SQLite restarts
    the log only when a transaction begins with everything copied, which under steady load almost
    never happens by chance (a transaction is nearly always open and commits just after the copy).
    So the checkpointer then takes the store's writer lock, just long enough to copy the few
    pages written meanwhile, and the next write starts the log afresh: the file stays small.
    """

    def __init__(self, path: str, interval: float = 1.0, writer_lock: WriterLock | None = None) -> None:
        self.path = path
        self.interval = interval
        self._writer_lock = writer_lock
        self.checkpoints = 0
        """Checkpoints that found new pages in the log (for tests and diagnosis)."""
        self._settled: tuple[int, int] | None = None  # the log as the last complete checkpoint left it
        # A store gone or replaced: the next request reports it.
        self._loop = Periodic(
            "slowave-wal-checkpoint",
            interval,
            self.checkpoint,
            on_error=lambda exc: log.debug("WAL checkpoint skipped: %s", exc),
        )

    def start(self) -> WalCheckpointer:
        self._loop.start()
        return self

    def stop(self) -> None:
        self._loop.stop()

    def checkpoint(self) -> tuple[int, int]:
        """One checkpoint; returns (pages in the log, pages copied)."""
        in_log, copied = self._passive()
        if in_log == 0 or (in_log, copied) == self._settled:
            return in_log, copied  # nothing written since: an idle store costs no lock
        lock = self._writer_lock
        if lock is not None and lock.acquire(timeout=self.interval):
            try:
                in_log, copied = self._passive()
            finally:
                lock.release()
        self.checkpoints += 1
        if copied == in_log:
            self._settled = (in_log, copied)
        return in_log, copied

    def _passive(self) -> tuple[int, int]:
        return executor.wal_checkpoint(self.path)


def _identity(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


class Database:
    """The storage adapter's entry point: migrations and transactions."""

    def __init__(self, url: str, pool: PoolOptions | None = None) -> None:
        self.url = url
        self.engine = create_database_engine(url, pool)
        self.dialect = self.engine.dialect.name
        self._lock_timeout = (pool or PoolOptions()).timeout
        self.sqlite_path = sqlite_path(url) if self.dialect == "sqlite" else None
        # SQLite has one writer at a time and every unit of work begins IMMEDIATE: writers of every
        # thread and process queue on one lock (storage.writer_lock), not in SQLite's busy handler.
        self._writer = WriterLock(f"{self.sqlite_path}-lock") if self.sqlite_path is not None else None

    def background_checkpoints(self, interval: float = 1.0) -> WalCheckpointer | None:
        """Starts the WAL checkpointer of a SQLite store (None on PostgreSQL); stop it before dispose()."""
        if self.sqlite_path is None:
            return None
        return WalCheckpointer(self.sqlite_path, interval, self._writer).start()

    def migrate(self, revision: str = "head") -> None:
        """Creates or upgrades the schema to the newest migration (or to `revision`)."""
        with self.engine.connect() as connection:
            cfg = Config()
            cfg.set_main_option("script_location", str(MIGRATIONS))
            cfg.attributes["connection"] = connection
            command.upgrade(cfg, revision)
            connection.commit()

    @contextlib.contextmanager
    def transaction(self, read_only: bool = False) -> Iterator[UnitOfWork]:
        """One unit of work: commits on success, rolls back on any exception.

        `read_only`: a snapshot that refuses writes and, on SQLite, runs beside the writer instead
        of waiting for the writer lock (Activate reads its candidates in one, then writes)."""
        writer = None if read_only else self._writer
        if writer is not None and not writer.acquire(timeout=self._lock_timeout):
            raise StorageUnavailable("the database stayed busy; retry shortly")
        try:
            with span("db.transaction", **{"db.system": self.dialect}), self._begin(read_only) as connection:
                yield UnitOfWork(connection, read_only)
                ensure_caller_waiting()  # an abandoned request's writes are rolled back, never committed
        except OperationalError as exc:
            log.warning("database unavailable: %s", exc.orig)
            raise StorageUnavailable("the database is unavailable; retry shortly") from exc
        except PoolTimeout as exc:
            raise StorageUnavailable("no database connection became free in time; retry shortly") from exc
        except DBAPIError as exc:
            if exc.connection_invalidated or executor.unreadable_database(exc.orig):
                log.warning("database unavailable: %s", exc.orig)
                raise StorageUnavailable("the database is unavailable; retry shortly") from exc
            raise
        except executor.SQLiteError as exc:  # the executor's own statements (not wrapped by SQLAlchemy)
            if executor.store_outage(exc):
                log.warning("database unavailable: %s", exc)
                raise StorageUnavailable("the database is unavailable; retry shortly") from exc
            raise
        except executor.TransactionLost as exc:
            log.warning("database unavailable: the transaction was rolled back by SQLite: %s", exc)
            raise StorageUnavailable("the database is unavailable; retry shortly") from exc
        finally:
            if writer is not None:
                writer.release()

    @contextlib.contextmanager
    def _begin(self, read_only: bool) -> Iterator[Connection]:
        if not read_only:
            with self.engine.begin() as connection:
                yield connection
            return
        with self.engine.connect() as connection:
            connection.execution_options(**{READ_ONLY: True})
            with connection.begin():
                yield connection

    def server_time(self) -> datetime:
        """The database server's clock (PostgreSQL), read outside any unit of work."""
        try:
            with self.engine.connect() as connection:
                return connection.execute(_SERVER_TIME).scalar_one().astimezone(UTC)
        except DBAPIError as exc:
            raise StorageUnavailable("the database is unavailable; retry shortly") from exc

    def dispose(self) -> None:
        self.engine.dispose()
