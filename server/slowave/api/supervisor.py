"""Several server processes on one port and one store (`SLOWAVE_PROCESSES`).

One CPython process serves RPCs on one core at a time (the GIL), so the supervisor starts one
server process per core. All of them bind the same address with SO_REUSEPORT, which grpc sets on
Linux: the kernel spreads incoming connections over them. They share the store as replicas do
(PostgreSQL) or through the writer lock of `storage.writer_lock` (SQLite); their in-process caches
are validated against the database before use, as for replicas (docs/operations.md).

The supervisor itself serves no RPC. It migrates the schema and checks the configuration once,
starts the processes, serves the aggregated Prometheus metrics (prometheus_client's multiprocess
mode: each process writes its samples to files in one directory; one scrape reads them all),
restarts a process that dies, and on SIGTERM drains them all. Process 0 alone runs the store's
background work (reaper, consolidation, WAL checkpoints, gauges), so it runs once per store.
A process that cannot start (a refused configuration) stops the whole server with its exit code.
"""

from __future__ import annotations

import ctypes
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from slowave.config import Settings

log = logging.getLogger("slowave")

# Set by the supervisor in each server process's environment.
PROCESS_INDEX_ENV = "SLOWAVE_PROCESS_INDEX"
READY_FD_ENV = "SLOWAVE_READY_FD"
PARENT_ENV = "SLOWAVE_SUPERVISOR_PID"
METRICS_DIR_ENV = "PROMETHEUS_MULTIPROC_DIR"  # prometheus_client's own variable
METRICS_DIR_PREFIX = "slowave-metrics-"  # then the supervisor's pid, "-" and a random part

_PR_SET_PDEATHSIG = 1
_START_TIMEOUT = 120.0
_RESTART_BACKOFF = (1.0, 30.0)  # first and longest wait before restarting a process that died


def die_with_supervisor() -> None:
    """In a server process: ends with the supervisor, even when it is SIGKILLed (Linux), so a crash
    of the whole server never leaves processes holding the port and the store."""
    parent = int(os.environ.get(PARENT_ENV, "0"))
    if sys.platform.startswith("linux"):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
    if parent and os.getppid() != parent:  # it died before prctl took effect
        os._exit(1)
    if not sys.platform.startswith("linux") and parent:

        def watch() -> None:
            while os.getppid() == parent:
                time.sleep(1.0)
            os._exit(1)

        threading.Thread(target=watch, name="slowave-supervisor-watch", daemon=True).start()


def signal_ready(port: int, policy: str) -> None:
    """In a server process: tells the supervisor it serves, and under which retrieval policy."""
    fd = os.environ.get(READY_FD_ENV)
    if fd:
        os.write(int(fd), f"{port} {policy}\n".encode())
        os.close(int(fd))


@dataclass
class _Child:
    index: int
    proc: subprocess.Popen | None = None
    restarts: int = 0
    next_start: float = 0.0
    started_at: float = field(default_factory=time.monotonic)


class Supervisor:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.children = [_Child(i) for i in range(settings.processes)]
        self.port = 0
        self.metrics_port: int | None = None
        self.policy = ""  # retrieval_policy_version, as the processes report it
        self._metrics_dir: str | None = None
        self._metrics_http: object | None = None
        self._stopping = threading.Event()

    # ------------------------------------------------------------------------------ start
    def start(self) -> None:
        host, port = split_addr(self.settings.listen_addr)
        # Port 0: one free port for all, held (bound, not listening) until every process has bound it.
        reserved = _reserve_port(host, port) if port == 0 else None
        self.port = reserved.getsockname()[1] if reserved is not None else port
        try:
            if self.settings.metrics_addr:
                self._serve_metrics()
            pending = [self._spawn(c) for c in self.children]
            self._await_ready(pending)
        except BaseException:
            self.stop()
            raise
        finally:
            if reserved is not None:
                reserved.close()

    def _serve_metrics(self) -> None:
        from prometheus_client import CollectorRegistry, start_http_server
        from prometheus_client.multiprocess import MultiProcessCollector

        remove_orphaned_metrics_dirs(Path(tempfile.gettempdir()))
        # The supervisor's pid in the name: a later start can tell the directory of one that is gone.
        self._metrics_dir = tempfile.mkdtemp(prefix=f"{METRICS_DIR_PREFIX}{os.getpid()}-")
        registry = CollectorRegistry()
        MultiProcessCollector(registry, path=self._metrics_dir)
        host, port = split_addr(self.settings.metrics_addr)
        server, _thread = start_http_server(port, addr=host or "0.0.0.0", registry=registry)
        self._metrics_http = server
        self.metrics_port = server.server_port

    def _spawn(self, child: _Child) -> tuple[_Child, int]:
        read_fd, write_fd = os.pipe()
        host, _ = split_addr(self.settings.listen_addr)
        env = {
            **os.environ,
            PROCESS_INDEX_ENV: str(child.index),
            READY_FD_ENV: str(write_fd),
            PARENT_ENV: str(os.getpid()),
            "SLOWAVE_LISTEN_ADDR": _join_addr(host, self.port),
            "SLOWAVE_METRICS_ADDR": "",  # the supervisor serves them, aggregated
        }
        env.pop(METRICS_DIR_ENV, None)
        if self._metrics_dir is not None:
            env[METRICS_DIR_ENV] = self._metrics_dir
        child.proc = subprocess.Popen(
            [sys.executable, "-m", "slowave.api.app"], env=env, pass_fds=(write_fd,), close_fds=True
        )
        child.started_at = time.monotonic()
        os.close(write_fd)
        return child, read_fd

    def _await_ready(self, pending: list[tuple[_Child, int]]) -> None:
        deadline = time.monotonic() + _START_TIMEOUT
        waiting = {fd: child for child, fd in pending}
        try:
            while waiting:
                ready, _, _ = select.select(list(waiting), [], [], max(0.0, deadline - time.monotonic()))
                if not ready:
                    raise RuntimeError(f"server processes {sorted(c.index for c in waiting.values())} did not start")
                for fd in ready:
                    child = waiting.pop(fd)
                    report = _read_line(fd)
                    if not report:  # closed without a word: the process ended while starting
                        assert child.proc is not None
                        raise StartFailed(child.proc.wait())
                    self.policy = report.partition(" ")[2]
                    os.close(fd)
        finally:
            for fd in waiting:
                os.close(fd)

    # ------------------------------------------------------------------------------ supervise
    def run(self) -> None:
        """Until SIGTERM/SIGINT: restarts processes that die, with a growing pause between tries."""
        while not self._stopping.wait(0.2):
            for child in self.children:
                proc = child.proc
                if proc is not None and proc.poll() is not None:
                    self._died(child, proc)
                if child.proc is None and time.monotonic() >= child.next_start:
                    self._restart(child)

    def _died(self, child: _Child, proc: subprocess.Popen) -> None:
        log.error("server process %d (pid %d) exited with %s; restarting it", child.index, proc.pid, proc.returncode)
        self._forget_metrics(proc.pid)
        child.proc = None
        lived = time.monotonic() - child.started_at
        child.restarts = 0 if lived > 60 else child.restarts + 1
        first, longest = _RESTART_BACKOFF
        child.next_start = time.monotonic() + min(longest, first * 2 ** max(0, child.restarts - 1))

    def _restart(self, child: _Child) -> None:
        try:
            self._await_ready([self._spawn(child)])
        except (StartFailed, RuntimeError) as exc:
            log.error("server process %d did not restart: %s", child.index, exc)
            if child.proc is not None and child.proc.poll() is None:
                child.proc.kill()
                child.proc.wait()
            if child.proc is not None:
                self._forget_metrics(child.proc.pid)
            child.proc = None
            child.restarts += 1
            child.next_start = time.monotonic() + _RESTART_BACKOFF[1]

    def _forget_metrics(self, pid: int) -> None:
        if self._metrics_dir is not None:
            from prometheus_client import multiprocess

            multiprocess.mark_process_dead(pid, self._metrics_dir)

    # ------------------------------------------------------------------------------ stop
    def request_stop(self) -> None:
        self._stopping.set()

    def stop(self) -> None:
        """Drains every process (each: health NOT_SERVING, new calls UNAVAILABLE, in-flight calls
        finish within the grace), then stops the metrics endpoint."""
        self._stopping.set()
        procs = [c.proc for c in self.children if c.proc is not None and c.proc.poll() is None]
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + self.settings.shutdown_grace_seconds + 15
        for proc in procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                log.error("server process pid %d did not drain in time; killing it", proc.pid)
                proc.kill()
                proc.wait()
        if self._metrics_http is not None:
            self._metrics_http.shutdown()  # type: ignore[attr-defined]
        if self._metrics_dir is not None:
            shutil.rmtree(self._metrics_dir, ignore_errors=True)


def remove_orphaned_metrics_dirs(parent: Path) -> list[Path]:
    """Removes the metrics directories of supervisors that are gone without stopping (SIGKILL, a
    crash, the machine's power): `stop` removes a supervisor's own, and nothing else would, so
    they would pile up in the temporary directory, one per such end. A directory whose supervisor
    still runs — or whose pid another process has taken since — is left alone."""
    removed = []
    for path in parent.glob(f"{METRICS_DIR_PREFIX}*-*"):
        pid = path.name[len(METRICS_DIR_PREFIX) :].partition("-")[0]
        if not pid.isdigit() or _process_exists(int(pid)):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


class StartFailed(Exception):
    def __init__(self, code: int) -> None:
        super().__init__(f"a server process exited with {code} while starting")
        self.code = code


def _read_line(fd: int) -> str:
    data = b""
    while not data.endswith(b"\n"):
        chunk = os.read(fd, 4096)
        if not chunk:
            break
        data += chunk
    return data.decode().strip()


def split_addr(addr: str) -> tuple[str, int]:
    host, _, port = addr.rpartition(":")
    return host.strip("[]"), int(port)


def _join_addr(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def already_served(addr: str, timeout: float = 1.0) -> bool:
    """Whether something accepts connections on `addr` (host:port; never for port 0).

    grpc binds with SO_REUSEPORT on Linux, as the processes of one server must: so a second server
    started on the port of a running one would bind it too, without an error, and the kernel would
    split connections between two servers that know nothing of each other (two stores, or two
    reapers and consolidators on one). A wildcard address is asked on loopback."""
    host, port = split_addr(addr)
    if port == 0:
        return False
    if host in ("", "0.0.0.0"):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:  # refused (nothing listens), unreachable, or no answer in time
        return False


def _reserve_port(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((host or "0.0.0.0", port))
    return sock
