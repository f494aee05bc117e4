"""Scenario 17, embedded half: the SQLite store cannot serve (an unreadable file, a full disk) →
UNAVAILABLE, retryable, nothing stored; then recovery in the same process."""

from __future__ import annotations

import os

import grpc
from sqlalchemy import event

from tests.support import activate, expect_error, new_scope, pb, remember, res, wait_until


def test_s17_sqlite_file_unreadable_is_unavailable_and_recovers(make_server, tmp_path):
    path = tmp_path / "store" / "slowave.db"
    srv = make_server(database_url=f"sqlite:///{path}")
    scope = new_scope()
    a = activate(srv.stub, scope)
    acknowledged = remember(srv.stub, a.session_id, scope, "The release train leaves on Thursdays.").memory_id

    # The file is replaced by something that is not a database (root ignores permission bits, so
    # "unreadable" is made real by content); the original and its WAL files are kept aside.
    files = [path, path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")]
    for f in files:
        if f.exists():
            os.rename(f, f.with_name(f.name + ".aside"))
    path.write_bytes(b"this is not a database" * 100)
    try:
        for call in (lambda: activate(srv.stub, scope), lambda: remember(srv.stub, a.session_id, scope, "x y z")):
            err = expect_error(call)
            assert err.code == grpc.StatusCode.UNAVAILABLE, (err.code, err.message)
            assert err.reason == "INTERNAL_ERROR" and err.domain == "slowave.ai"
            assert err.metadata == {"code": "internal_error", "retryable": "true"}
    finally:
        for f in files:
            if f.with_name(f.name + ".aside").exists():
                os.replace(f.with_name(f.name + ".aside"), f)

    # Same process, no restart: calls succeed again and the acknowledged claim is there.
    def recovered():
        try:
            return activate(srv.stub, scope, task="The release train leaves on Thursdays.")
        except grpc.RpcError:
            return None

    b = wait_until(recovered, timeout=60, what="recovery after the file came back")
    assert acknowledged in [m.memory_id for m in b.memories]


def test_a_full_disk_is_unavailable_stores_nothing_and_recovers(make_server, tmp_path):
    """SQLite cannot grow the store ("database or disk is full"; here SQLite's own page limit stands
    in for the disk). The statements that hit it run on the sqlite3 driver itself (storage.executor),
    so the error is the driver's, not SQLAlchemy's: it must still be an outage (UNAVAILABLE,
    retryable), not an internal error. A full disk may also end SQLite's whole transaction inside
    a batch's savepoint: the batch must then fail as a whole, not retry its items outside any
    transaction. Nothing is stored either way, and the same calls succeed once there is room."""
    path = tmp_path / "store" / "slowave.db"
    srv = make_server(database_url=f"sqlite:///{path}")
    scope = new_scope()
    a = activate(srv.stub, scope)
    long_claim = "Archive note {}: " + " ".join(f"w{j}" for j in range(300))
    scalar = pb.RememberRequest(
        session_id=a.session_id,
        scope=scope,
        content=long_claim.format("scalar") + " " + long_claim.format("again"),
        type=res.MEMORY_TYPE_FACT,
    )
    batch = pb.RememberRequest(
        session_id=a.session_id,
        scope=scope,
        memories=[pb.RememberItem(content=long_claim.format(i), type=res.MEMORY_TYPE_FACT) for i in range(40)],
    )
    engine = srv.running.ctx.db.engine

    def no_room_to_grow(dbapi_connection, _record) -> None:
        (pages,) = dbapi_connection.execute("PRAGMA page_count").fetchone()
        dbapi_connection.execute(f"PRAGMA max_page_count={pages}")

    before = srv.snapshot()
    event.listen(engine, "connect", no_room_to_grow)
    engine.dispose()  # the pooled connections go: every new one has no room
    try:
        errors = [expect_error(lambda r=r: srv.stub.Remember(r, timeout=30)) for r in (scalar, batch)]
    finally:
        event.remove(engine, "connect", no_room_to_grow)
        engine.dispose()
    for err in errors:
        assert err.code == grpc.StatusCode.UNAVAILABLE, (err.code, err.message)
        assert err.reason == "INTERNAL_ERROR" and err.metadata == {"code": "internal_error", "retryable": "true"}
    assert srv.snapshot() == before

    # Room again: the same requests, retried, store every claim.
    assert srv.stub.Remember(scalar, timeout=30).memory.disposition == pb.DISPOSITION_CREATED
    results = srv.stub.Remember(batch, timeout=30).batch.results
    assert len(results) == 40 and not any(r.HasField("error") for r in results)
