"""Operational surface over real gRPC: health, reflection, metrics, admin CLI, graceful shutdown,
and generated stubs that match the protos."""

from __future__ import annotations

import ast
import importlib
import importlib.resources
import re
import subprocess
import threading
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from prometheus_client.parser import text_string_to_metric_families

from slowave.storage.database import Database
from tests.support import (
    REPO,
    activate,
    assess_all,
    commit,
    expect_error,
    new_scope,
    pb,
    remember,
    res,
    used,
    wait_until,
)

SERVICE = "slowave.v1.MemoryService"
UNARY = {"grpc_type": "unary", "grpc_service": SERVICE}


# =========================================================================== health


@pytest.mark.parametrize("service", ["", SERVICE])
def test_health_check_serving(server, service):
    stub = health_pb2_grpc.HealthStub(server.channel)
    reply = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=30)
    assert reply.status == health_pb2.HealthCheckResponse.SERVING


def test_health_check_unknown_service_is_not_found(server):
    stub = health_pb2_grpc.HealthStub(server.channel)
    with pytest.raises(grpc.RpcError) as info:
        stub.Check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=30)
    assert info.value.code() == grpc.StatusCode.NOT_FOUND


# =========================================================================== reflection


def _reflect(server, request: reflection_pb2.ServerReflectionRequest) -> reflection_pb2.ServerReflectionResponse:
    stub = reflection_pb2_grpc.ServerReflectionStub(server.channel)
    responses = stub.ServerReflectionInfo(iter([request]), timeout=30)
    return next(iter(responses))


def test_reflection_lists_memory_service(server):
    reply = _reflect(server, reflection_pb2.ServerReflectionRequest(list_services=""))
    names = [s.name for s in reply.list_services_response.service]
    assert SERVICE in names
    assert "grpc.health.v1.Health" in names


def test_reflection_serves_the_memory_service_descriptor(server):
    from google.protobuf import descriptor_pb2

    reply = _reflect(server, reflection_pb2.ServerReflectionRequest(file_containing_symbol=SERVICE))
    files = [
        descriptor_pb2.FileDescriptorProto.FromString(b) for b in reply.file_descriptor_response.file_descriptor_proto
    ]
    by_name = {f.name: f for f in files}
    assert "slowave/v1/memory_service.proto" in by_name
    service = next(s for s in by_name["slowave/v1/memory_service.proto"].service if s.name == "MemoryService")
    assert sorted(m.name for m in service.method) == ["Activate", "Commit", "Feedback", "Recall", "Remember"]


# =========================================================================== metrics

SLOWAVE_FAMILIES = {
    "slowave_open_sessions": "gauge",
    "slowave_commits_total": "counter",
    "slowave_commit_gate_blocked_total": "counter",
    "slowave_reaped_sessions_total": "counter",
    "slowave_feedback_assessments_total": "counter",
    "slowave_feedback_rejected_total": "counter",
    "slowave_feedback_implicit_total": "counter",
    "slowave_knowledge_gaps_reported_total": "counter",
    "slowave_exposed_targets_total": "counter",
    "slowave_remembered_total": "counter",
    "slowave_requests_refused_total": "counter",
}


def _scrape_text(srv) -> str:
    port = srv.running.metrics_port
    assert port, "the test server exposes /metrics"
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as reply:
        assert reply.status == 200
        return reply.read().decode()


def _samples(text: str) -> dict[tuple[str, frozenset], float]:
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, frozenset(s.labels.items()))] = s.value
    return out


def _value(samples: dict, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)


def test_metrics_endpoint_exposes_grpc_and_slowave_families(server):
    activate(server.stub, new_scope())  # at least one handled RPC
    text = _scrape_text(server)
    types = dict(re.findall(r"^# TYPE (\S+) (\S+)$", text, re.MULTILINE))
    assert types.get("grpc_server_started_total") == "counter"
    assert types.get("grpc_server_handled_total") == "counter"
    assert types.get("grpc_server_handling_seconds") == "histogram"
    for name, kind in SLOWAVE_FAMILIES.items():
        assert types.get(name) == kind, f"{name} missing from /metrics"
    assert re.search(r'^grpc_server_started_total\{[^}]*grpc_method="Activate"[^}]*\} ', text, re.MULTILINE)
    assert re.search(r'^grpc_server_handled_total\{[^}]*grpc_code="OK"[^}]*\} ', text, re.MULTILINE)
    assert re.search(
        r'^grpc_server_handling_seconds_bucket\{[^}]*grpc_method="Activate"[^}]*le="[^"]+"[^}]*\} ', text, re.MULTILINE
    )
    assert re.search(r"^grpc_server_handling_seconds_count\{", text, re.MULTILINE)
    # no label carries a tenant, session or memory id
    assert not re.search(r"(sess|ctx|rec|sch|proc)_[0-9a-f]", text)


def test_metrics_counters_move(make_server):
    srv = make_server()
    stub = srv.stub
    scope = new_scope()
    before = _samples(_scrape_text(srv))
    # The gauge is refreshed from the database in the background (every gauge_refresh_seconds).
    wait_until(
        lambda: _value(_samples(_scrape_text(srv)), "slowave_open_sessions") == 0,
        timeout=60,
        what="open-sessions gauge",
    )

    seed = activate(stub, scope, task="seeding", initial_goal="seed")
    memory_id = remember(stub, seed.session_id, scope, "The deploy port is 8080").memory_id
    assert commit(stub, seed.session_id).operation == pb.COMMIT_OPERATION_CLOSED

    a = activate(stub, scope, task="What is the deploy port? The deploy port is 8080")
    assert [m.memory_id for m in a.memories] == [memory_id]
    # The gauge is refreshed from the database in the background (every gauge_refresh_seconds).
    wait_until(
        lambda: _value(_samples(_scrape_text(srv)), "slowave_open_sessions") == 1,
        timeout=60,
        what="open-sessions gauge",
    )

    bad = expect_error(lambda: activate(stub, scope, initial_goal=" "))
    assert bad.code == grpc.StatusCode.INVALID_ARGUMENT
    blocked = expect_error(lambda: commit(stub, a.session_id))
    assert blocked.code == grpc.StatusCode.FAILED_PRECONDITION
    f = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=a.retrieval_id,
            memory_feedback=[used(memory_id), used("sch_999999")],
            missing=["the staging URL"],
        ),
        timeout=30,
    )
    assert [r.reason for r in f.record.rejected] == ["target_not_exposed"]
    assert commit(stub, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED
    b = activate(stub, scope, task="Again: the deploy port is 8080")
    assess_all(stub, b)  # one implicit row
    assert commit(stub, b.session_id).operation == pb.COMMIT_OPERATION_CLOSED

    expected = {
        ("grpc_server_started_total", "Activate", None): 4,
        ("grpc_server_handled_total", "Activate", "OK"): 3,
        ("grpc_server_handled_total", "Activate", "INVALID_ARGUMENT"): 1,
        ("grpc_server_handled_total", "Commit", "OK"): 3,
        ("grpc_server_handled_total", "Commit", "FAILED_PRECONDITION"): 1,
        ("grpc_server_handled_total", "Remember", "OK"): 1,
        ("grpc_server_handled_total", "Feedback", "OK"): 2,
        ("grpc_server_handling_seconds_count", "Activate", None): 4,
        ("grpc_server_handling_seconds_count", "Commit", None): 4,
    }

    def delta(after: dict, name: str, method: str, code: str | None) -> float:
        labels = {**UNARY, "grpc_method": method, **({"grpc_code": code} if code else {})}
        return _value(after, name, **labels) - _value(before, name, **labels)

    def settled() -> bool:
        after = _samples(_scrape_text(srv))
        return all(delta(after, *key) == n for key, n in expected.items())

    try:
        wait_until(settled, timeout=30, what="gRPC counters to reflect the calls")
    except AssertionError:
        pass  # the per-counter assertions below say which one is off
    after = _samples(_scrape_text(srv))
    for key, n in expected.items():
        assert delta(after, *key) == n, key

    def moved(name: str, **labels: str) -> float:
        return _value(after, name, **labels) - _value(before, name, **labels)

    assert moved("slowave_requests_refused_total", reason="INVALID_INPUT") == 1
    assert moved("slowave_requests_refused_total", reason="INCOMPLETE_FEEDBACK") == 1
    assert moved("slowave_commit_gate_blocked_total") == 1
    assert moved("slowave_remembered_total", disposition="created") == 1
    assert moved("slowave_commits_total", outcome="success", operation="closed", verification_status="verified") == 3
    assert moved("slowave_exposed_targets_total", target_kind="memory") == 2
    assert moved("slowave_feedback_assessments_total", target_kind="memory", value="used") == 1
    assert moved("slowave_feedback_rejected_total", reason="target_not_exposed") == 1
    assert moved("slowave_feedback_implicit_total") == 1
    assert moved("slowave_knowledge_gaps_reported_total") == 1
    # The gauge is refreshed from the database in the background (every gauge_refresh_seconds).
    wait_until(
        lambda: _value(_samples(_scrape_text(srv)), "slowave_open_sessions") == 0,
        timeout=60,
        what="open-sessions gauge",
    )


def test_metrics_invalid_argument_shows_up_with_its_code(server, scope):
    labels = {**UNARY, "grpc_method": "Recall", "grpc_code": "INVALID_ARGUMENT"}
    before = _value(_samples(_scrape_text(server)), "grpc_server_handled_total", **labels)
    a = activate(server.stub, scope)
    err = expect_error(lambda: server.stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope), timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT
    text = _scrape_text(server)
    assert re.search(r'^grpc_server_handled_total\{[^}]*grpc_code="INVALID_ARGUMENT"[^}]*\} ', text, re.MULTILINE)
    assert _value(_samples(text), "grpc_server_handled_total", **labels) == before + 1


# =========================================================================== admin CLI


def test_admin_migrate(server):
    out = server.admin("migrate")
    assert "up to date" in out
    assert "up to date" in server.admin("migrate")  # idempotent


def test_admin_sessions_and_session(server, scope):
    stub = server.stub
    closed = activate(stub, scope, task="Fix the flaky deploy job", initial_goal="Fix the deploy job")
    assess_all(stub, closed)
    reply = commit(
        stub,
        closed.session_id,
        final_goal="Fix the flaky deploy job",
        outcome_summary="Pinned the runner.",
        trajectory=[
            pb.TrajectoryEntry(
                kind=pb.TRAJECTORY_KIND_ACTION,
                summary="  Pinned the runner image.  ",
                status=pb.TRAJECTORY_STATUS_SUCCEEDED,
            ),
            pb.TrajectoryEntry(kind=pb.TRAJECTORY_KIND_ACTION, summary="Called slowave_recall"),
            pb.TrajectoryEntry(kind=pb.TRAJECTORY_KIND_OBSERVATION, summary="The job passed twice."),
        ],
    )
    assert reply.trajectory_lifecycle_filtered == 1
    still_open = activate(stub, scope, task="Another task", initial_goal="Another")

    listing = server.admin("sessions")
    line_closed = next(line for line in listing.splitlines() if closed.session_id in line)
    line_open = next(line for line in listing.splitlines() if still_open.session_id in line)
    assert "CLOSED" in line_closed and scope in line_closed
    assert "OPEN" in line_open
    only_open = server.admin("sessions", "--state", "open", "--limit", "10000")
    assert still_open.session_id in only_open and closed.session_id not in only_open

    shown = server.admin("session", closed.session_id)
    assert f"session_id: {closed.session_id}" in shown
    assert re.search(r"^state: CLOSED$", shown, re.MULTILINE)
    assert re.search(r"^outcome: success$", shown, re.MULTILINE)
    assert re.search(r"^feedback_status: complete$", shown, re.MULTILINE)
    assert re.search(r"^final_goal: Fix the flaky deploy job$", shown, re.MULTILINE)
    assert re.search(r"^outcome_summary: Pinned the runner\.$", shown, re.MULTILINE)
    assert re.search(r"^ended_at: \d{4}-", shown, re.MULTILINE)
    assert "trajectory: 2 entries" in shown
    entries = [line for line in shown.splitlines() if "position:" in line]
    assert len(entries) == 2
    assert "kind: action" in entries[0] and "status: succeeded" in entries[0]
    assert entries[0].rstrip().endswith("summary: Pinned the runner image.")  # stored trimmed
    assert "kind: observation" in entries[1] and "status: unknown" in entries[1]  # missing status → unknown
    assert all("agent_reported: true" in e for e in entries)

    shown_open = server.admin("session", still_open.session_id)
    assert re.search(r"^state: OPEN$", shown_open, re.MULTILINE)
    assert "trajectory: 0 entries" in shown_open
    assess_all(stub, still_open)
    commit(stub, still_open.session_id)


def test_admin_session_unknown_id_fails(server):
    with pytest.raises(subprocess.CalledProcessError) as info:
        server.admin("session", "sess_abc123")
    assert info.value.returncode != 0


def test_admin_knowledge_gaps(server, scope):
    stub = server.stub
    a = activate(stub, scope)
    stub.Feedback(
        pb.FeedbackRequest(retrieval_id=a.retrieval_id, missing=["The staging URL", "the  staging   url"]), timeout=30
    )
    stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, missing=["Who owns the deploy job"]), timeout=30)
    out = server.admin("knowledge-gaps", "--scope", scope)
    lines = [line for line in out.splitlines() if scope in line]
    assert len(lines) == 2
    assert "Who owns the deploy job" in lines[0]  # newest first
    assert "staging" in lines[1].lower() and "occurrences: 2" in lines[1]
    assert "occurrences: 1" in lines[0]
    other = server.admin("knowledge-gaps", "--scope", new_scope())
    assert scope not in other
    assess_all(stub, a)
    commit(stub, a.session_id)


def test_admin_consolidate(make_server):
    srv = make_server()
    srv.running.consolidator.stop()  # the admin command, not the background worker, must do the work
    stub, scope = srv.stub, new_scope()
    summary = f"Restarted the ingest worker {uuid.uuid4().hex[:6]} and the backlog drained."
    a = activate(stub, scope, task="Fix the ingest backlog")
    commit(stub, a.session_id, outcome_summary=summary)

    out = srv.admin("consolidate")
    assert re.search(r"consolidated: 1\b", out), out
    assert re.search(r"consolidated: 0\b", srv.admin("consolidate"))  # the queue is empty now

    b = activate(stub, scope, task=summary)
    lessons = [m for m in b.memories if m.content == summary]
    assert len(lessons) == 1
    assert lessons[0].type == res.MEMORY_TYPE_LESSON
    assert lessons[0].provenance.source_kind == "consolidated"
    assert lessons[0].provenance.source_session_id == a.session_id


# =========================================================================== graceful shutdown


def _shutdown_started(srv) -> bool:
    """True once the server has begun stopping: health turns NOT_SERVING as the drain begins
    (api.drain), and once gRPC itself stops, health calls fail too."""
    try:
        reply = health_pb2_grpc.HealthStub(srv.channel).Check(health_pb2.HealthCheckRequest(service=SERVICE), timeout=5)
    except grpc.RpcError:
        return True
    return reply.status == health_pb2.HealthCheckResponse.NOT_SERVING


def test_graceful_shutdown_lets_in_flight_calls_finish(make_server):
    srv = make_server()
    url = srv.database_url
    scope = new_scope()
    a = activate(srv.stub, scope, task="Shutdown drill")
    calls, per_call = 6, 20
    tag = uuid.uuid4().hex[:8]
    contents = [[f"Shutdown claim {tag} {i}-{j} is durable" for j in range(per_call)] for i in range(calls)]

    def remember_batch(i: int) -> pb.RememberResponse:
        items = [pb.RememberItem(content=c, type=res.MEMORY_TYPE_FACT) for c in contents[i]]
        return srv.stub.Remember(pb.RememberRequest(session_id=a.session_id, scope=scope, memories=items), timeout=120)

    labels = {**UNARY, "grpc_method": "Remember"}

    def started() -> float:
        # Read only this counter: a full registry collection would also evaluate the open-sessions
        # gauge, which queries the database this test deliberately keeps locked.
        return sum(
            s.value
            for metric in srv.running.metrics.started.collect()
            for s in metric.samples
            if s.name == "grpc_server_started_total" and s.labels == labels
        )

    # Hold a lock every Remember of the session needs (SQLite: the database write lock, taken by
    # BEGIN IMMEDIATE; PostgreSQL: the session row lock) so that every call is provably still in
    # flight when the shutdown begins; release it only once the server has started draining.
    holder = Database(url)
    stopper = threading.Thread(target=lambda: srv.running.stop(grace=10), name="stopper")
    with ThreadPoolExecutor(max_workers=calls) as pool:
        with holder.transaction() as held:
            held.sessions.get("local", a.session_id, lock=True)
            futures = [pool.submit(remember_batch, i) for i in range(calls)]
            wait_until(lambda: started() >= calls, timeout=60, what="all Remember calls to reach the server")
            assert not any(f.done() for f in futures), "the calls must still be in flight"
            stopper.start()
            wait_until(lambda: _shutdown_started(srv), timeout=30, what="the server to begin its graceful shutdown")
        outcomes = []
        for f in futures:
            try:
                outcomes.append(f.result(timeout=120))
            except grpc.RpcError as err:
                outcomes.append(err)
    stopper.join(timeout=120)
    assert not stopper.is_alive()
    holder.engine.dispose()

    failed = [o for o in outcomes if isinstance(o, grpc.RpcError)]
    assert not failed, f"in-flight calls were cut off: {[(e.code(), e.details()) for e in failed]}"

    # every acknowledged claim is in the database
    check = Database(url)
    try:
        with check.transaction() as uow:
            for i, reply in enumerate(outcomes):
                assert reply.WhichOneof("result") == "batch"
                assert len(reply.batch.results) == per_call
                for j, item in enumerate(reply.batch.results):
                    assert item.WhichOneof("result") == "data", item
                    row = uow.memories.get("local", int(item.data.memory_id[len("sch_") :]))
                    assert row is not None and row.content == contents[i][j] and row.status == "active"
    finally:
        check.engine.dispose()

    # and a new server on the same database serves them
    again = make_server(database_url=url)
    claim = contents[3][7]
    b = activate(again.stub, scope, task=f"Is this true? {claim}")
    assert claim in [m.content for m in b.memories]


# =========================================================================== generated stubs


def _serialized_file_from_generated(path: Path) -> bytes:
    tree = ast.parse(path.read_text())
    blobs = [
        node.args[0].value
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and getattr(node.func, "attr", "") == "AddSerializedFile"
        and node.args
        and isinstance(node.args[0], ast.Constant)
    ]
    assert len(blobs) == 1, f"{path}: expected one AddSerializedFile call"
    return blobs[0]


def test_generated_stubs_are_not_stale(tmp_path):
    from grpc_tools import protoc

    proto_root = REPO / "protos"
    protos = sorted((proto_root / "slowave" / "v1").glob("*.proto"))
    assert protos, "no protos found"
    include = str(importlib.resources.files("grpc_tools") / "_proto")
    rel = [str(p.relative_to(proto_root)) for p in protos]
    rc = protoc.main(["grpc_tools.protoc", f"-I{proto_root}", f"-I{include}", f"--python_out={tmp_path}", *rel])
    assert rc == 0, "protoc failed"
    for proto, name in zip(protos, rel):
        fresh = _serialized_file_from_generated(tmp_path / name.replace(".proto", "_pb2.py"))
        module = importlib.import_module("slowave.v1." + proto.stem + "_pb2")
        assert module.DESCRIPTOR.name == name
        assert module.DESCRIPTOR.serialized_pb == fresh, (
            f"{module.__name__} is stale: regenerate the stubs from {name} (pip install -e . / make install)"
        )
