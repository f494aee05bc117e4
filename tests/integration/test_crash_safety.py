"""Crash safety (issue #7): SIGKILL in the middle of a write load loses nothing acknowledged.

The installed `slowave-server` entry point runs on a SQLite file (or, with
SLOWAVE_TEST_BACKEND=postgresql, on a fresh database of the run's PostgreSQL cluster) while several
client threads run whole task cycles — Activate, Remember (scalar and batch), Feedback, Commit with
a procedure and a trajectory. The process is then killed with SIGKILL (no drain, no cleanup) while
calls are in flight, and the store is read directly as the crash left it:

* every call acknowledged with OK is there, intact (claims and their source events, feedback rows,
  closed sessions with outcome, procedure, trajectory and episodes);
* no session is half committed: a session is either open with none of the effects of a commit, or
  closed with all of them (Commit is one transaction);
* the ledger is append-only: every row read while the load was running is still there, unchanged.

Then the server is restarted on the same store with a short idle timeout: it serves the
acknowledged data, and its reaper closes the sessions the crash left open.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field

import grpc
from sqlalchemy import select

from slowave.domain.identifiers import memory_number
from slowave.storage import tables as t
from tests.support import (
    activate,
    assert_serving,
    commit,
    commit_request,
    new_database_url,
    new_scope,
    pb,
    raw_engine,
    res,
    run_admin,
    seed_memories,
    start_server_process,
    used,
    wait_until,
)

SEEDS = ["Gateway certificates rotate every ninety days.", "Staging deploys need a green canary first."]
TASK = "Renew the gateway certificates. " + " ".join(SEEDS)
WORKERS = 4
CALL_TIMEOUT = 60  # seconds per RPC: generous for a loaded machine


@dataclass
class Acknowledged:
    """Everything the server answered OK, recorded by the client threads."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    sessions: set[str] = field(default_factory=set)
    claims: dict[str, tuple[str, str, str]] = field(default_factory=dict)  # memory id -> (content, session, event id)
    feedback: dict[str, str] = field(default_factory=dict)  # fbe_… -> retrieval id
    commits: dict[str, tuple[pb.CommitRequest, pb.CommitResponse]] = field(default_factory=dict)
    errors_before_kill: list[str] = field(default_factory=list)


def _cycle(stub, scope: str, worker: int, acks: Acknowledged) -> None:
    tag = f"{worker}-{uuid.uuid4().hex[:10]}"
    a = stub.Activate(
        pb.ActivateRequest(task=TASK, initial_goal="Renew certificates", scope=scope), timeout=CALL_TIMEOUT
    )
    with acks.lock:
        acks.sessions.add(a.session_id)
    for k in range(2):
        content = f"Crash load claim {tag} number {k}."
        r = stub.Remember(
            pb.RememberRequest(session_id=a.session_id, scope=scope, content=content, type=res.MEMORY_TYPE_FACT),
            timeout=CALL_TIMEOUT,
        ).memory
        with acks.lock:
            acks.claims[r.memory_id] = (content, a.session_id, r.source_event_id)
    items = [f"Crash batch claim {tag} item {k}." for k in range(2)]
    batch = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[pb.RememberItem(content=c, type=res.MEMORY_TYPE_DECISION) for c in items],
        ),
        timeout=CALL_TIMEOUT,
    ).batch
    with acks.lock:
        for content, item in zip(items, batch.results):
            acks.claims[item.data.memory_id] = (content, a.session_id, item.data.source_event_id)
    entries = [used(a.memories[0].memory_id)] if a.memories else []
    fb = stub.Feedback(
        pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=entries, coverage=pb.COVERAGE_COMPLETE),
        timeout=CALL_TIMEOUT,
    ).record
    with acks.lock:
        acks.feedback.update({event: a.retrieval_id for event in fb.accepted_event_ids})
    request = commit_request(
        a.session_id,
        outcome_summary=f"Certificates renewed in run {tag}.",
        procedure=pb.CommitProcedure(
            summary=f"Renewal method {tag}", steps=[f"Fetch {tag}", f"Install {tag}"], caveats=["Check the canary"]
        ),
        trajectory=[
            pb.TrajectoryEntry(
                kind=pb.TRAJECTORY_KIND_ACTION, summary=f"Ran the renewal {tag}", status=pb.TRAJECTORY_STATUS_SUCCEEDED
            ),
            pb.TrajectoryEntry(kind=pb.TRAJECTORY_KIND_OBSERVATION, summary=f"Canary green {tag}"),
        ],
    )
    response = stub.Commit(request, timeout=CALL_TIMEOUT)
    with acks.lock:
        acks.commits[a.session_id] = (request, response)


def _load(stub, scope: str, worker: int, acks: Acknowledged, killed: threading.Event) -> None:
    while True:
        try:
            _cycle(stub, scope, worker, acks)
        except grpc.RpcError as err:
            if not killed.is_set():
                acks.errors_before_kill.append(f"{err.code()}: {err.details()}")
            return
        except ValueError:  # "Cannot invoke RPC on closed channel": the cleanup after the kill closed it
            if not killed.is_set():
                raise
            return


def _read_store(url: str, scope: str) -> dict:
    """The store of the test scope, read directly (no server involved)."""
    engine = raw_engine(url)
    try:
        with engine.connect() as c:
            sessions = {r.id: r for r in c.execute(select(t.sessions).where(t.sessions.c.scope == scope))}
            ids = list(sessions)
            return {
                "sessions": sessions,
                "memories": {r.number: r for r in c.execute(select(t.memories).where(t.memories.c.scope == scope))},
                "events": list(
                    c.execute(
                        select(t.source_events)
                        .where(t.source_events.c.session_id.in_(ids))
                        .order_by(t.source_events.c.number)
                    )
                ),
                "episodes": list(c.execute(select(t.episodes).where(t.episodes.c.session_id.in_(ids)))),
                "procedures": {r.id: r for r in c.execute(select(t.procedures).where(t.procedures.c.scope == scope))},
                "queued": {r.session_id for r in c.execute(select(t.consolidation_queue))},
                "ledger": {r.seq: tuple(r) for r in c.execute(select(t.feedback_rows))},
                "ledger_by_event": {r.event_id: r for r in c.execute(select(t.feedback_rows))},
            }
    finally:
        engine.dispose()


def _check_atomic_sessions(store: dict, load_sessions: set[str]) -> dict[str, int]:
    """Each session is open with none of a commit's effects, or closed with all of them."""
    states: dict[str, int] = {}
    for sid, s in store["sessions"].items():
        states[s.state] = states.get(s.state, 0) + 1
        events = [e for e in store["events"] if e.session_id == sid]
        trajectory = [e for e in events if e.kind == "trajectory"]
        episodes = [e for e in store["episodes"] if e.session_id == sid]
        procedures = [p for p in store["procedures"].values() if p.session_id == sid]
        if s.state == "open":
            assert (
                s.ended_at,
                s.final_goal,
                s.outcome,
                s.outcome_summary,
                s.verification,
                s.procedure_id,
                s.trajectory_stored,
            ) == (None,) * 7, f"open session {sid} carries commit effects: {s}"
            assert not s.completion_recorded and s.feedback_status == "pending", s
            assert trajectory == [] and episodes == [] and procedures == [], f"open session {sid} has commit rows"
            assert sid not in store["queued"], f"open session {sid} was queued for consolidation"
        else:
            assert s.state == "closed", f"session {sid} is {s.state} (the reaper was off before the crash)"
            assert None not in (s.ended_at, s.final_goal, s.outcome, s.outcome_summary, s.verification), s
            assert s.completion_recorded and s.feedback_status == "complete", s
            assert len(trajectory) == (s.trajectory_stored or 0), f"session {sid}: trajectory rows missing"
            assert len(episodes) == len(events), f"session {sid}: {len(episodes)} episodes for {len(events)} events"
            assert sid in store["queued"], f"closed session {sid} was not queued for consolidation"
            assert [p.id for p in procedures] == ([s.procedure_id] if s.procedure_id else []), (sid, procedures)
            if sid in load_sessions:  # every load commit carries a procedure and two trajectory entries
                assert s.procedure_id and s.trajectory_stored == 2, s
    return states


def _check_acknowledged(store: dict, acks: Acknowledged, scope: str) -> None:
    for mid, (content, sid, event) in acks.claims.items():
        row = store["memories"].get(memory_number(mid))
        assert row is not None, f"acknowledged claim {mid} is gone"
        assert (row.content, row.scope, row.status) == (content, scope, "active"), row
        source = [e for e in store["events"] if f"evt_{e.number}" == event]
        assert len(source) == 1 and source[0].memory_number == row.number and source[0].session_id == sid, (
            f"source event {event} of {mid} is missing or wrong"
        )
    for event, retrieval in acks.feedback.items():
        row = store["ledger_by_event"].get(event)
        assert row is not None, f"acknowledged feedback row {event} is gone"
        assert row.retrieval_id == retrieval and row.accepted, row
    for sid, (request, response) in acks.commits.items():
        s = store["sessions"][sid]
        assert s.state == "closed" and response.operation == pb.COMMIT_OPERATION_CLOSED
        assert (s.final_goal, s.outcome_summary, s.outcome) == (request.final_goal, request.outcome_summary, "success")
        assert s.verification["summary"] == request.verification.summary
        proc = store["procedures"][response.procedure_id]
        assert (proc.summary, proc.steps, proc.caveats) == (
            request.procedure.summary,
            list(request.procedure.steps),
            list(request.procedure.caveats),
        )
        trajectory = [e.content for e in store["events"] if e.session_id == sid and e.kind == "trajectory"]
        assert trajectory == [e.summary for e in request.trajectory]
        assert len([e for e in store["episodes"] if e.session_id == sid]) == response.episodes_formed


def _check_replay_equals_state(url: str) -> None:
    """The learned sums the killed server maintained equal a replay of the ledger it left (behaviour §12)."""
    report = json.loads(run_admin(url, "learning-replay", "--json"))
    assert report["differences"] == [] and report["cue_sums"] > 0, report


def test_sigkill_under_load_loses_nothing_acknowledged_and_commits_are_atomic(tmp_path):
    url = new_database_url(tmp_path)
    scope = new_scope()
    # Phase 1: load, with the reaper off, then SIGKILL while calls are in flight.
    server = start_server_process(tmp_path / "first", url, SLOWAVE_SESSION_IDLE_TIMEOUT="0")
    acks, killed = Acknowledged(), threading.Event()
    threads: list[threading.Thread] = []
    try:
        seed_memories(server.stub, scope, SEEDS)
        idle = activate(server.stub, scope, task="A task nobody commits")  # left open: the reaper's work
        threads = [
            threading.Thread(target=_load, args=(server.stub, scope, w, acks, killed), daemon=True)
            for w in range(WORKERS)
        ]
        for th in threads:
            th.start()
        wait_until(
            lambda: len(acks.commits) >= 2 * WORKERS or acks.errors_before_kill,
            timeout=240,
            what="the load to commit some sessions",
        )
        assert acks.errors_before_kill == [], acks.errors_before_kill
        during = _read_store(url, scope)["ledger"]  # rows committed while the load runs
        assert during, "no feedback row was written before the kill"
        # Let the ledger grow past what was read, then kill while calls are in flight.
        committed = len(acks.commits)
        wait_until(
            lambda: len(acks.commits) > committed or acks.errors_before_kill, timeout=240, what="the load to go on"
        )
        killed.set()
        server.kill()
    finally:
        killed.set()
        server.stop()
        for th in threads:
            th.join(timeout=CALL_TIMEOUT + 30)
    assert not any(th.is_alive() for th in threads)
    assert acks.errors_before_kill == [], acks.errors_before_kill

    # Phase 2: the store as the crash left it.
    crashed = _read_store(url, scope)
    _check_acknowledged(crashed, acks, scope)
    states = _check_atomic_sessions(crashed, acks.sessions)
    assert states.get("open", 0) >= 1 and crashed["sessions"][idle.session_id].state == "open", states
    for seq, row in during.items():
        assert crashed["ledger"].get(seq) == row, f"ledger row {seq} changed or vanished: {row}"
    _check_replay_equals_state(url)

    # Phase 3: restart on the same store with a 2 s idle timeout; the reaper closes what was left open.
    again = start_server_process(tmp_path / "second", url, SLOWAVE_SESSION_IDLE_TIMEOUT="2")
    try:
        assert_serving(again.channel)
        left_open = {sid for sid, s in crashed["sessions"].items() if s.state == "open"}
        wait_until(
            lambda: all(_read_store(url, scope)["sessions"][sid].state != "open" for sid in left_open),
            timeout=120,
            interval=0.5,
            what="the reaper to close the sessions the crash left open",
        )
        after = _read_store(url, scope)
        for sid in left_open:
            s = after["sessions"][sid]
            assert (s.state, s.outcome, s.feedback_status) == ("reaped", "unknown", "incomplete"), s
            claims = [e for e in after["events"] if e.session_id == sid]
            assert len([e for e in after["episodes"] if e.session_id == sid]) == len(claims), sid
        for sid, s in crashed["sessions"].items():
            if sid not in left_open:
                assert after["sessions"][sid] == s, f"closed session {sid} changed after the restart"
        _check_acknowledged(after, acks, scope)
        for seq, row in crashed["ledger"].items():
            assert after["ledger"].get(seq) == row, f"ledger row {seq} changed or vanished after the restart"
        # The restarted server serves the acknowledged claims and runs whole cycles again.
        mid, (content, _, _) = sorted(acks.claims.items())[0]
        b = activate(again.stub, scope, task=content, page_size=10)
        assert mid in [m.memory_id for m in b.memories]
        again.stub.Feedback(
            pb.FeedbackRequest(retrieval_id=b.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=CALL_TIMEOUT
        )
        assert commit(again.stub, b.session_id).committed
        final = _read_store(url, scope)
        for seq, row in crashed["ledger"].items():
            assert final["ledger"].get(seq) == row, f"ledger row {seq} changed after new feedback"
        assert len(final["ledger"]) > len(crashed["ledger"])
        _check_replay_equals_state(url)
    finally:
        again.stop()


def test_ledger_rows_are_never_rewritten_by_later_operations(make_server):
    """Append-only in normal operation: after each later operation — more feedback on the same
    retrieval, a stale retirement with supersession, a complete-coverage declaration, commit, a
    commit update that replaces the outcome summary, consolidation — the earlier ledger is an
    unchanged prefix of the new one."""
    srv = make_server()
    stub, scope = srv.stub, new_scope()
    old, other, new = seed_memories(
        stub, scope, ["Builds use python eleven.", "Logs rotate weekly.", "Builds use python twelve."]
    )
    a = activate(stub, scope, task="Builds use python eleven. Logs rotate weekly.")
    assert {old, other} <= {m.memory_id for m in a.memories}
    steps = [
        lambda: stub.Feedback(
            pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(old)]), timeout=CALL_TIMEOUT
        ),
        lambda: stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=a.retrieval_id,
                memory_feedback=[
                    pb.MemoryFeedbackEntry(
                        memory_id=old,
                        assessment=pb.MEMORY_ASSESSMENT_STALE,
                        stale_reason=pb.STALE_REASON_SUPERSEDED,
                        replacement_memory_id=new,
                        reason="Builds moved to python twelve.",
                    )
                ],
            ),
            timeout=CALL_TIMEOUT,
        ),
        lambda: stub.Feedback(
            pb.FeedbackRequest(retrieval_id=a.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=CALL_TIMEOUT
        ),
        lambda: commit(stub, a.session_id, outcome_summary="Python upgrade finished."),
        lambda: commit(stub, a.session_id, outcome_summary="Python upgrade finished and verified."),
        srv.consolidate,
    ]
    before = srv.snapshot()["ledger"]
    grew = 0
    for step in steps:
        step()
        after = srv.snapshot()["ledger"]
        assert after[: len(before)] == before, "an earlier ledger row was changed or removed"
        grew += len(after) > len(before)
        before = after
    assert grew >= 3, "the feedback calls did not append rows"
    columns = list(t.feedback_rows.c.keys())
    rows = [dict(zip(columns, r)) for r in before]
    assert any(r["target_id"] == old and r["assessment"] == "stale" and r["accepted"] for r in rows), (
        "the stale retirement was not accepted"
    )
