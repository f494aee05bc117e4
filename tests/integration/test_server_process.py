"""The installed `slowave-server` entry point, as `make serve` runs it: starts on SQLite, answers
health, reflection and /metrics, and drains on SIGTERM without losing acknowledged writes."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import urllib.request

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.support import activate, new_scope, pb, res, wait_until

_READY = re.compile(r"on port (\d+) .*metrics port (\d+)")
_FROZEN = re.compile(r"garbage collector: (\d+) objects frozen at start")
_BLAS = re.compile(r"BLAS threads per process: \[([\d, ]*)\] \(api.blas\)")


@pytest.fixture
def server_process(tmp_path):
    exe = shutil.which("slowave-server") or os.path.join(os.path.dirname(os.sys.executable), "slowave-server")
    env = {
        **os.environ,
        "SLOWAVE_LISTEN_ADDR": "127.0.0.1:0",
        "SLOWAVE_METRICS_ADDR": "127.0.0.1:0",
        "SLOWAVE_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("SLOWAVE_DATABASE_URL", None)
    proc = subprocess.Popen([exe], env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    lines: list[str] = []
    threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()
    match = wait_until(
        lambda: next((m for l in list(lines) if (m := _READY.search(l))), None), timeout=60, what="server start"
    )
    yield proc, int(match.group(1)), int(match.group(2)), tmp_path, lines
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=30)


def test_server_starts_on_sqlite_and_answers_health_reflection_metrics(server_process):
    proc, port, metrics_port, tmp_path, lines = server_process
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "slowave.v1.MemoryService"):
        assert (
            health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
            == health_pb2.HealthCheckResponse.SERVING
        )
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    answer = next(
        reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
    )
    assert "slowave.v1.MemoryService" in [s.name for s in answer.list_services_response.service]
    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=10).read().decode()
    assert "grpc_server_handled_total" in body
    assert (tmp_path / "data" / "slowave.db").exists(), "the default store is a SQLite file in the data folder"
    # Each serving process froze what it loaded at start (api.collector), so full garbage
    # collections never walk it again.
    frozen = [int(m.group(1)) for l in list(lines) if (m := _FROZEN.search(l))]
    assert frozen and min(frozen) > 10_000
    # Every process runs numpy's BLAS on one thread (api.blas): on its own pool, the dense index's
    # products left threads spinning on a second core.
    blas = [m.group(1) for l in list(lines) if (m := _BLAS.search(l))]
    assert blas and set(blas) == {"1"}, lines


def test_sigterm_drains_and_keeps_acknowledged_writes(server_process):
    proc, port, _, tmp_path, lines = server_process
    stub = pb_grpc.MemoryServiceStub(grpc.insecure_channel(f"127.0.0.1:{port}"))
    scope = new_scope()
    a = activate(stub, scope)
    acknowledged = [
        stub.Remember(
            pb.RememberRequest(
                session_id=a.session_id, scope=scope, content=f"Claim number {i}", type=res.MEMORY_TYPE_FACT
            ),
            timeout=30,
        ).memory.memory_id
        for i in range(5)
    ]
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert any("stopped" in l for l in lines)
    # Restart on the same data folder: every acknowledged claim is there.
    env = {
        **os.environ,
        "SLOWAVE_LISTEN_ADDR": "127.0.0.1:0",
        "SLOWAVE_METRICS_ADDR": "",
        "SLOWAVE_DATA_DIR": str(tmp_path / "data"),
    }
    env.pop("SLOWAVE_DATABASE_URL", None)
    again = subprocess.Popen([proc.args[0]], env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    lines2: list[str] = []
    # Keep draining its log, or a full pipe would block the server.
    threading.Thread(target=lambda: lines2.extend(iter(again.stderr.readline, "")), daemon=True).start()
    try:
        match = wait_until(
            lambda: next((m for l in list(lines2) if (m := re.search(r"on port (\d+)", l))), None),
            timeout=60,
            what="restart",
        )
        port2 = int(match.group(1))
        stub2 = pb_grpc.MemoryServiceStub(grpc.insecure_channel(f"127.0.0.1:{port2}"))
        task = " ".join(f"Claim number {i}" for i in range(5))
        b = activate(stub2, scope, task=task, page_size=10)
        assert sorted(m.memory_id for m in b.memories) == sorted(acknowledged)
    finally:
        again.send_signal(signal.SIGTERM)
        try:
            again.wait(timeout=60)
        except subprocess.TimeoutExpired:
            again.kill()
            again.wait(timeout=30)
