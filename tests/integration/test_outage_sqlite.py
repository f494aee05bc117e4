"""Scenario 17, embedded half: the SQLite file becomes unreadable → UNAVAILABLE, then recovery."""

from __future__ import annotations

import os

import grpc

from tests.support import activate, expect_error, new_scope, remember, wait_until


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
