"""Observability over real gRPC: the retrieval-quality metrics a full cycle moves, the reaper's
count of exposures left unassessed, the database unit-of-work histogram, a real scrape checked by
promtool, and the structured per-RPC log line (fields, request id echo, no memory contents)."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import uuid
from datetime import UTC, datetime, timedelta

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from slowave.api.access_log import ACCESS_LOGGER, JsonFormatter, configure_logging
from slowave.api.metrics import STALE_REASONS
from slowave.service.reaper import reap_idle_sessions
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.metrics_scrape import exported_names, label_values, promtool_run, samples, scrape, value
from tests.support import (
    activate,
    assess_all,
    commit,
    expect_error,
    new_database_url,
    new_scope,
    pb,
    res,
    seed_memories,
    used,
    wait_until,
)

SERVICE = "slowave.v1.MemoryService"
METHODS = ("Activate", "Remember", "Recall", "Feedback", "Commit")
DB_OPERATIONS = {*METHODS, "reaper", "consolidation", "gauges", "index_merge", "other"}
CLAIMS = ["The staging host is alpha-17.", "The build uses Gradle 8.4.", "The artifact cache lives in /var/cache/arti."]
TASK = "Release the service: " + " ".join(CLAIMS)
PROCEDURE_GOAL = "Release the service to staging"


def _scrape(srv) -> dict:
    return samples(scrape(srv.running.metrics_port))


def _stale(entry_id: str, reason: int) -> pb.MemoryFeedbackEntry:
    return pb.MemoryFeedbackEntry(
        memory_id=entry_id, assessment=pb.MEMORY_ASSESSMENT_STALE, stale_reason=reason, reason="the host was renamed"
    )


def _release_cycle(stub, scope: str) -> tuple[pb.ActivateResponse, list[str], pb.ActivateResponse]:
    """Seeds three claims, then a task that commits a procedure, then a task exposed to both; returns
    that last activation (left open), the claims' ids and the procedure task's activation."""
    ids = seed_memories(stub, scope, CLAIMS)  # its activation, in an empty scope, exposes nothing
    first = activate(stub, scope, task=PROCEDURE_GOAL, initial_goal="release")
    assess_all(stub, first)
    commit(
        stub,
        first.session_id,
        final_goal=PROCEDURE_GOAL,
        procedure=pb.CommitProcedure(goal=PROCEDURE_GOAL, steps=["Build the artifact", "Deploy it to staging"]),
    )
    a = activate(stub, scope, task=f"{PROCEDURE_GOAL}. {TASK}", page_size=10)
    exposed = [m.memory_id for m in a.memories]
    assert set(ids) <= set(exposed), (ids, exposed)
    assert f"proc_{first.session_id}" in [p.procedure_id for p in a.procedures]
    return a, ids, first


# =========================================================================== metrics


def test_a_full_cycle_moves_the_retrieval_quality_families(make_server):
    srv = make_server()
    stub, scope = srv.stub, new_scope()
    before = _scrape(srv)
    a, (host, build, cache), first = _release_cycle(stub, scope)
    proc_id = a.procedures[0].procedure_id
    f = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=a.retrieval_id,
            memory_feedback=[
                used(host),
                _stale(build, pb.STALE_REASON_OUTDATED),
                pb.MemoryFeedbackEntry(memory_id=cache, assessment=pb.MEMORY_ASSESSMENT_IRRELEVANT),
            ],
            procedure_feedback=[
                pb.ProcedureFeedbackEntry(
                    procedure_id=proc_id,
                    use=pb.PROCEDURE_USE_USED,
                    effect=res.EFFECT_HELPED,
                    contribution="followed it",
                )
            ],
            missing=["the staging credentials"],
            coverage=pb.COVERAGE_COMPLETE,
        ),
        timeout=30,
    )
    assert list(f.record.rejected) == []
    assert commit(stub, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED
    after = _scrape(srv)

    def moved(name: str, **labels: str) -> float:
        return value(after, name, **labels) - value(before, name, **labels)

    # Exposure: what each activation of the cycle rendered (the seeding one, in an empty scope, nothing).
    assert moved("slowave_exposed_targets_total", target_kind="memory") == len(first.memories) + len(a.memories)
    assert moved("slowave_exposed_targets_total", target_kind="procedure") == len(first.procedures) + len(a.procedures)
    for assessment in ("used", "stale", "irrelevant"):
        assert moved("slowave_feedback_assessments_total", target_kind="memory", value=assessment) == 1, assessment
    assert moved("slowave_memory_stale_assessments_total", stale_reason="outdated") == 1
    assert sum(moved("slowave_memory_stale_assessments_total", stale_reason=r) for r in STALE_REASONS) == 1
    assert moved("slowave_procedure_effects_total", effect="helped") == 1
    assert moved("slowave_procedure_effects_total", effect="harmed") == 0
    assert moved("slowave_feedback_assessments_total", target_kind="procedure", value="used/helped") == 1
    assert moved("slowave_knowledge_gaps_reported_total") == 1
    assert moved("slowave_commits_total", outcome="success", operation="closed", verification_status="verified") == 3
    # Every family of a bounded label set is exported from the start, at 0 where nothing happened.
    assert {*STALE_REASONS} <= label_values(after, "slowave_memory_stale_assessments_total", "stale_reason")
    assert {"helped", "no_effect", "harmed", "unknown"} <= label_values(
        after, "slowave_procedure_effects_total", "effect"
    )

    # The database: one observation per unit of work, labelled by the RPC it served.
    for method, at_least in (("Activate", 3), ("Remember", 3), ("Feedback", 3), ("Commit", 3)):
        n = moved("slowave_db_transaction_seconds_count", operation=method)
        assert n >= at_least, (method, n)
        assert moved("slowave_db_transaction_seconds_bucket", operation=method, le="+Inf") == n
        assert moved("slowave_db_transaction_seconds_sum", operation=method) > 0
    assert label_values(after, "slowave_db_transaction_seconds_count", "operation") <= DB_OPERATIONS
    # The background consolidator is a unit of work of its own, not attributed to an RPC.
    wait_until(
        lambda: value(_scrape(srv), "slowave_db_transaction_seconds_count", operation="consolidation") > 0,
        timeout=60,
        what="a consolidation unit of work",
    )


def test_a_real_scrape_passes_promtool_and_names_no_id(make_server):
    srv = make_server()
    stub, scope = srv.stub, new_scope()
    a, _, _ = _release_cycle(stub, scope)
    expect_error(lambda: commit(stub, a.session_id))  # the gate: a refused request, a non-OK code
    text = scrape(srv.running.metrics_port)
    check = promtool_run("check", "metrics", stdin=text)
    assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), (
        check.returncode,
        check.stdout,
        check.stderr,
    )
    assert not re.search(r"(sess|ctx|rec|sch|proc|cur|fbe|evt|ep)_[0-9a-f]", text), "an id leaked into a label"
    assert scope not in text
    for family in (
        "slowave_reaped_unassessed_exposures_total",
        "slowave_memory_stale_assessments_total",
        "slowave_procedure_effects_total",
        "slowave_db_transaction_seconds_bucket",
        "grpc_server_handling_seconds_bucket",
    ):
        assert family in exported_names(text), family


def test_promtool_rejects_a_broken_exposition():
    """Control for the test above: the check does fail on a bad scrape."""
    bad = '# TYPE x_total counter\nx_total{a="1"} 1\nx_total{a="1"} 2\n'  # duplicate series
    assert promtool_run("check", "metrics", stdin=bad).returncode != 0


# =========================================================================== the reaper


class _Later:
    def __init__(self, delta: timedelta) -> None:
        self.delta = delta

    def now(self) -> datetime:
        return datetime.now(UTC) + self.delta


def test_a_sweep_reports_exposures_left_without_feedback(make_server):
    srv = make_server()  # default idle timeout: the background reaper stays out of the way
    stub, scope = srv.stub, new_scope()
    a, (host, _build, _cache), _ = _release_cycle(stub, scope)
    stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(host)]), timeout=30)
    idle = activate(stub, scope, task="Nothing matches this at all: zebra quokka")  # exposes nothing
    assert not idle.memories and not idle.procedures
    recall = stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope, query=CLAIMS[1]), timeout=30)

    later = dataclasses.replace(srv.running.ctx, clock=_Later(timedelta(hours=2)))
    sweep = reap_idle_sessions(later)
    assert sorted(sweep.session_ids) == sorted([a.session_id, idle.session_id])
    assert sweep.unassessed["memory"] == len(a.memories) - 1 + len(recall.memories)
    assert sweep.unassessed["procedure"] == len(a.procedures) + len(recall.procedures)
    assert reap_idle_sessions(later).session_ids == []  # reaped once


def test_the_reaper_exports_reaped_sessions_and_unassessed_exposures(make_server):
    # The cycle runs on a server that does not reap (a slow machine could otherwise reap a session
    # between two calls of the cycle); a second server on the same database reaps after 1 s.
    builder = make_server()
    a, _, _ = _release_cycle(builder.stub, new_scope())  # every session but `a` is committed
    srv = make_server(session_idle_timeout=1, database_url=builder.database_url)  # its own registry, from 0
    wait_until(lambda: value(_scrape(srv), "slowave_reaped_sessions_total") >= 1, timeout=60, what="the reaper")
    after = _scrape(srv)
    assert value(after, "slowave_reaped_sessions_total") == 1
    assert value(after, "slowave_reaped_unassessed_exposures_total", target_kind="memory") == len(a.memories) > 0
    assert value(after, "slowave_reaped_unassessed_exposures_total", target_kind="procedure") == len(a.procedures) > 0
    assert value(after, "slowave_db_transaction_seconds_count", operation="reaper") > 0


# =========================================================================== logs

_ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$")
_FIELDS = {
    "ts",
    "level",
    "logger",
    "pid",
    "msg",
    "method",
    "code",
    "latency_ms",
    "tenant",
    "session_id",
    "request_id",
    "trace_id",
    "peer",
}


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.setFormatter(JsonFormatter())
        self.lines: list[str] = []
        self._guard = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        line = self.format(record)
        with self._guard:
            self.lines.append(line)


@pytest.fixture
def captured_log():
    """Every record of the process at DEBUG, formatted by the server's JSON formatter."""
    handler = _Capture()
    root, access = logging.getLogger(), logging.getLogger(ACCESS_LOGGER)
    saved = root.level, access.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    access.setLevel(logging.DEBUG)
    yield handler
    root.removeHandler(handler)
    root.setLevel(saved[0])
    access.setLevel(saved[1])


def _rid() -> str:
    return f"test-{uuid.uuid4().hex}"


def _access_lines(lines: list[str], request_id: str) -> list[dict]:
    out = []
    for line in lines:
        data = json.loads(line)
        if data.get("msg") == "rpc" and data.get("request_id") == request_id:
            out.append(data)
    return out


def _one_line(handler: _Capture, request_id: str) -> dict:
    found = wait_until(
        lambda: _access_lines(list(handler.lines), request_id), timeout=30, what=f"the access line of {request_id}"
    )
    assert len(found) == 1, found
    line = found[0]
    assert set(line) == _FIELDS, set(line) ^ _FIELDS
    assert _ISO_UTC.match(line["ts"]), line["ts"]
    assert isinstance(line["latency_ms"], (int, float)) and line["latency_ms"] >= 0
    assert line["logger"] == ACCESS_LOGGER
    assert re.match(r"^(ipv4|ipv6|unix):", line["peer"]), line["peer"]
    return line


def test_one_json_line_per_rpc_with_its_fields_and_no_memory_contents(server, captured_log):
    stub, scope = server.stub, new_scope()
    secret = f"The vault passphrase is {uuid.uuid4().hex}"
    calls: dict[str, tuple[str, str, str | None]] = {}  # request id -> (method, code, session)

    rid = _rid()
    a, call = stub.Activate.with_call(
        pb.ActivateRequest(task=f"Rotate secrets {secret}", scope=scope, initial_goal="rotate"),
        metadata=[("x-request-id", rid)],
        timeout=30,
    )
    assert dict(call.trailing_metadata())["x-request-id"] == rid
    calls[rid] = ("Activate", "OK", a.session_id)

    rid = _rid()
    _m, call = stub.Remember.with_call(
        pb.RememberRequest(session_id=a.session_id, scope=scope, content=secret, type=res.MEMORY_TYPE_FACT),
        metadata=[("x-request-id", rid)],
        timeout=30,
    )
    calls[rid] = ("Remember", "OK", a.session_id)

    rid = _rid()
    f, call = stub.Feedback.with_call(
        pb.FeedbackRequest(
            retrieval_id=a.retrieval_id, coverage=pb.COVERAGE_COMPLETE, retrieval_quality=secret, missing=[secret]
        ),
        metadata=[("x-request-id", rid)],
        timeout=30,
    )
    calls[rid] = ("Feedback", "OK", a.session_id)  # the session comes from the response's record

    rid = _rid()
    with pytest.raises(grpc.RpcError) as info:
        stub.Activate(
            pb.ActivateRequest(task=secret, scope=scope, initial_goal=" "), metadata=[("x-request-id", rid)], timeout=30
        )
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert dict(info.value.trailing_metadata())["x-request-id"] == rid, "echoed on errors too"
    calls[rid] = ("Activate", "INVALID_ARGUMENT", None)

    rid = _rid()
    _h, call = health_pb2_grpc.HealthStub(server.channel).Check.with_call(
        health_pb2.HealthCheckRequest(service=SERVICE), metadata=[("x-request-id", rid)], timeout=30
    )
    calls[rid] = ("grpc.health.v1.Health/Check", "OK", None)

    for rid, (method, code, session) in calls.items():
        line = _one_line(captured_log, rid)
        full = method if "/" in method else f"{SERVICE}/{method}"
        assert (line["method"], line["code"], line["session_id"]) == (full, code, session), line
        if method.startswith("grpc.health"):
            assert line["level"] == "DEBUG" and line["tenant"] is None  # probes: quiet, no tenant
        else:
            assert line["level"] == "INFO" and line["tenant"] == "local"

    # Nothing the agent wrote appears in any line of the process log, at DEBUG.
    assert captured_log.lines
    assert not [line for line in captured_log.lines if secret in line or scope in line.replace("\\", "")]


def test_request_ids_are_generated_when_absent_or_implausible(server, captured_log):
    health = health_pb2_grpc.HealthStub(server.channel)
    seen = []
    for metadata in ((), (("x-request-id", "has spaces in it"),), (("x-request-id", "x" * 129),)):
        _reply, call = health.Check.with_call(health_pb2.HealthCheckRequest(), metadata=metadata, timeout=30)
        echoed = dict(call.trailing_metadata())["x-request-id"]
        assert re.fullmatch(r"[0-9a-f]{32}", echoed), echoed
        assert _one_line(captured_log, echoed)["method"] == "grpc.health.v1.Health/Check"
        seen.append(echoed)
    assert len(set(seen)) == 3


def test_log_format_and_level_from_the_environment():
    root = logging.getLogger()
    saved = list(root.handlers), root.level
    try:
        for env, is_json in (
            ({}, True),
            ({"SLOWAVE_LOG_FORMAT": "text"}, False),
            ({"SLOWAVE_LOG_FORMAT": "yaml"}, True),
        ):
            out = io.StringIO()
            configure_logging({**env, "SLOWAVE_LOG_LEVEL": "warning"}, stream=out)
            assert root.level == logging.WARNING
            logging.getLogger("slowave.test").info("hidden")
            logging.getLogger("slowave.test").warning("shown %d", 7)
            lines = out.getvalue().splitlines()
            assert not any("hidden" in line for line in lines)
            shown = [line for line in lines if "shown 7" in line]
            assert len(shown) == 1
            if is_json:
                data = json.loads(shown[0])
                assert (data["level"], data["logger"], data["msg"]) == ("WARNING", "slowave.test", "shown 7")
                assert _ISO_UTC.match(data["ts"])
            else:
                assert re.search(r" WARNING slowave\.test: shown 7$", shown[0]), shown[0]
            if env.get("SLOWAVE_LOG_FORMAT") == "yaml":
                assert any("neither json nor text" in line for line in lines)
        out = io.StringIO()
        configure_logging({"SLOWAVE_LOG_LEVEL": "chatty"}, stream=out)
        assert root.level == logging.INFO and "not a level name" in out.getvalue()
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])


def test_the_server_process_logs_json_lines_only(tmp_path):
    """`slowave-server` as deployed: its whole stderr is JSON lines, one access line per RPC."""
    exe = shutil.which("slowave-server") or os.path.join(os.path.dirname(sys.executable), "slowave-server")
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLOWAVE_")}
    env.update(
        SLOWAVE_LISTEN_ADDR="127.0.0.1:0",
        SLOWAVE_METRICS_ADDR="",
        SLOWAVE_DATA_DIR=str(tmp_path / "data"),
        SLOWAVE_DATABASE_URL=new_database_url(tmp_path),
    )
    proc = subprocess.Popen([exe], env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()
    try:
        match = wait_until(
            lambda: next(
                (m for line in list(lines) if (m := re.search(r"slowave serving \S+ on port (\d+)", line))), None
            ),
            timeout=90,
            what="server start",
        )
        stub = pb_grpc.MemoryServiceStub(grpc.insecure_channel(f"127.0.0.1:{match.group(1)}"))
        scope, secret = new_scope(), f"The launch code is {uuid.uuid4().hex}"
        rids = [_rid() for _ in range(3)]
        a = stub.Activate(
            pb.ActivateRequest(task="Launch", scope=scope, initial_goal="launch"),
            metadata=[("x-request-id", rids[0])],
            timeout=30,
        )
        stub.Remember(
            pb.RememberRequest(session_id=a.session_id, scope=scope, content=secret, type=res.MEMORY_TYPE_FACT),
            metadata=[("x-request-id", rids[1])],
            timeout=30,
        )
        stub.Commit(
            pb.CommitRequest(
                session_id=a.session_id,
                final_goal="launched",
                outcome=res.OUTCOME_SUCCESS,
                outcome_summary="Launched.",
                verification=pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary="ok"),
            ),
            metadata=[("x-request-id", rids[2])],
            timeout=30,
        )
        wait_until(lambda: all(_access_lines(list(lines), r) for r in rids), timeout=30, what="access lines")
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)
    assert proc.returncode == 0
    for line in lines:
        json.loads(line)  # every line, start-up and shutdown included
    for rid, method in zip(rids, ("Activate", "Remember", "Commit")):
        (line,) = _access_lines(lines, rid)
        assert (line["method"], line["code"], line["tenant"], line["session_id"]) == (
            f"{SERVICE}/{method}",
            "OK",
            "local",
            a.session_id,
        )
    assert not [line for line in lines if secret in line]
