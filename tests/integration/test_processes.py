"""`slowave-server` with several processes on one port and one store (api.supervisor), on both
backends: every process serves and sees the others' writes, writers of different processes never
lose a write, metrics are aggregated, a dead process comes back, SIGTERM drains them all and a
SIGKILL of the supervisor leaves no process behind."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from sqlalchemy import text

from tests.support import (
    ServerProcess,
    metric_value,
    new_database_url,
    new_scope,
    pb,
    pb_grpc,
    raw_engine,
    res,
    server_executable,
    start_server_process,
    wait_until,
)

PROCESSES = 2


def _start(tmp_path: Path, url: str | None = None, **env: str) -> ServerProcess:
    return start_server_process(
        tmp_path, url or new_database_url(tmp_path), SLOWAVE_PROCESSES=str(PROCESSES), SLOWAVE_LOG_FORMAT="json", **env
    )


def _children(pid: int) -> set[int]:
    try:
        text = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except FileNotFoundError:
        return set()
    return {int(p) for p in text.split()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return not (status.exists() and "State:\tZ" in status.read_text())


def _fresh_stub(port: int) -> tuple[grpc.Channel, pb_grpc.MemoryServiceStub]:
    """A new connection, which the kernel may hand to any of the processes."""
    channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.use_local_subchannel_pool", 1)])
    return channel, pb_grpc.MemoryServiceStub(channel)


def _rpc_pids(lines: list[str]) -> set[int]:
    pids = set()
    for line in list(lines):
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if data.get("msg") == "rpc":
            pids.add(data["pid"])
    return pids


def test_every_process_serves_and_sees_what_the_others_stored(tmp_path):
    server = _start(tmp_path)
    try:
        children = wait_until(lambda: (c := _children(server.proc.pid)) and len(c) == PROCESSES and c, timeout=60)
        scope = new_scope()
        claims = [f"The {uuid.uuid4().hex[:8]} worker listens on port {7000 + i}." for i in range(16)]
        for claim in claims:  # each over its own connection
            channel, stub = _fresh_stub(server.port)
            a = stub.Activate(pb.ActivateRequest(task="Record ports", initial_goal="record", scope=scope), timeout=30)
            stub.Remember(
                pb.RememberRequest(session_id=a.session_id, scope=scope, content=claim, type=res.MEMORY_TYPE_FACT),
                timeout=30,
            )
            channel.close()
        for claim in claims:  # read back over other connections, so mostly by the other process
            channel, stub = _fresh_stub(server.port)
            word = claim.split()[1]
            a = stub.Activate(
                pb.ActivateRequest(task=f"Which port does the {word} worker use?", initial_goal="find", scope=scope),
                timeout=30,
            )
            assert claim in [m.content for m in a.memories], claim
            channel.close()
        # 64 connections: all on one process would be a 2^-63 accident of the kernel's hashing.
        pids = wait_until(lambda: (p := _rpc_pids(server.lines)) and len(p) == PROCESSES and p, timeout=30)
        assert pids == children
    finally:
        server.stop()


def test_writers_in_different_processes_lose_nothing(tmp_path):
    """Concurrent Remember calls over many connections: every acknowledged claim is stored once."""
    url = new_database_url(tmp_path)
    server = _start(tmp_path, url)
    try:
        scope = new_scope()

        def write(i: int) -> list[str]:
            channel, stub = _fresh_stub(server.port)
            try:
                a = stub.Activate(pb.ActivateRequest(task="Bulk", initial_goal="write", scope=scope), timeout=60)
                ids = []
                for j in range(5):
                    r = stub.Remember(
                        pb.RememberRequest(
                            session_id=a.session_id,
                            scope=scope,
                            content=f"Writer {i} claim {j} token {uuid.uuid4().hex[:10]}.",
                            type=res.MEMORY_TYPE_FACT,
                        ),
                        timeout=60,
                    )
                    ids.append(r.memory.memory_id)
                return ids
            finally:
                channel.close()

        with ThreadPoolExecutor(max_workers=8) as pool:
            written = [mid for ids in pool.map(write, range(16)) for mid in ids]
        assert len(set(written)) == 80
        assert len(_rpc_pids(server.lines)) == PROCESSES
        engine = raw_engine(url)
        try:
            with engine.connect() as conn:
                stored = conn.execute(
                    text("SELECT number FROM memories WHERE scope = :scope"), {"scope": scope}
                ).scalars()
                assert sorted(f"sch_{n}" for n in stored) == sorted(written)
        finally:
            engine.dispose()
    finally:
        server.stop()


def test_metrics_of_every_process_in_one_scrape(tmp_path):
    server = _start(tmp_path, SLOWAVE_METRICS_ADDR="127.0.0.1:0")
    try:
        metrics_port = int(
            wait_until(
                lambda: next(
                    (
                        line.split("metrics port ")[1].split(",")[0]
                        for line in server.lines
                        if "metrics port " in line and "slowave serving" in line
                    ),
                    None,
                ),
                timeout=30,
            )
        )
        scope = new_scope()
        for _ in range(24):
            channel, stub = _fresh_stub(server.port)
            stub.Activate(pb.ActivateRequest(task="Count me", initial_goal="count", scope=scope), timeout=30)
            channel.close()
        assert len(_rpc_pids(server.lines)) == PROCESSES
        handled = lambda: metric_value(
            metrics_port, "grpc_server_handled_total", grpc_method="Activate", grpc_code="OK"
        )
        assert wait_until(lambda: handled() == 24, timeout=30)
        # The gauge comes from the process doing the background work only, not a sum over processes.
        assert wait_until(lambda: metric_value(metrics_port, "slowave_open_sessions") == 24, timeout=60)
    finally:
        server.stop()


def test_a_process_that_dies_is_restarted_and_the_others_keep_serving(tmp_path):
    server = _start(tmp_path)
    try:
        before = wait_until(lambda: (c := _children(server.proc.pid)) and len(c) == PROCESSES and c, timeout=60)
        victim = min(before)
        os.kill(victim, signal.SIGKILL)
        after = wait_until(
            lambda: (c := _children(server.proc.pid)) and len(c) == PROCESSES and victim not in c and c, timeout=90
        )
        assert len(after & before) == PROCESSES - 1

        def served() -> bool:
            channel, stub = _fresh_stub(server.port)
            try:
                stub.Activate(
                    pb.ActivateRequest(task="Still there", initial_goal="check", scope=new_scope()), timeout=10
                )
                return True
            except grpc.RpcError as err:
                assert err.code() == grpc.StatusCode.UNAVAILABLE  # a connection to the dead one, before it is gone
                return False
            finally:
                channel.close()

        assert wait_until(lambda: all(served() for _ in range(8)), timeout=60)
    finally:
        server.stop()


def test_sigterm_drains_every_process(tmp_path):
    server = _start(tmp_path)
    children = wait_until(lambda: (c := _children(server.proc.pid)) and len(c) == PROCESSES and c, timeout=60)
    server.channel.close()
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(timeout=90) == 0
    assert not [pid for pid in children if _alive(pid)]
    stopped = [line for line in server.lines if line.startswith("{") and json.loads(line)["msg"] == "stopped"]
    assert len(stopped) == PROCESSES + 1  # each process, then the supervisor


def test_sigkill_of_the_supervisor_leaves_no_process_and_the_next_start_clears_its_metrics(tmp_path):
    """The server processes end with their supervisor. Its metrics directory (prometheus_client's
    multiprocess files) outlives it, as nothing ran to remove it: the next server's supervisor
    removes it, and keeps those of supervisors still running."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    env = {"SLOWAVE_METRICS_ADDR": "127.0.0.1:0", "TMPDIR": str(temp)}
    url = new_database_url(tmp_path)
    server = _start(tmp_path / "first", url, **env)
    children = wait_until(lambda: (c := _children(server.proc.pid)) and len(c) == PROCESSES and c, timeout=60)
    (orphaned,) = temp.glob(f"slowave-metrics-{server.proc.pid}-*")
    server.kill()
    wait_until(lambda: not [pid for pid in children if _alive(pid)], timeout=30, what="the server processes to end")
    assert orphaned.is_dir()
    running = temp / f"slowave-metrics-{os.getpid()}-running"  # this test's own process: alive
    running.mkdir()

    second = _start(tmp_path / "second", url, **env)
    try:
        assert not orphaned.exists()
        assert running.is_dir()
        assert len(list(temp.glob(f"slowave-metrics-{second.proc.pid}-*"))) == 1
    finally:
        second.stop()
    assert not list(temp.glob(f"slowave-metrics-{second.proc.pid}-*"))  # a stopped supervisor removes its own


def test_a_second_server_on_a_served_port_is_refused_and_the_first_keeps_its_connections(tmp_path):
    """SO_REUSEPORT lets every process of one server bind its port; it would let a second server
    bind it as well and take half the connections. The second start is refused (exit 2), whether
    it names the port as the first does or by the wildcard address, alone or with several processes."""
    first = _start(tmp_path / "first")
    try:
        scope = new_scope()
        a = first.stub.Activate(pb.ActivateRequest(task="Record ports", initial_goal="record", scope=scope), timeout=30)
        claim = f"The {uuid.uuid4().hex[:8]} worker listens on port 7100."
        first.stub.Remember(
            pb.RememberRequest(session_id=a.session_id, scope=scope, content=claim, type=res.MEMORY_TYPE_FACT),
            timeout=30,
        )
        for i, (host, processes) in enumerate((("127.0.0.1", "1"), ("0.0.0.0", str(PROCESSES)))):
            env = {
                **os.environ,
                "SLOWAVE_LISTEN_ADDR": f"{host}:{first.port}",
                "SLOWAVE_METRICS_ADDR": "",
                "SLOWAVE_DATABASE_URL": new_database_url(tmp_path / f"second-{i}"),
                "SLOWAVE_PROCESSES": processes,
            }
            second = subprocess.run(
                [server_executable()], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path
            )
            assert second.returncode == 2, second.stderr
            assert f"{host}:{first.port} is already served by another process" in second.stderr
        # Every new connection still reaches the first server (its store holds the claim).
        for _ in range(8):
            channel, stub = _fresh_stub(first.port)
            got = stub.Activate(pb.ActivateRequest(task=claim, initial_goal="find", scope=scope), timeout=30)
            assert claim in [m.content for m in got.memories]
            channel.close()
    finally:
        first.stop()


def test_of_two_servers_started_in_the_same_instant_on_one_port_one_serves_and_the_other_is_refused(tmp_path):
    """Both find the port free (nothing listens yet), so the connection probe alone would let both
    bind it; the port's claim (api.port_claim) lets exactly one start, whichever comes first."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    starts = []
    for i, (host, processes) in enumerate((("127.0.0.1", str(PROCESSES)), ("0.0.0.0", "1"))):
        env = {
            **os.environ,
            "SLOWAVE_LISTEN_ADDR": f"{host}:{port}",
            "SLOWAVE_METRICS_ADDR": "",
            "SLOWAVE_DATABASE_URL": new_database_url(tmp_path / f"server-{i}"),
            "SLOWAVE_PROCESSES": processes,
            "SLOWAVE_ALLOW_INSECURE_BIND": "1",  # the wildcard address, in a test
        }
        (tmp_path / f"server-{i}").mkdir(parents=True, exist_ok=True)
        proc = subprocess.Popen([server_executable()], env=env, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        lines: list[str] = []
        threading.Thread(target=lambda p=proc, out=lines: out.extend(iter(p.stderr.readline, "")), daemon=True).start()
        starts.append((proc, lines))
    try:
        refused = wait_until(
            lambda: [s for s in starts if s[0].poll() is not None], timeout=120, what="one start to be refused"
        )
        assert len(refused) == 1, [("".join(lines), proc.returncode) for proc, lines in refused]
        proc, lines = refused[0]
        assert proc.returncode == 2
        wait_until(lambda: any("already served by another process" in line for line in lines), timeout=30)
        (serving, serving_lines) = next(s for s in starts if s is not refused[0])
        wait_until(lambda: any("slowave serving" in line for line in serving_lines), timeout=120)
        assert serving.poll() is None
        channel, stub = _fresh_stub(port)
        scope = new_scope()
        got = stub.Activate(pb.ActivateRequest(task="Anything stored?", initial_goal="look", scope=scope), timeout=30)
        assert got.memory_state == res.MEMORY_STATE_COLD_START
        channel.close()
    finally:
        for proc, _ in starts:
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _ in starts:
            try:
                proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=30)
