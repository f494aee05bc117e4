"""Conformance: sessions, the idle-session reaper and commits of ended sessions (behaviour §2, 9, 11).

Section-14 checklist items 1 and 4–9, over real gRPC. Session state that no response carries is
observed with the admin `session` command (behaviour §4.8). While a test waits for the reaper it polls
the session row through the test server's own database handle (as `Server.snapshot()` does): the
admin command takes seconds per call, and polling through an RPC would itself be session activity.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

import grpc
import pytest

from slowave import config
from slowave.config import Settings
from tests.support import (
    Server,
    activate,
    assess_all,
    check_error,
    commit,
    commit_request,
    expect_error,
    new_scope,
    pb,
    remember,
    res,
    seed_memories,
    used,
    wait_until,
)

DOMAIN = "slowave.ai"

# Claims with disjoint vocabularies, so that a cue containing one verbatim admits it (behaviour §12.1 floor).
CLAIM_A = "Deploy port equals 8080 on alpha clusters"
CLAIM_B = "Graphite runners build nightly bravo artifacts"


# ------------------------------------------------------------------------------------------ helpers


def session_row(srv: Server, session_id: str) -> dict[str, Any]:
    with srv.running.ctx.db.transaction() as uow:
        row = uow.sessions.get_any(session_id)
    assert row is not None, f"session {session_id} does not exist"
    return dict(row._mapping)


def wait_reaped(srv: Server, session_id: str) -> dict[str, Any]:
    wait_until(
        lambda: session_row(srv, session_id)["state"] == "reaped",
        timeout=60,
        interval=0.2,
        what=f"session {session_id} to be reaped",
    )
    return session_row(srv, session_id)


def admin_session(srv: Server, session_id: str) -> dict[str, Any]:
    return json.loads(srv.admin("session", session_id, "--json"))


def admin_sessions(srv: Server) -> dict[str, dict[str, str]]:
    """The admin `sessions` listing (one admin call for many sessions), by session id."""
    listed = {}
    for line in srv.admin("sessions", "--limit", "1000000").splitlines():
        fields = dict(part.split(": ", 1) for part in line.split("\t") if ": " in part)
        if "session_id" in fields:
            listed[fields["session_id"]] = fields
    return listed


def recall_query(stub, session_id: str, scope: str, query: str) -> pb.RecallResponse:
    return stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, query=query), timeout=30)


def recall_page(stub, session_id: str, scope: str, cursor: str) -> pb.RecallResponse:
    return stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, continue_from=cursor), timeout=30)


def entry(kind: int, summary: str, status: int = pb.TRAJECTORY_STATUS_UNSPECIFIED) -> pb.TrajectoryEntry:
    return pb.TrajectoryEntry(kind=kind, summary=summary, status=status)


# ------------------------------------------------------------------------------------------ 1


def test_s01_two_activations_open_two_sessions(server, stub, scope):
    first = activate(stub, scope, task="Investigate the flaky login test")
    second = activate(stub, scope, task="Investigate the flaky login test")

    assert first.session_id != second.session_id
    assert first.retrieval_id != second.retrieval_id
    assert first.session_id.startswith("sess_") and second.session_id.startswith("sess_")
    # Neither resent a token, so each got a new one (behaviour §5).
    assert first.continuity_id != second.continuity_id
    listed = admin_sessions(server)
    for a in (first, second):
        assert (listed[a.session_id]["state"], listed[a.session_id]["scope"]) == ("OPEN", scope)

    closed = commit(stub, first.session_id)
    assert closed.operation == pb.COMMIT_OPERATION_CLOSED and not closed.HasField("already_ended")
    listed = admin_sessions(server)
    assert (listed[first.session_id]["state"], listed[second.session_id]["state"]) == ("CLOSED", "OPEN")

    # The committed session is ended…
    err = expect_error(lambda: recall_query(stub, first.session_id, scope, "flaky login"))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SESSION_ENDED", "invalid_input", False)
    # …while the other one stays fully usable.
    claim = remember(stub, second.session_id, scope, CLAIM_A)
    assert claim.disposition == pb.DISPOSITION_CREATED and claim.scope == scope
    rec = recall_query(stub, second.session_id, scope, CLAIM_A)
    assert rec.retrieval_id.startswith("rec_") and rec.session_id == second.session_id
    assert [m.memory_id for m in rec.memories] == [claim.memory_id]
    assess_all(stub, rec)
    done = commit(stub, second.session_id)
    assert (done.session_id, done.operation, done.committed) == (second.session_id, pb.COMMIT_OPERATION_CLOSED, True)
    assert not done.HasField("already_ended")


# ------------------------------------------------------------------------------------------ 4


def test_s04_idle_session_is_reaped(make_server):
    srv = make_server(session_idle_timeout=2)
    stub, scope = srv.stub, new_scope()
    seed_memories(stub, scope, [CLAIM_A, CLAIM_B])
    a = activate(stub, scope, task=f"{CLAIM_A}. {CLAIM_B}.", page_size=1)
    assert len(a.memories) == 1 and a.more_available and a.HasField("continue_from")
    exposed = a.memories[0].memory_id

    row = wait_reaped(srv, a.session_id)
    # Reaped only once its last activity is older than the timeout (behaviour §2.4). The upper bound
    # (timeout + sweep interval + processing) is only checked through wait_until's deadline: a
    # tight bound cannot hold on a loaded machine.
    assert (row["ended_at"] - row["last_activity_at"]).total_seconds() >= 2

    info = admin_session(srv, a.session_id)
    assert info["state"] == "REAPED"
    assert info["outcome"] == "unknown"
    assert info["ended_at"] is not None
    assert info["feedback_status"] == "incomplete"
    assert info["final_goal"] is None and info["outcome_summary"] is None and info["verification"] is None
    assert info["procedure_id"] is None and info["trajectory"] == []

    # Recall (fresh or continuation) and Remember on the reaped session: SESSION_ENDED, nothing
    # written (an ended session is not touched, behaviour §2.3).
    before = srv.snapshot()
    for call in (
        lambda: recall_query(stub, a.session_id, scope, CLAIM_A),
        lambda: recall_page(stub, a.session_id, scope, a.continue_from),
        lambda: remember(stub, a.session_id, scope, "Reaped sessions accept no claims"),
    ):
        check_error(expect_error(call), grpc.StatusCode.FAILED_PRECONDITION, "SESSION_ENDED", "invalid_input", False)
    assert srv.snapshot() == before

    # Feedback on its retrieval is still accepted (behaviour §2.4, 10.6) and learning applies (L7).
    record = stub.Feedback(
        pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(exposed)]), timeout=30
    ).record
    assert record.retrieval_id == a.retrieval_id and record.session_id == a.session_id
    assert list(record.rejected) == []
    assert len(record.accepted_event_ids) == 2  # the `used` row, then the retrieval-level row
    assert list(record.applied.strengthened) == [exposed]
    assert list(record.outstanding.memory_ids) == [] and list(record.outstanding.procedure_ids) == []
    after = srv.snapshot()
    assert len(after["ledger"]) == len(before["ledger"]) + 2
    # The session's state and feedback status do not change (behaviour §10.6): its row is untouched.
    assert after["sessions"] == before["sessions"]
    info = admin_session(srv, a.session_id)
    assert (info["state"], info["feedback_status"], info["outcome"]) == ("REAPED", "incomplete", "unknown")


# ------------------------------------------------------------------------------------------ 5


def _stay_busy(srv: Server, session_id: str, action, seconds: float = 6.0, period: float = 0.5) -> int:
    """Runs `action` (the session's only activity) for `seconds`; the session must stay OPEN throughout.

    The scenario says "every second"; the calls are paced at half that so that a scheduling stall
    on a loaded machine cannot open a gap longer than the 2 s timeout. The pacing sleep waits for
    nothing to happen.
    """
    end = time.monotonic() + seconds
    calls = 0
    while time.monotonic() < end:
        action()
        calls += 1
        assert session_row(srv, session_id)["state"] == "open", f"reaped after {calls} calls"
        time.sleep(period)
    return calls


def test_s05_feedback_calls_keep_session_open(make_server):
    srv = make_server(session_idle_timeout=2)
    stub, scope = srv.stub, new_scope()
    (memory,) = seed_memories(stub, scope, [CLAIM_A])
    control = activate(stub, scope, task="An untouched control session")
    a = activate(stub, scope, task=CLAIM_A)
    assert [m.memory_id for m in a.memories] == [memory]

    def feedback_call() -> None:
        rec = stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=a.retrieval_id, memory_feedback=[used(memory)], retrieval_quality="still working on it"
            ),
            timeout=30,
        ).record
        assert rec.session_id == a.session_id and list(rec.rejected) == []

    assert _stay_busy(srv, a.session_id, feedback_call) >= 6
    # Commit at once (any pause now would let the reaper act): CLOSED proves it was never reaped.
    closed = commit(stub, a.session_id)
    assert closed.operation == pb.COMMIT_OPERATION_CLOSED and not closed.HasField("already_ended")
    # The reaper did run meanwhile: the untouched control session of the same server is reaped.
    wait_reaped(srv, control.session_id)
    assert admin_session(srv, a.session_id)["state"] == "CLOSED"


def test_s05_continuation_reads_keep_session_open(make_server):
    srv = make_server(session_idle_timeout=2)
    stub, scope = srv.stub, new_scope()
    seed_memories(stub, scope, [CLAIM_A, CLAIM_B])
    control = activate(stub, scope, task="An untouched control session")
    a = activate(stub, scope, task=f"{CLAIM_A}. {CLAIM_B}.", page_size=1)
    assert a.more_available and a.HasField("continue_from")

    pages: list[list[str]] = []

    def continuation_read() -> None:
        page = recall_page(stub, a.session_id, scope, a.continue_from)
        assert page.retrieval_id == a.retrieval_id
        pages.append([m.memory_id for m in page.memories])

    assert _stay_busy(srv, a.session_id, continuation_read) >= 6
    # Commit at once (any pause now would let the reaper act): CLOSED proves it was never reaped.
    assess_all(stub, a)  # covers the activation page and the continuation page (behaviour §10.1)
    closed = commit(stub, a.session_id)
    assert closed.operation == pb.COMMIT_OPERATION_CLOSED and not closed.HasField("already_ended")
    assert all(p == pages[0] and len(p) == 1 for p in pages)  # the same cursor, the same page
    wait_reaped(srv, control.session_id)
    assert admin_session(srv, a.session_id)["state"] == "CLOSED"


# ------------------------------------------------------------------------------------------ 6


def _idle_and_check_open(servers_and_sessions: list[tuple[Server, str]], seconds: float = 5.0) -> None:
    """Nobody touches the sessions for `seconds`; each must stay OPEN the whole time."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for srv, sid in servers_and_sessions:
            assert session_row(srv, sid)["state"] == "open", f"{sid} was reaped"
        time.sleep(0.25)


def test_s06_timeout_zero_or_negative_disables_reaper(make_server):
    disabled = [make_server(session_idle_timeout=0), make_server(session_idle_timeout=-1)]
    control = make_server(session_idle_timeout=2)
    sessions = [(srv, activate(srv.stub, new_scope()).session_id) for srv in disabled]
    control_session = activate(control.stub, new_scope()).session_id
    started = time.monotonic()

    _idle_and_check_open(sessions, seconds=5.0)
    assert time.monotonic() - started >= 5.0
    # The window was long enough for a running reaper to act: the control server's session is reaped.
    wait_reaped(control, control_session)
    for srv, sid in sessions:
        assert session_row(srv, sid)["state"] == "open"
    assert admin_session(*sessions[0])["state"] == "OPEN"


@pytest.mark.parametrize("raw", ["abc", "2.5", "1e3", "0x10", "ten seconds"])
def test_s06_non_integer_timeout_parses_as_3600_with_warning(raw, caplog):
    with caplog.at_level(logging.WARNING, logger="slowave.config"):
        assert config.parse_idle_timeout(raw) == 3600
    assert any(r.levelno == logging.WARNING and r.name == "slowave.config" for r in caplog.records)
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="slowave.config"):
        settings = Settings.from_env({"SLOWAVE_SESSION_IDLE_TIMEOUT": raw})
    assert settings.session_idle_timeout == 3600
    assert settings.reaper_interval == 120  # min(120, max(1, 3600 / 2))
    assert any(r.levelno == logging.WARNING for r in caplog.records)


@pytest.mark.parametrize("raw, expected", [("2", 2), ("0", 0), ("-5", -5), ("3600", 3600)])
def test_s06_integer_timeout_parses_without_warning(raw, expected, caplog):
    with caplog.at_level(logging.WARNING, logger="slowave.config"):
        assert Settings.from_env({"SLOWAVE_SESSION_IDLE_TIMEOUT": raw}).session_idle_timeout == expected
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_s06_non_integer_timeout_behaves_as_3600(make_server, caplog):
    with caplog.at_level(logging.WARNING, logger="slowave.config"):
        settings = Settings.from_env({"SLOWAVE_SESSION_IDLE_TIMEOUT": "not-a-number"})
    assert any(r.levelno == logging.WARNING for r in caplog.records)
    srv = make_server(session_idle_timeout=settings.session_idle_timeout)
    control = make_server(session_idle_timeout=2)
    sid = activate(srv.stub, new_scope()).session_id
    control_session = activate(control.stub, new_scope()).session_id
    started = time.monotonic()

    _idle_and_check_open([(srv, sid)], seconds=5.0)
    assert time.monotonic() - started >= 5.0
    wait_reaped(control, control_session)
    assert session_row(srv, sid)["state"] == "open"
    assert admin_session(srv, sid)["state"] == "OPEN"


# ------------------------------------------------------------------------------------------ 7


def test_s07_reaped_session_commit_is_gated_then_updates(make_server):
    srv = make_server(session_idle_timeout=3)
    stub, scope = srv.stub, new_scope()
    seed_memories(stub, scope, [CLAIM_A, CLAIM_B])
    a = activate(stub, scope, task=f"{CLAIM_A}. {CLAIM_B}.")
    ctx_exposed = [m.memory_id for m in a.memories]
    assert len(ctx_exposed) == 2
    rec = recall_query(stub, a.session_id, scope, CLAIM_A)
    rec_exposed = [m.memory_id for m in rec.memories]
    assert rec_exposed
    # One target of the activation is assessed before the session goes idle; the rest is not.
    stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(ctx_exposed[0])]), timeout=30)
    wait_reaped(srv, a.session_id)

    request = commit_request(
        a.session_id,
        final_goal="Document the deploy port",
        outcome_summary="The deploy port was documented in the runbook.",
    )
    before = srv.snapshot()
    err = expect_error(lambda: stub.Commit(request, timeout=30))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "INCOMPLETE_FEEDBACK", "incomplete_feedback", True)
    assert err.message == "feedback is incomplete"
    assert [(o.retrieval_id, list(o.memory_ids), list(o.procedure_ids)) for o in err.outstanding] == [
        (a.retrieval_id, ctx_exposed[1:], []),
        (rec.retrieval_id, rec_exposed, []),
    ]
    # Nothing stored, and a reaped session is not touched: the whole database is unchanged.
    assert srv.snapshot() == before
    info = admin_session(srv, a.session_id)
    assert (info["state"], info["feedback_status"], info["outcome"], info["final_goal"]) == (
        "REAPED",
        "incomplete",
        "unknown",
        None,
    )

    batch = stub.Feedback(
        pb.FeedbackRequest(
            items=[
                pb.FeedbackItem(retrieval_id=a.retrieval_id, memory_feedback=[used(m) for m in ctx_exposed[1:]]),
                pb.FeedbackItem(retrieval_id=rec.retrieval_id, memory_feedback=[used(m) for m in rec_exposed]),
            ]
        ),
        timeout=30,
    ).batch
    for result in batch.results:
        assert result.WhichOneof("result") == "data", result
        assert list(result.data.rejected) == [] and list(result.data.outstanding.memory_ids) == []

    response = stub.Commit(request, timeout=30)  # the identical request
    assert response.session_id == a.session_id and response.committed
    assert response.operation == pb.COMMIT_OPERATION_UPDATED
    assert response.HasField("already_ended") and response.already_ended
    assert response.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert (response.outcome, response.verification_status) == (res.OUTCOME_SUCCESS, res.VERIFICATION_STATUS_VERIFIED)
    assert response.episodes_formed == 0
    assert not response.HasField("trajectory_ignored") and not response.HasField("trajectory_lifecycle_filtered")
    info = admin_session(srv, a.session_id)
    assert (info["state"], info["feedback_status"], info["outcome"]) == ("REAPED", "complete", "success")
    assert info["final_goal"] == "Document the deploy port"
    assert info["outcome_summary"] == "The deploy port was documented in the runbook."
    assert info["verification"]["status"] == "verified" and info["verification"]["summary"] == "Tests passed."


# ------------------------------------------------------------------------------------------ 8


FIRST_TRAJECTORY = [
    entry(
        pb.TRAJECTORY_KIND_ACTION, "Reviewed the nightly build log for the past 7 days.", pb.TRAJECTORY_STATUS_SUCCEEDED
    ),
    entry(
        pb.TRAJECTORY_KIND_OBSERVATION,
        "  Found that SERVICE_TOKEN was removed from the CI variables.  ",
        pb.TRAJECTORY_STATUS_FAILED,
    ),
    entry(pb.TRAJECTORY_KIND_ACTION, "Opened PR 1042 to restore SERVICE_TOKEN."),  # status unspecified → unknown
]
SECOND_TRAJECTORY = [
    entry(pb.TRAJECTORY_KIND_ACTION, "Merged PR 1042 after review.", pb.TRAJECTORY_STATUS_SUCCEEDED),
    entry(pb.TRAJECTORY_KIND_OBSERVATION, "The nightly build passed twice in a row.", pb.TRAJECTORY_STATUS_SUCCEEDED),
    entry(pb.TRAJECTORY_KIND_ACTION, "Closed the incident ticket.", pb.TRAJECTORY_STATUS_STARTED),
]


@pytest.mark.parametrize("exposure", ["all_assessed", "nothing_exposed"])
def test_s08_reaped_update_stores_trajectory_once(make_server, exposure):
    srv = make_server(session_idle_timeout=3)
    stub, scope = srv.stub, new_scope()
    if exposure == "all_assessed":
        seed_memories(stub, scope, [CLAIM_A])
        a = activate(stub, scope, task=CLAIM_A)
        assert len(a.memories) == 1
        stub.Feedback(
            pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(a.memories[0].memory_id)]), timeout=30
        )
    else:
        a = activate(stub, scope, task="Identify why the nightly build is failing")
        assert len(a.memories) == 0 and len(a.procedures) == 0
        # A remembered claim: the reaper forms its episode; the update must not count it again.
        remember(stub, a.session_id, scope, CLAIM_B)
    wait_reaped(srv, a.session_id)
    episodes = srv.counts()["episodes"]

    first = commit(
        stub,
        a.session_id,
        outcome=res.OUTCOME_PARTIAL,
        trajectory=FIRST_TRAJECTORY,
        final_goal="Identify why the nightly build is failing",
    )
    assert first.operation == pb.COMMIT_OPERATION_UPDATED and first.committed
    assert first.HasField("already_ended") and first.already_ended
    assert first.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert first.episodes_formed == 3
    assert not first.HasField("trajectory_ignored") and not first.HasField("trajectory_lifecycle_filtered")
    assert srv.counts()["episodes"] == episodes + 3

    stored = admin_session(srv, a.session_id)
    assert (stored["state"], stored["feedback_status"], stored["outcome"]) == ("REAPED", "complete", "partial")
    assert [e["summary"] for e in stored["trajectory"]] == [
        "Reviewed the nightly build log for the past 7 days.",
        "Found that SERVICE_TOKEN was removed from the CI variables.",
        "Opened PR 1042 to restore SERVICE_TOKEN.",
    ]
    assert [str(e["kind"]).lower() for e in stored["trajectory"]] == ["action", "observation", "action"]
    assert [str(e["status"]).lower() for e in stored["trajectory"]] == ["succeeded", "failed", "unknown"]
    assert all(e["agent_reported"] is True for e in stored["trajectory"])
    positions = [e["position"] for e in stored["trajectory"]]
    assert positions == sorted(positions) and len(set(positions)) == 3

    second = commit(
        stub,
        a.session_id,
        outcome=res.OUTCOME_SUCCESS,
        trajectory=SECOND_TRAJECTORY,
        final_goal="Fix the nightly build",
    )
    assert second.operation == pb.COMMIT_OPERATION_UPDATED and second.already_ended
    assert second.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert second.episodes_formed == 0
    assert second.HasField("trajectory_ignored") and second.trajectory_ignored == 3
    assert not second.HasField("trajectory_lifecycle_filtered")
    assert srv.counts()["episodes"] == episodes + 3

    again = admin_session(srv, a.session_id)
    assert again["trajectory"] == stored["trajectory"]  # the first stored trajectory stays
    assert (again["state"], again["outcome"], again["final_goal"]) == ("REAPED", "success", "Fix the nightly build")


# ------------------------------------------------------------------------------------------ 9


def test_s09_commit_of_closed_session_updates_outcome(server, stub, scope):
    goal = f"Rotate the staging TLS certificates with certbot {scope}"
    a = activate(stub, scope, task="Rotate the staging certificates")
    remember(stub, a.session_id, scope, "Staging certificates expire every 90 days")
    procedure = pb.CommitProcedure(
        goal=goal, summary="Renew with certbot, then reload nginx.", steps=["Run certbot renew.", "Reload nginx."]
    )
    closed = commit(
        stub,
        a.session_id,
        procedure=procedure,
        outcome=res.OUTCOME_SUCCESS,
        outcome_summary="Certificates were rotated and nginx reloaded.",
    )
    assert closed.operation == pb.COMMIT_OPERATION_CLOSED
    assert closed.procedure_id == f"proc_{a.session_id}"
    episodes = server.counts()["episodes"]

    updated = commit(
        stub,
        a.session_id,
        final_goal="Rotate the staging certificates (nginx reload pending)",
        outcome=res.OUTCOME_PARTIAL,
        outcome_summary="Certificates were rotated but nginx still serves the old one.",
        verification=pb.Verification(
            status=res.VERIFICATION_STATUS_PARTIALLY_VERIFIED, summary="Checked with openssl."
        ),
        trajectory=[
            entry(pb.TRAJECTORY_KIND_ACTION, "Ran certbot renew for staging.", pb.TRAJECTORY_STATUS_SUCCEEDED),
            entry(pb.TRAJECTORY_KIND_OBSERVATION, "nginx kept the old certificate."),
        ],
    )
    assert updated.session_id == a.session_id and updated.committed
    assert updated.operation == pb.COMMIT_OPERATION_UPDATED
    assert updated.HasField("already_ended") and updated.already_ended
    assert updated.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert updated.episodes_formed == 0
    assert updated.HasField("trajectory_ignored") and updated.trajectory_ignored == 2  # a CLOSED session keeps none
    assert (updated.outcome, updated.verification_status) == (
        res.OUTCOME_PARTIAL,
        res.VERIFICATION_STATUS_PARTIALLY_VERIFIED,
    )
    assert updated.procedure_id == f"proc_{a.session_id}"
    assert server.counts()["episodes"] == episodes

    info = admin_session(server, a.session_id)
    assert (info["state"], info["feedback_status"], info["outcome"]) == ("CLOSED", "complete", "partial")
    assert info["final_goal"] == "Rotate the staging certificates (nginx reload pending)"
    assert info["trajectory"] == []

    later = activate(stub, scope, task=goal)
    procs = {p.procedure_id: p for p in later.procedures}
    assert f"proc_{a.session_id}" in procs, [p.procedure_id for p in later.procedures]
    proc = procs[f"proc_{a.session_id}"]
    assert proc.outcome == res.OUTCOME_PARTIAL
    assert proc.outcome_summary == "Certificates were rotated but nginx still serves the old one."
    assert proc.verification_status == res.VERIFICATION_STATUS_PARTIALLY_VERIFIED
    assert (proc.goal, list(proc.steps)) == (goal, ["Run certbot renew.", "Reload nginx."])
