"""Replicas on one PostgreSQL database (behaviour §2.4, 2.6, 6.3, 10.5, 12.2 L3/L4; checklist 10, 69).

Every test starts two real `slowave-server` processes (the installed entry point) on one fresh
database of the session's PostgreSQL cluster and talks to both over loopback gRPC. Concurrent calls
are released together by a barrier and repeated over several rounds where a race could pass by
luck. What the API cannot show (episodes formed once, sessions reaped once, ledger order) is read
directly from the test database.

Vocabulary note: the memory contents below have pairwise disjoint vocabularies, and every commit
uses an outcome summary of random tokens, so a cue containing some contents verbatim admits exactly
those memories (admission floor, 12.1) and never a consolidated lesson.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.pool import NullPool

from slowave.storage import tables as t
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.support import (
    activate,
    commit_request,
    details_of,
    expect_error,
    new_scope,
    pb,
    res,
    server_executable,
    used,
    wait_until,
)

pytestmark = pytest.mark.skipif(
    os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite") != "postgresql",
    reason="runs in the PostgreSQL suite: SLOWAVE_TEST_BACKEND=postgresql",
)

DEPLOY = "Deploy port equals 8080."
PYTHON = "Builds require python twelve."
CACHE = "Cache invalidation runs nightly."
LOGS = "Logs rotate every sunday."
OTHER = "Quokka marmalade xylophone zeppelin."
CONTENTS = [DEPLOY, PYTHON, CACHE, LOGS, OTHER]

_READY = re.compile(r"on port (\d+)")
_REAPED = re.compile(r"reaped (\d+) idle session")
CALL_TIMEOUT = 120  # seconds per RPC: generous, for a loaded 2-core machine


# ------------------------------------------------------------------------------------------ replicas


@dataclass
class Replica:
    """One `slowave-server` process and a stub connected to it."""

    name: str
    proc: subprocess.Popen
    lines: list[str] = field(default_factory=list)
    port: int = 0
    channel: grpc.Channel | None = None
    stub: pb_grpc.MemoryServiceStub | None = None

    def connect(self) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        grpc.channel_ready_future(self.channel).result(timeout=60)
        self.stub = pb_grpc.MemoryServiceStub(self.channel)

    def new_stub(self) -> tuple[grpc.Channel, pb_grpc.MemoryServiceStub]:
        """An extra channel (its own HTTP/2 connection) for concurrent callers."""
        channel = grpc.insecure_channel(f"127.0.0.1:{self.port}")
        grpc.channel_ready_future(channel).result(timeout=60)
        return channel, pb_grpc.MemoryServiceStub(channel)

    def reaped(self) -> int:
        """Sessions this replica's reaper reports having reaped (its log, behaviour §2.4)."""
        return sum(int(m.group(1)) for line in list(self.lines) if (m := _REAPED.search(line)))

    def log(self) -> str:
        return "".join(list(self.lines)[-40:])

    def stop(self) -> None:
        if self.channel is not None:
            self.channel.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


class ReplicaDatabase:
    """Direct reads of the replicas' database (what the API cannot show)."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.name = url.rsplit("/", 1)[-1]
        self.engine = create_engine(url, poolclass=NullPool)

    def rows(self, stmt) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(stmt))

    def scalar(self, stmt) -> Any:
        with self.engine.connect() as conn:
            return conn.execute(stmt).scalar_one()

    def session(self, session_id: str) -> Any:
        s = t.sessions
        return self.rows(select(s).where(s.c.id == session_id))[0]

    def states(self, session_ids: list[str]) -> dict[str, str]:
        s = t.sessions
        return {r.id: r.state for r in self.rows(select(s.c.id, s.c.state).where(s.c.id.in_(session_ids)))}

    def episodes(self, session_id: str) -> int:
        e = t.episodes
        return self.scalar(select(func.count()).select_from(e).where(e.c.session_id == session_id))

    def claim_events(self, session_id: str) -> int:
        e = t.source_events
        return self.scalar(select(func.count()).select_from(e).where(e.c.session_id == session_id, e.c.kind == "claim"))

    def ledger(self, retrieval_id: str) -> list[Any]:
        f = t.feedback_rows
        return self.rows(select(f).where(f.c.retrieval_id == retrieval_id).order_by(f.c.seq))

    def lock_waiters(self) -> int:
        """Backends of this database waiting for a heavyweight lock (row or table)."""
        return self.scalar(
            text("SELECT count(*) FROM pg_stat_activity WHERE datname = :d AND wait_event_type = 'Lock'").bindparams(
                d=self.name
            )
        )

    def dispose(self) -> None:
        self.engine.dispose()


@dataclass
class ReplicaSet:
    db: ReplicaDatabase
    replicas: list[Replica]


def _launch(exe: str, url: str, cwd: Path, name: str, env_overrides: dict[str, str]) -> Replica:
    env = {**os.environ, "SLOWAVE_DATABASE_URL": url, "SLOWAVE_LISTEN_ADDR": "127.0.0.1:0", "SLOWAVE_METRICS_ADDR": ""}
    for key in ("SLOWAVE_SESSION_IDLE_TIMEOUT", "SLOWAVE_DATA_DIR", "SLOWAVE_SEMANTIC"):
        env.pop(key, None)
    env.update(env_overrides)
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen(
        [exe], env=env, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    return Replica(name, proc)


def _await_ready(replica: Replica) -> None:
    threading.Thread(
        target=lambda: replica.lines.extend(iter(replica.proc.stderr.readline, "")),
        name=f"{replica.name}-log",
        daemon=True,
    ).start()

    def ready() -> re.Match | None:
        if replica.proc.poll() is not None:
            raise AssertionError(f"{replica.name} exited with {replica.proc.returncode}:\n{replica.log()}")
        return next((m for line in list(replica.lines) if (m := _READY.search(line))), None)

    replica.port = int(wait_until(ready, timeout=90, interval=0.1, what=f"{replica.name} to start").group(1))
    replica.connect()


@pytest.fixture
def replicas(database_backend, tmp_path):
    """Factory: `replicas(**env)` starts two `slowave-server` processes on one fresh database."""
    cluster = database_backend
    started: list[Replica] = []
    databases: list[ReplicaDatabase] = []

    def start(count: int = 2, **env: str) -> ReplicaSet:
        url = cluster.new_database()
        db = ReplicaDatabase(url)
        databases.append(db)
        exe = server_executable()
        out: list[Replica] = []
        # One after the other: the first applies the schema migrations, the others find them done.
        for i in range(count):
            replica = _launch(exe, url, tmp_path / f"r{len(started)}", f"replica-{'ab'[i] if i < 2 else i}", env)
            started.append(replica)
            _await_ready(replica)
            out.append(replica)
        return ReplicaSet(db, out)

    try:
        yield start
    finally:
        for replica in started:
            replica.stop()
        for db in databases:
            db.dispose()


# ------------------------------------------------------------------------------------------ helpers


def together(calls: list[Callable[[], Any]], timeout: float = 180) -> list[Any]:
    """Runs the calls in threads released at once by a barrier; returns results or raised errors."""
    barrier = threading.Barrier(len(calls))
    results: list[Any] = [None] * len(calls)

    def run(i: int) -> None:
        try:
            barrier.wait(timeout=90)
            results[i] = calls[i]()
        except BaseException as exc:
            results[i] = exc

    threads = [threading.Thread(target=run, args=(i,), daemon=True) for i in range(len(calls))]
    for th in threads:
        th.start()
    deadline = time.monotonic() + timeout
    for th in threads:
        th.join(timeout=max(0.0, deadline - time.monotonic()))
    assert not any(th.is_alive() for th in threads), f"concurrent calls did not finish within {timeout}s"
    return results


def all_ok(results: list[Any]) -> list[Any]:
    failures = [
        (i, details_of(r) if isinstance(r, grpc.RpcError) else r)
        for i, r in enumerate(results)
        if isinstance(r, BaseException)
    ]
    assert not failures, f"concurrent calls failed: {failures}"
    return results


def safe_summary() -> str:
    """An outcome summary of random tokens: its consolidated lesson is never admitted by a cue here."""
    return f"zq{uuid.uuid4().hex[:10]} zr{uuid.uuid4().hex[:10]}."


def remember(stub, session_id: str, scope: str, content: str) -> pb.RememberResult:
    return stub.Remember(
        pb.RememberRequest(session_id=session_id, scope=scope, content=content, type=res.MEMORY_TYPE_FACT),
        timeout=CALL_TIMEOUT,
    ).memory


def commit(stub, session_id: str, **kw: Any) -> pb.CommitResponse:
    kw.setdefault("outcome_summary", safe_summary())
    return stub.Commit(commit_request(session_id, **kw), timeout=CALL_TIMEOUT)


def seed(stub, scope: str, contents: list[str]) -> list[str]:
    """Stores claims through a throwaway session, closed afterwards; returns their memory ids."""
    s = activate(stub, scope, task=f"seeding zs{uuid.uuid4().hex[:10]}", initial_goal="seed")
    ids = [remember(stub, s.session_id, scope, c).memory_id for c in contents]
    stub.Feedback(pb.FeedbackRequest(retrieval_id=s.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=CALL_TIMEOUT)
    commit(stub, s.session_id)
    return ids


def exposing(stub, scope: str, contents: list[str]) -> pb.ActivateResponse:
    """An Activate whose task contains the contents verbatim: it exposes exactly those memories."""
    return activate(stub, scope, task=" ".join(contents), page_size=10)


def learned(response: pb.ActivateResponse) -> dict[str, float]:
    return {m.memory_id: round(m.ranking.learned, 6) for m in response.memories}


def feedback(stub, retrieval_id: str, memory=(), **kw: Any) -> pb.FeedbackRecord:
    resp = stub.Feedback(
        pb.FeedbackRequest(retrieval_id=retrieval_id, memory_feedback=list(memory), **kw), timeout=CALL_TIMEOUT
    )
    assert resp.WhichOneof("result") == "record"
    return resp.record


# ------------------------------------------------------------------------------------------ 10


def test_s10_concurrent_commits_through_two_replicas_one_closes_one_updates(replicas):
    """Checklist 10 (PostgreSQL half), behaviour §2.6: of two concurrent Commits of one OPEN session, one
    through each replica, exactly one closes and the other is processed as an update; the episodes
    are formed once. Eight rounds, alternating which replica opened the session."""
    rs = replicas()
    a, b = rs.replicas
    for round_ in range(8):
        scope = new_scope()
        first, second = (a, b) if round_ % 2 == 0 else (b, a)
        act = activate(first.stub, scope, task="Rotate the signing keys")
        remember(first.stub, act.session_id, scope, "Signing keys live in the hsm partition")
        remember(second.stub, act.session_id, scope, "Key rotation needs two approvers")
        request = commit_request(act.session_id, outcome_summary=safe_summary())
        results = all_ok(
            together(
                [
                    lambda: a.stub.Commit(request, timeout=CALL_TIMEOUT),
                    lambda: b.stub.Commit(request, timeout=CALL_TIMEOUT),
                ]
            )
        )
        operations = sorted(r.operation for r in results)
        assert operations == [pb.COMMIT_OPERATION_CLOSED, pb.COMMIT_OPERATION_UPDATED], (round_, results)
        closed = next(r for r in results if r.operation == pb.COMMIT_OPERATION_CLOSED)
        updated = next(r for r in results if r.operation == pb.COMMIT_OPERATION_UPDATED)
        assert closed.committed and updated.committed
        assert not closed.HasField("already_ended")
        assert updated.HasField("already_ended") and updated.already_ended
        assert closed.feedback_status == updated.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
        # Episodes formed once: by the close (two remembered claims), never again by the update.
        assert (closed.episodes_formed, updated.episodes_formed) == (2, 0), round_
        assert rs.db.episodes(act.session_id) == 2, round_
        row = rs.db.session(act.session_id)
        assert (row.state, row.feedback_status) == ("closed", "complete")
        assert row.ended_at is not None


# ------------------------------------------------------------------------------------------ reaper (2.4)


def test_replicas_reapers_of_both_replicas_reap_each_idle_session_exactly_once(replicas):
    """Behaviour §2.4/2.6: every replica sweeps; each idle session is reaped at most once.

    The race is forced, not left to luck: while the test holds the `episodes` table, a reaper that
    has taken idle sessions (with remembered claims) stays inside its sweep, holding them. Then
    sessions without claims go idle, and the other replica's reaper sweeps while the first one still
    holds its sessions: it must skip them (reaping only the new ones), not take or wait for them.
    A session reaped twice would have its episodes formed twice and be counted twice in the logs.
    Three rounds."""
    rs = replicas(SLOWAVE_SESSION_IDLE_TIMEOUT="2")
    a, b = rs.replicas
    everyone: list[str] = []
    for round_ in range(3):
        scope = new_scope()
        with rs.db.engine.connect() as holder:
            holder.begin()
            holder.execute(text("LOCK TABLE episodes IN EXCLUSIVE MODE"))  # reads pass, inserts wait
            with_claims: list[str] = []
            for i in range(12):
                replica = (a, b)[i % 2]
                s = activate(replica.stub, scope, task=f"Idle task {round_}-{i}")
                with_claims.append(s.session_id)
                try:
                    replica.stub.Remember(
                        pb.RememberRequest(
                            session_id=s.session_id,
                            scope=scope,
                            memories=[
                                pb.RememberItem(content=f"Claim {round_}-{i} alpha", type=res.MEMORY_TYPE_FACT),
                                pb.RememberItem(content=f"Claim {round_}-{i} beta", type=res.MEMORY_TYPE_FACT),
                            ],
                        ),
                        timeout=20,
                    )
                except grpc.RpcError as err:
                    # Only if this machine stalled for the whole idle timeout: the session was reaped
                    # first (and may be held by the blocked reaper). The database counts below decide.
                    assert (
                        err.code() == grpc.StatusCode.DEADLINE_EXCEEDED or details_of(err).reason == "SESSION_ENDED"
                    ), details_of(err)
            wait_until(
                lambda: rs.db.lock_waiters() >= 1,
                timeout=90,
                interval=0.1,
                what="a reaper to take idle sessions and wait on the episodes table",
            )
            without_claims = [
                activate((b, a)[i % 2].stub, scope, task=f"Quiet task {round_}-{i}").session_id for i in range(6)
            ]
            # Either the other reaper swept while the first held its sessions (it reaps the quiet
            # ones), or both reapers are inside a sweep holding disjoint sessions.
            wait_until(
                lambda: rs.db.lock_waiters() >= 2 or set(rs.db.states(without_claims).values()) == {"reaped"},
                timeout=90,
                interval=0.1,
                what="the second reaper to sweep while the first holds sessions",
            )
            holder.rollback()
        round_sessions = with_claims + without_claims
        everyone += round_sessions
        wait_until(
            lambda: set(rs.db.states(round_sessions).values()) == {"reaped"},
            timeout=90,
            interval=0.2,
            what=f"every idle session of round {round_} to be reaped",
        )

    total_claims = 0
    for session_id in everyone:
        row = rs.db.session(session_id)
        assert (row.state, row.outcome, row.feedback_status) == ("reaped", "unknown", "incomplete"), session_id
        assert row.ended_at is not None and row.final_goal is None and row.outcome_summary is None
        claims = rs.db.claim_events(session_id)
        total_claims += claims
        # Reaped once: the episodes of its remembered claims are formed exactly once (11.5).
        episodes = rs.db.episodes(session_id)
        assert episodes == claims, f"{session_id}: {episodes} episodes from {claims} claims (reaped more than once?)"
    assert total_claims > 0
    # Each session counted once over both reapers' logs, and both replicas did reap.
    wait_until(lambda: a.reaped() + b.reaped() >= len(everyone), timeout=60, what="both reapers to log their sweeps")
    assert a.reaped() + b.reaped() == len(everyone), (a.reaped(), b.reaped(), len(everyone))
    assert a.reaped() > 0 and b.reaped() > 0, (a.reaped(), b.reaped())


# ------------------------------------------------------------------------------------------ feedback (2.6, 10)


def test_replicas_100_concurrent_feedback_calls_on_one_retrieval(replicas):
    """Behaviour §2.6, 10.3, 10.5: 100 Feedback calls on one retrieval, half through each replica,
    released together. Every accepted row is in the ledger; the calls' rows never interleave (one
    total order); replaying the calls in ledger order reproduces every call's coverage, outstanding,
    implicit rows and `applied` (first accepted explicit row wins); the commit gate counts all of
    them. Two rounds: on a retrieval of an open session, then of a closed one (10.6), where no
    session activity is written and only the per-retrieval serialisation orders the calls."""
    rs = replicas()
    a, b = rs.replicas
    extra = [a.new_stub(), a.new_stub(), b.new_stub(), b.new_stub()]
    try:
        for round_, ended in enumerate((False, True)):
            scope = new_scope()
            ids = seed(a.stub, scope, CONTENTS)
            act = exposing(b.stub, scope, CONTENTS)
            exposure = [m.memory_id for m in act.memories]
            assert sorted(exposure) == sorted(ids)
            refused = expect_error(lambda: commit(a.stub, act.session_id))
            assert refused.reason == "INCOMPLETE_FEEDBACK"
            assert [list(o.memory_ids) for o in refused.outstanding] == [exposure]
            if ended:  # implicit rows cover everything and never block a later explicit row (L4)
                first = feedback(a.stub, act.retrieval_id, coverage=pb.COVERAGE_COMPLETE)
                assert list(first.implicitly_assessed.memory_ids) == exposure
                assert commit(b.stub, act.session_id).operation == pb.COMMIT_OPERATION_CLOSED
            before = {r.event_id for r in rs.db.ledger(act.retrieval_id)}

            plans: list[dict[str, Any]] = []
            for i in range(100):
                if i % 10 == 9:
                    plans.append({"complete": True, "memory": None, "bogus": False})
                else:
                    plans.append({"complete": False, "memory": exposure[i % 5], "bogus": i % 3 == 0})

            def call(i: int) -> Callable[[], pb.FeedbackRecord]:
                plan = plans[i]
                stub = extra[i % 4][1]  # even calls through replica a, odd ones through replica b
                entries = [used(plan["memory"])] if plan["memory"] else []
                if plan["bogus"]:
                    entries.append(used("sch_999999"))
                coverage = pb.COVERAGE_COMPLETE if plan["complete"] else pb.COVERAGE_PARTIAL
                return lambda: feedback(stub, act.retrieval_id, entries, coverage=coverage)

            records: list[pb.FeedbackRecord] = all_ok(together([call(i) for i in range(100)]))

            ledger = [r for r in rs.db.ledger(act.retrieval_id) if r.event_id not in before]
            by_event = {r.event_id: r for r in ledger}
            accepted_ids = [e for rec in records for e in rec.accepted_event_ids]
            assert len(set(accepted_ids)) == len(accepted_ids)
            # Every accepted row is present, accepted, and nothing else was accepted.
            assert all(e in by_event and by_event[e].accepted for e in accepted_ids)
            assert sorted(r.event_id for r in ledger if r.accepted) == sorted(accepted_ids)
            rejected = [r for r in ledger if not r.accepted]
            assert len(rejected) == sum(p["bogus"] for p in plans)
            assert all((r.target_id, r.rejection_reason) == ("sch_999999", "target_not_exposed") for r in rejected)
            assert {rec.session_id for rec in records} == {act.session_id}

            # One total order: each call's rows form a block of the ledger.
            spans = sorted(
                (
                    min(by_event[e].seq for e in rec.accepted_event_ids),
                    max(by_event[e].seq for e in rec.accepted_event_ids),
                    i,
                )
                for i, rec in enumerate(records)
            )
            for (_, end, _), (start, _, _) in zip(spans, spans[1:]):
                assert end < start, "rows of two concurrent calls interleave in the ledger"

            # Replay in ledger order.
            covered: set[str] = set(exposure) if ended else set()
            effective: set[str] = set()
            for _, _, i in spans:
                rec, plan = records[i], plans[i]
                if plan["complete"]:
                    implicit = [m for m in exposure if m not in covered]
                    assert list(rec.implicitly_assessed.memory_ids) == implicit, i
                    assert rec.coverage == pb.COVERAGE_COMPLETE, i
                    assert len(rec.accepted_event_ids) == len(implicit) + 1, i
                    assert not rec.applied.strengthened and not rec.applied.unchanged, i
                    assert [by_event[e].implicit for e in rec.accepted_event_ids[:-1]] == [True] * len(implicit)
                    covered = set(exposure)
                else:
                    m = plan["memory"]
                    assert list(rec.implicitly_assessed.memory_ids) == [], i
                    assert rec.coverage == pb.COVERAGE_PARTIAL, i
                    assert len(rec.accepted_event_ids) == 2, i  # the `used` row, the retrieval-level row
                    buckets = (list(rec.applied.strengthened), list(rec.applied.unchanged))
                    assert buckets == (([], [m]) if m in effective else ([m], [])), (i, buckets)
                    assert by_event[rec.accepted_event_ids[0]].effective == (m not in effective), i
                    assert [x.reason for x in rec.rejected] == (["target_not_exposed"] if plan["bogus"] else []), i
                    effective.add(m)
                    covered.add(m)
                assert list(rec.outstanding.memory_ids) == [m for m in exposure if m not in covered], i
            assert covered == set(exposure) and effective == set(exposure)
            memory_rows = [r for r in ledger if r.target_kind == "memory" and r.accepted and not r.implicit]
            assert sorted(r.target_id for r in memory_rows if r.effective) == sorted(exposure)

            # Learning from the first accepted explicit row only (12.2 L3/L4), seen by both replicas.
            for replica in (a, b):
                assert learned(exposing(replica.stub, scope, CONTENTS)) == {m: 0.05 for m in exposure}
            # The gate counts the rows written through both replicas.
            done = commit(a.stub, act.session_id)
            assert done.operation == (pb.COMMIT_OPERATION_UPDATED if ended else pb.COMMIT_OPERATION_CLOSED), round_
            row = rs.db.session(act.session_id)
            assert (row.state, row.feedback_status) == ("closed", "complete")
    finally:
        for channel, _ in extra:
            channel.close()


# ------------------------------------------------------------------------------------------ remember (6.3)


def test_replicas_concurrent_remember_of_one_claim_stores_one_memory(replicas):
    """Behaviour §6 and 2.6: the same claim (equivalent after trimming, collapsing white space and case
    folding) remembered concurrently by six sessions, three through each replica → one memory:
    one CREATED, the others MATCHED with the same memory_id. Five rounds."""
    rs = replicas()
    a, b = rs.replicas
    stubs = [a.new_stub(), b.new_stub()]
    try:
        for round_ in range(5):
            scope = new_scope()
            word = f"w{uuid.uuid4().hex[:8]}"
            claim = f"The staging cluster runs {word} nightly."
            variants = [
                claim,
                f"  {claim.upper()} ",
                claim.replace(" ", "   "),
                claim.lower(),
                f"\t{claim}\n",
                claim.title(),
            ]
            sessions = [
                activate((a, b)[i % 2].stub, scope, task=f"Check the staging cluster {i}").session_id for i in range(6)
            ]

            def call(i: int) -> Callable[[], pb.RememberResult]:
                stub = stubs[i % 2][1]
                return lambda: remember(stub, sessions[i], scope, variants[i])

            results: list[pb.RememberResult] = all_ok(together([call(i) for i in range(6)]))
            dispositions = sorted(r.disposition for r in results)
            assert dispositions == [pb.DISPOSITION_CREATED] + [pb.DISPOSITION_MATCHED] * 5, (round_, results)
            assert len({r.memory_id for r in results}) == 1, results
            assert len({r.source_event_id for r in results}) == 6  # each claim is its own source event
            m = t.memories
            assert rs.db.scalar(select(func.count()).select_from(m).where(m.c.scope == scope)) == 1
            e = t.source_events
            number = int(results[0].memory_id.split("_", 1)[1])
            assert rs.db.scalar(select(func.count()).select_from(e).where(e.c.memory_number == number)) == 6
            for replica in (a, b):
                got = activate(replica.stub, scope, task=claim, page_size=10)
                assert [x.memory_id for x in got.memories] == [results[0].memory_id]
    finally:
        for channel, _ in stubs:
            channel.close()


# ------------------------------------------------------------------------------------------ 69


def test_s69_claim_remembered_through_one_replica_is_activated_through_the_other(replicas):
    """Checklist 69 (PostgreSQL half), behaviour §2.6 read-your-writes: an Activate through one replica
    that starts after another replica acknowledged a Remember returns the claim (task = the claim).
    Ten rounds, alternating direction, each claim asked for at once."""
    rs = replicas()
    a, b = rs.replicas
    scope = new_scope()
    writer_session = {
        a.name: activate(a.stub, scope, task="Writer on replica a").session_id,
        b.name: activate(b.stub, scope, task="Writer on replica b").session_id,
    }
    for round_ in range(10):
        writer, reader = (a, b) if round_ % 2 == 0 else (b, a)
        claim = f"Release train {uuid.uuid4().hex[:10]} departs from platform {round_}."
        stored = remember(writer.stub, writer_session[writer.name], scope, claim)
        assert stored.disposition == pb.DISPOSITION_CREATED
        got = activate(reader.stub, scope, task=claim, page_size=10)
        assert stored.memory_id in [m.memory_id for m in got.memories], (round_, writer.name, reader.name)
        assert next(m for m in got.memories if m.memory_id == stored.memory_id).content == claim


def test_s69_concurrent_used_feedback_through_two_replicas_counts_once(replicas):
    """Checklist 69, behaviour §10.5 and 12.2 L3: two concurrent Feedback `used` for one memory under one
    retrieval, one through each replica → learned 0.05; one call lists it strengthened, the other
    unchanged; one effective row. Six rounds, each on a fresh memory, alternately under a retrieval
    of an open session and of a closed one (10.6: only the per-retrieval lock orders the calls)."""
    rs = replicas()
    a, b = rs.replicas
    stubs = [a.new_stub(), b.new_stub()]
    try:
        for round_ in range(6):
            scope = new_scope()
            (memory_id,) = seed((a, b)[round_ % 2].stub, scope, [DEPLOY])
            act = exposing((b, a)[round_ % 2].stub, scope, [DEPLOY])
            assert learned(act) == {memory_id: 0.0}
            ended = round_ % 2 == 1
            if ended:  # an implicit row covers it and never blocks a later explicit row (L4)
                feedback(a.stub, act.retrieval_id, coverage=pb.COVERAGE_COMPLETE)
                assert commit(b.stub, act.session_id).operation == pb.COMMIT_OPERATION_CLOSED
            records = all_ok(
                together(
                    [
                        lambda: feedback(stubs[0][1], act.retrieval_id, [used(memory_id)]),
                        lambda: feedback(stubs[1][1], act.retrieval_id, [used(memory_id)]),
                    ]
                )
            )
            buckets = sorted((list(r.applied.strengthened), list(r.applied.unchanged)) for r in records)
            assert buckets == [([], [memory_id]), ([memory_id], [])], (round_, buckets)
            assert all(list(r.outstanding.memory_ids) == [] for r in records)
            rows = [r for r in rs.db.ledger(act.retrieval_id) if r.target_kind == "memory" and not r.implicit]
            assert [(r.accepted, r.assessment) for r in rows] == [(True, "used")] * 2
            assert [r.effective for r in rows] == [True, False]  # the first in ledger order
            for replica in (a, b):
                assert learned(exposing(replica.stub, scope, [DEPLOY])) == {memory_id: 0.05}, (round_, replica.name)
    finally:
        for channel, _ in stubs:
            channel.close()


# ------------------------------------------------------------------------------------------ visibility (2.6)


def test_replicas_feedback_retirement_and_close_through_one_replica_are_seen_by_the_other(replicas):
    """Behaviour §2.6 visibility: a feedback row, a retirement and a close acknowledged by one replica
    are reflected by the next request through the other (learned prior, absence from retrieval,
    SESSION_ENDED). Both directions."""
    rs = replicas()
    a, b = rs.replicas
    for writer, reader in ((a, b), (b, a)):
        scope = new_scope()
        deploy, python = seed(writer.stub, scope, [DEPLOY, PYTHON])
        act = exposing(writer.stub, scope, [DEPLOY, PYTHON])
        record = feedback(
            writer.stub,
            act.retrieval_id,
            [
                used(deploy),
                pb.MemoryFeedbackEntry(
                    memory_id=python,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_OUTDATED,
                    reason="replaced by python 3.13",
                ),
            ],
        )
        assert list(record.applied.strengthened) == [deploy] and list(record.applied.retired) == [python]
        seen = exposing(reader.stub, scope, [DEPLOY, PYTHON])
        assert learned(seen) == {deploy: 0.05}, "the retired memory is gone, the used one has risen"
        closed = commit(writer.stub, act.session_id)
        assert closed.operation == pb.COMMIT_OPERATION_CLOSED
        err = expect_error(
            lambda: reader.stub.Remember(
                pb.RememberRequest(
                    session_id=act.session_id,
                    scope=scope,
                    content="Too late for this session.",
                    type=res.MEMORY_TYPE_FACT,
                ),
                timeout=CALL_TIMEOUT,
            )
        )
        assert (err.code, err.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "SESSION_ENDED")
        again = commit(reader.stub, act.session_id)
        assert again.operation == pb.COMMIT_OPERATION_UPDATED and again.already_ended
