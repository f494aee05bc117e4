"""Moving and keeping data (docs/operations.md): export and import, copying a store to another
database, online backups. Stores are built through real gRPC calls; what moved is checked by row
and by what a server on the new store answers."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import pytest

from slowave.storage.database import Database
from tests.support import (
    activate,
    claim,
    commit,
    new_database_url,
    new_scope,
    pb,
    remember,
    run_admin,
    seed_memories,
    start_test_server,
    wait_until,
)

BACKEND = os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite")


def admin_fails(database_url: str, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLOWAVE_DATABASE_URL": database_url}
    out = subprocess.run(
        [sys.executable, "-m", "slowave.admin", *args], env=env, capture_output=True, text=True, timeout=300
    )
    assert out.returncode != 0, out.stdout
    return out


def populate(stub, scope: str) -> dict[str, str]:
    """A scope with every kind of row: memories (one superseded), vectors where enabled, the
    ledger, a closed session with outcome, trajectory and procedure, a knowledge gap, learned
    evidence, an open session."""
    a_text, b_text, c_text = (claim(f"{w} service listens on the configured port") for w in ("alpha", "beta", "gamma"))
    a_id, b_id, c_id = seed_memories(stub, scope, [a_text, b_text, c_text])
    act = activate(stub, scope, task=f"Please review: {a_text} {b_text}")
    newer = remember(stub, act.session_id, scope, claim("beta service now listens on port 8443")).memory_id
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=act.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(memory_id=a_id, assessment=pb.MEMORY_ASSESSMENT_USED, reason="it answered"),
                pb.MemoryFeedbackEntry(
                    memory_id=b_id,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_SUPERSEDED,
                    replacement_memory_id=newer,
                    reason="the port changed",
                ),
            ],
            coverage=pb.COVERAGE_COMPLETE,
            missing=[f"where the {uuid.uuid4().hex[:6]} dashboards live"],
        ),
        timeout=30,
    )
    commit(
        stub,
        act.session_id,
        trajectory=[
            pb.TrajectoryEntry(
                kind=pb.TRAJECTORY_KIND_ACTION, summary="Read the config", status=pb.TRAJECTORY_STATUS_SUCCEEDED
            ),
            pb.TrajectoryEntry(kind=pb.TRAJECTORY_KIND_OBSERVATION, summary="The port had moved"),
        ],
        procedure=pb.CommitProcedure(summary=f"Check the port of {a_text}"),
    )
    still_open = activate(stub, scope, task=f"Please review: {a_text} {c_text}")
    return {
        "a": a_id,
        "b": b_id,
        "c": c_id,
        "newer": newer,
        "task": f"Please review: {a_text} {c_text}",
        "open": still_open.session_id,
    }


def export_text(url: str, path: Path, *args: str) -> str:
    run_admin(url, "export", "--output", str(path), *args)
    return path.read_text(encoding="utf-8")


def records(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def store_state(url: str) -> dict:
    """Counts of every table plus the ledger and sessions (as Server.snapshot, without a server)."""
    db = Database(url)
    try:
        with db.transaction() as uow:
            return {
                "counts": uow.table_counts(),
                "ledger": [tuple(r) for r in uow.ledger.rows()],
                "sessions": [tuple(r) for r in uow.sessions.list(None, None, 10_000)],
            }
    finally:
        db.dispose()


def catalog_ids(stub, scope: str, task: str) -> list[str]:
    return [m.memory_id for m in activate(stub, scope, task=task).memories]


@pytest.fixture
def source(make_server):
    srv = make_server(semantic="static")  # vectors too
    scope = new_scope()
    facts = populate(srv.stub, scope)
    other = new_scope()
    seed_memories(srv.stub, other, [claim("the other scope keeps its own facts")])
    srv.consolidate()
    return srv, scope, other, facts


def test_export_import_export_is_byte_identical_and_import_twice_is_a_no_op(source, tmp_path, make_server):
    srv, scope, _other, facts = source
    first = export_text(srv.database_url, tmp_path / "first.jsonl")
    header = records(first)[0]
    assert header["format"] == "slowave-export" and header["format_version"] == 1
    assert header["source_dialect"] == BACKEND and header["schema_revision"]
    assert run_admin(srv.database_url, "export") == first  # standard output, the same bytes
    kinds = {r["table"] for r in records(first) if r["kind"] == "row"}
    assert {"memories", "memory_vectors", "feedback_rows", "sessions", "source_events", "procedures"} <= kinds
    assert {"knowledge_gaps", "retrievals", "exposures", "memory_cue_evidence", "cues"} <= kinds

    target = new_database_url(tmp_path / "target")
    run_admin(target, "migrate")
    out = run_admin(target, "import", "--input", str(tmp_path / "first.jsonl"))
    assert "inserted:" in out
    assert export_text(target, tmp_path / "second.jsonl") == first
    state = store_state(target)
    assert state == store_state(srv.database_url)

    again = run_admin(target, "import", "--input", str(tmp_path / "first.jsonl"))
    assert "inserted: 0" in again
    assert store_state(target) == state

    # A server on the imported store serves the same memories, ids and all, for the same cue, and
    # numbers new memories after the imported ones.
    moved = start_test_server(tmp_path / "moved", database_url=target, semantic="static")
    try:
        assert catalog_ids(moved.stub, scope, facts["task"]) == catalog_ids(srv.stub, scope, facts["task"])
        fresh = seed_memories(moved.stub, scope, [claim("a memory written after the import")])[0]
        assert int(fresh.removeprefix("sch_")) > max(
            int(facts[k].removeprefix("sch_")) for k in ("a", "b", "c", "newer")
        )
    finally:
        moved.stop()


def test_scope_and_tenant_selection_export_only_that(source, tmp_path):
    srv, scope, other, _facts = source
    text = export_text(srv.database_url, tmp_path / "scope.jsonl", "--tenant", "local", "--scope", scope)
    rows = [r for r in records(text) if r["kind"] == "row"]
    assert records(text)[0]["selection"] == {"tenant": "local", "scope": scope, "vectors": True}
    scoped = [r["row"] for r in rows if "scope" in r["row"]]
    assert scoped and {row["scope"] for row in scoped} == {scope}
    assert other not in text
    # The scope's whole history is there: its sessions' ledger rows and events.
    assert any(r["table"] == "feedback_rows" for r in rows) and any(r["table"] == "source_events" for r in rows)

    # Into a store that already has other data: the scope arrives, the rest is untouched.
    target_srv = start_test_server(tmp_path / "target")
    try:
        kept = seed_memories(target_srv.stub, new_scope(), [claim("the target's own memory")])
        before = target_srv.snapshot()  # drains the seeding session's consolidation first
        # The target's numbers overlap the stream's: refused, and nothing written.
        refused = admin_fails(target_srv.database_url, "import", "--input", str(tmp_path / "scope.jsonl"))
        assert "import refused" in refused.stderr and "never remapped" in refused.stderr
        assert target_srv.snapshot() == before
        assert kept
    finally:
        target_srv.stop()

    tenant = export_text(srv.database_url, tmp_path / "tenant.jsonl", "--tenant", "local", "--without-vectors")
    assert other in tenant and scope in tenant
    assert not any(r.get("table") == "memory_vectors" for r in records(tenant))
    assert export_text(srv.database_url, tmp_path / "none.jsonl", "--tenant", "nobody").count("\n") == 2

    bad = admin_fails(srv.database_url, "export", "--scope", scope)
    assert "--tenant" in bad.stderr


def test_unknown_version_newer_schema_and_truncated_streams_are_refused(source, tmp_path):
    srv, _scope, _other, _facts = source
    lines = export_text(srv.database_url, tmp_path / "all.jsonl").splitlines(keepends=True)
    target = new_database_url(tmp_path / "target")
    run_admin(target, "migrate")
    empty = store_state(target)

    def refused(name: str, content: list[str], expected: str) -> None:
        path = tmp_path / name
        path.write_text("".join(content), encoding="utf-8")
        out = admin_fails(target, "import", "--input", str(path))
        assert expected in out.stderr, out.stderr
        assert store_state(target) == empty

    header = json.loads(lines[0])
    refused("v2.jsonl", [json.dumps({**header, "format_version": 2}) + "\n", *lines[1:]], "format version 2")
    refused("newer.jsonl", [json.dumps({**header, "schema_revision": "9999"}) + "\n", *lines[1:]], "newer schema")
    refused("older.jsonl", [json.dumps({**header, "schema_revision": "0009"}) + "\n", *lines[1:]], "older schema")
    refused("truncated.jsonl", lines[:-1], "truncated")
    refused("damaged.jsonl", lines[:3] + lines[4:], "damaged")
    refused("other.jsonl", ['{"kind": "header", "format": "else"}\n'], "not a slowave-export stream")


def test_copy_moves_the_store_and_verifies_it(source, tmp_path, database_backend):
    """SQLite to PostgreSQL in the PostgreSQL pass (the path out of one machine), SQLite to SQLite in
    the SQLite pass; a server on the target then answers the same catalogs."""
    srv, scope, other, facts = source
    if BACKEND == "postgresql":
        # The source must be SQLite: build one through gRPC on a SQLite file.
        sqlite_srv = start_test_server(
            tmp_path / "sqlite-source", database_url=f"sqlite:///{tmp_path / 'src.db'}", semantic="static"
        )
        try:
            scope = new_scope()
            facts = populate(sqlite_srv.stub, scope)
            sqlite_srv.consolidate()
            source_url, expected = sqlite_srv.database_url, catalog_ids(sqlite_srv.stub, scope, facts["task"])
        finally:
            sqlite_srv.stop()
        target = database_backend.new_database()
    else:
        source_url, expected = srv.database_url, catalog_ids(srv.stub, scope, facts["task"])
        target = f"sqlite:///{tmp_path / 'copy.db'}"
    before = store_state(source_url)
    out = run_admin(source_url, "copy", "--to", target, "--json")
    report = json.loads(out)
    assert report["equal"] and report["different_rows"] == 0 and report["catalogs"] >= 4
    assert report["rows"]["memories"] == before["counts"]["memories"]
    assert store_state(target) == store_state(source_url)

    # A second copy onto the now filled target is refused.
    assert "not empty" in admin_fails(source_url, "copy", "--to", target).stderr

    # The export of the copy is the export of the source, record for record (on PostgreSQL: the
    # same encoding and order from the other backend); only the header names its dialect. And the
    # source's stream imported (from standard input) into an empty store gives that stream again.
    exported = export_text(source_url, tmp_path / "source.jsonl")
    of_copy = export_text(target, tmp_path / "copy.jsonl")
    assert of_copy.splitlines()[1:] == exported.splitlines()[1:]
    assert records(of_copy)[0] == {**records(exported)[0], "source_dialect": BACKEND}
    fresh_store = new_database_url(tmp_path / "fresh")
    env = {**os.environ, "SLOWAVE_DATABASE_URL": fresh_store}
    subprocess.run(
        [sys.executable, "-m", "slowave.admin", "import"], input=exported, env=env, text=True, check=True, timeout=300
    )
    assert export_text(fresh_store, tmp_path / "fresh.jsonl").splitlines()[1:] == exported.splitlines()[1:]

    moved = start_test_server(tmp_path / "on-target", database_url=target, semantic="static")
    try:
        assert catalog_ids(moved.stub, scope, facts["task"]) == expected
        # Numbers continue after the copied ones (PostgreSQL's sequences were moved on).
        fresh = seed_memories(moved.stub, scope, [claim("written on the target after the copy")])[0]
        assert int(fresh.removeprefix("sch_")) == before["counts"]["memories"] + 1
    finally:
        moved.stop()


def test_backup_under_load_keeps_every_acknowledged_write(make_server, tmp_path):
    srv = make_server()
    if BACKEND != "sqlite":
        out = admin_fails(srv.database_url, "backup", str(tmp_path / "b.db"))
        assert "pg_dump" in out.stderr and not (tmp_path / "b.db").exists()
        return
    scope = new_scope()
    acknowledged: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()
    errors: list[BaseException] = []

    def writer(n: int) -> None:
        try:
            session = activate(srv.stub, scope, task=f"writer {n}").session_id
            i = 0
            while not stop.is_set():
                text = claim(f"writer {n} fact number {i}")
                remember(srv.stub, session, scope, text)
                with lock:
                    acknowledged.append(text)
                i += 1
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(3)]
    for th in threads:
        th.start()
    try:
        wait_until(lambda: len(acknowledged) >= 60, timeout=120, what="writers to get going")
        with lock:
            before_backup = list(acknowledged)
        out = run_admin(srv.database_url, "backup", str(tmp_path / "backup.db"))
        wait_until(lambda: len(acknowledged) >= len(before_backup) + 30, timeout=120, what="writes after the backup")
    finally:
        stop.set()
        for th in threads:
            th.join(timeout=60)
    assert not errors, errors
    assert "integrity_check: ok" in out
    assert "exists" in admin_fails(srv.database_url, "backup", str(tmp_path / "backup.db")).stderr

    # Restore: the file put in place of a stopped server's store.
    restored = tmp_path / "restored" / "slowave.db"
    restored.parent.mkdir()
    shutil.copyfile(tmp_path / "backup.db", restored)
    back = start_test_server(tmp_path / "restored-server", database_url=f"sqlite:///{restored}")
    try:
        with back.running.ctx.db.transaction() as uow:
            stored = {r.content for r in uow.memories.get_many(range(1, 100_000)).values()}
        missing = [t for t in before_backup if t not in stored]
        assert not missing, f"{len(missing)} acknowledged memories lost, e.g. {missing[:3]}"
        # The restored store serves them.
        probe = activate(back.stub, scope, task=f"Please review: {before_backup[0]}")
        assert any(m.content == before_backup[0] for m in probe.memories)
    finally:
        back.stop()
    from slowave.portability.backup import integrity

    assert integrity(str(restored)) == "ok"
