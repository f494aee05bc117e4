"""Test helpers: a real server on a free loopback port, stubs, status details, database counts."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from slowave.api.app import RunningServer, start_server
from slowave.config import RetrievalLimits, Settings
from slowave.service.consolidation import consolidate_pending
from slowave.v1 import errors_pb2
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from slowave.v1 import resources_pb2 as res

REPO = Path(__file__).resolve().parents[1]


def claim(text: str) -> str:
    """A claim whose every word is unique to it: a random suffix on each word (punctuation is
    dropped, since it would split a word from its suffix and leave a shared bare word)."""
    h = uuid.uuid4().hex[:8]
    return " ".join(f"{w}{h}" for w in re.findall(r"[^\W_]+", text))


def buf_generate(out: Path) -> None:
    """The stubs of the other languages (buf.gen.yaml: Go under out/go/src, TypeScript under
    out/ts/gen, with google/rpc's Status and error details for TypeScript), generated afresh."""
    ts_modules = REPO / "clients" / "ts" / "node_modules"
    assert (ts_modules / ".bin" / "protoc-gen-es").exists(), (
        "clients/ts/node_modules lacks protoc-gen-es: run `npm ci --prefix clients/ts` (`make test` does it)"
    )
    buf = ["npx", "--no-install", "buf", "generate"]
    subprocess.run([*buf, "-o", str(out)], cwd=REPO, check=True, capture_output=True)
    googleapis = "clients/ts/node_modules/google-proto-files"
    paths = [f"--path={googleapis}/google/rpc/{name}.proto" for name in ("status", "error_details")]
    template = "--template=clients/ts/buf.gen.googleapis.yaml"
    subprocess.run([*buf, googleapis, *paths, template, "-o", str(out)], cwd=REPO, check=True, capture_output=True)


def new_scope(prefix: str = "project") -> str:
    return f"{prefix}:t-{uuid.uuid4().hex[:12]}"


@dataclass
class Server:
    """A running server plus a stub connected to it."""

    running: RunningServer
    database_url: str
    channel: grpc.Channel = field(init=False)
    stub: pb_grpc.MemoryServiceStub = field(init=False)

    def __post_init__(self) -> None:
        self.channel = grpc.insecure_channel(f"127.0.0.1:{self.running.port}")
        self.stub = pb_grpc.MemoryServiceStub(self.channel)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.running.port}"

    def counts(self) -> dict[str, int]:
        """Row counts of every table: a rejected request must leave them unchanged."""
        with self.running.ctx.db.transaction() as uow:
            return uow.table_counts()

    def snapshot(self) -> dict[str, Any]:
        """Row counts plus the ledger and every session row: evidence that nothing was written.

        Queued background consolidation is drained first, so only the request under test can
        change the picture between two snapshots.
        """
        self.consolidate()
        with self.running.ctx.db.transaction() as uow:
            return {
                "counts": uow.table_counts(),
                "ledger": [tuple(r) for r in uow.ledger.rows()],
                "sessions": [tuple(r) for r in uow.sessions.list(None, None, 10_000)],
            }

    def consolidate(self) -> int:
        """Drains the consolidation queue, including an entry the background worker holds (on
        PostgreSQL it is skipped, not waited for, by a second consumer)."""
        done = consolidate_pending(self.running.ctx)
        wait_until(lambda: self._pending_consolidations() == 0, timeout=60, what="consolidation queue to drain")
        return done

    def _pending_consolidations(self) -> int:
        from sqlalchemy import func, select

        from slowave.storage.tables import consolidation_queue as q

        with self.running.ctx.db.engine.connect() as conn:
            return conn.execute(select(func.count()).select_from(q).where(q.c.done_at.is_(None))).scalar_one()

    def admin(self, *args: str) -> str:
        return run_admin(self.database_url, *args)

    def stop(self) -> None:
        self.channel.close()
        self.running.stop(grace=5)


def run_admin(database_url: str, *args: str) -> str:
    """`slowave-admin ARGS` on the database; its standard output (a non-zero exit fails)."""
    env = {**os.environ, "SLOWAVE_DATABASE_URL": database_url}
    out = subprocess.run(
        [sys.executable, "-m", "slowave.admin", *args], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    return out.stdout


_database_factory: Callable[[Path], str] = lambda tmp_path: f"sqlite:///{tmp_path / 'slowave.db'}"


def use_database_factory(factory: Callable[[Path], str]) -> None:
    """Where test servers keep their data: a SQLite file (default) or a fresh PostgreSQL database."""
    global _database_factory
    _database_factory = factory


def new_database_url(tmp_path: Path) -> str:
    return _database_factory(tmp_path)


def start_test_server(tmp_path: Path, **overrides: Any) -> Server:
    """A server on a free port with its own database. Lexical retrieval unless the test asks for a
    semantic channel (`semantic="static"`, the `make serve` default): the contract tests build
    claims and cues from words with random hex suffixes so that only the words they share match,
    and to the static embedding model such strings all look alike (cosines 0.3-0.8), so meaning
    would admit them. The retrieval tests run the defaults (test_semantic.py,
    test_retrieval_terms.py)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    overrides.setdefault("semantic", "off")
    url = overrides.pop("database_url", None) or new_database_url(tmp_path)
    settings = Settings(
        listen_addr="127.0.0.1:0",
        database_url=url,
        metrics_addr="127.0.0.1:0",
        consolidation_poll_seconds=0.2,
        gauge_refresh_seconds=0.2,
        **overrides,
    )
    return Server(start_server(settings), url)


# ---------------------------------------------------------------------------------------- errors


@dataclass
class ErrorDetails:
    code: grpc.StatusCode
    message: str
    reason: str | None = None
    domain: str | None = None
    metadata: dict[str, str] = field(default_factory=dict)
    violations: list[tuple[str, str]] = field(default_factory=list)  # (field, description)
    outstanding: list[errors_pb2.OutstandingRetrieval] = field(default_factory=list)
    has_error_info: bool = False

    @property
    def paths(self) -> list[str]:
        return [f for f, _ in self.violations]


def details_of(err: grpc.RpcError) -> ErrorDetails:
    d = ErrorDetails(err.code(), err.details())
    status = rpc_status.from_call(err)
    if status is None:
        return d
    for any_ in status.details:
        if any_.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_.Unpack(info)
            d.reason, d.domain, d.metadata, d.has_error_info = info.reason, info.domain, dict(info.metadata), True
        elif any_.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            any_.Unpack(bad)
            d.violations = [(v.field, v.description) for v in bad.field_violations]
        elif any_.Is(errors_pb2.IncompleteFeedback.DESCRIPTOR):
            inc = errors_pb2.IncompleteFeedback()
            any_.Unpack(inc)
            d.outstanding = list(inc.outstanding)
    return d


def check_error(
    err: ErrorDetails, status: grpc.StatusCode, reason: str, code: str, retryable: bool, paths: list[str] | None = None
) -> None:
    """Behaviour §4.2: status, one ErrorInfo (domain, reason, metadata code/retryable), BadRequest iff paths."""
    assert err.code == status, (err.code, err.message, err.violations)
    assert err.has_error_info, "the status carries no google.rpc.ErrorInfo"
    assert err.domain == "slowave.ai"
    assert err.reason == reason, (err.reason, err.message)
    assert err.metadata == {"code": code, "retryable": "true" if retryable else "false"}
    if paths is None:
        assert err.violations == [], f"unexpected BadRequest: {err.violations}"
    else:
        assert sorted(err.paths) == sorted(paths), err.violations


def expect_error(call: Callable[[], Any]) -> ErrorDetails:
    try:
        call()
    except grpc.RpcError as err:
        return details_of(err)
    raise AssertionError("the call succeeded but an error was expected")


# ---------------------------------------------------------------------------------------- requests


def activate(
    stub: pb_grpc.MemoryServiceStub, scope: str, task: str = "Investigate the build", **kw: Any
) -> pb.ActivateResponse:
    kw.setdefault("initial_goal", "Investigate")
    return stub.Activate(pb.ActivateRequest(task=task, scope=scope, **kw), timeout=30)


def remember(
    stub: pb_grpc.MemoryServiceStub, session_id: str, scope: str, content: str, type_: int = res.MEMORY_TYPE_FACT
) -> pb.RememberResult:
    return stub.Remember(
        pb.RememberRequest(session_id=session_id, scope=scope, content=content, type=type_), timeout=30
    ).memory


def seed_memories(
    stub: pb_grpc.MemoryServiceStub, scope: str, contents: list[str], type_: int = res.MEMORY_TYPE_FACT
) -> list[str]:
    """Stores claims through a throwaway session (closed afterwards); returns their ids."""
    a = activate(stub, scope, task="seeding memories", initial_goal="seed")
    ids = [remember(stub, a.session_id, scope, c, type_).memory_id for c in contents]
    assess_all(stub, a)
    commit(stub, a.session_id)
    return ids


def remember_alone(stub: pb_grpc.MemoryServiceStub, scope: str, content: str) -> str:
    """Remembers one claim in a session of its own (no session context, a one-claim occasion), left
    open: a commit would consolidate a lesson into the scope in the background, moving the term
    statistics while a test reads relevance. Returns the memory id."""
    a = activate(stub, scope, task="taking notes", initial_goal="notes")
    return remember(stub, a.session_id, scope, content).memory_id


def relevance_by_content(stub: pb_grpc.MemoryServiceStub, scope: str, question: str) -> dict[str, float]:
    """The first page (10) of an Activate for `question`: content -> relevance, in ranked order."""
    return {m.content: m.ranking.relevance for m in activate(stub, scope, task=question, page_size=10).memories}


def used(memory_id: str, **kw: Any) -> pb.MemoryFeedbackEntry:
    return pb.MemoryFeedbackEntry(memory_id=memory_id, assessment=pb.MEMORY_ASSESSMENT_USED, **kw)


def assess_all(stub: pb_grpc.MemoryServiceStub, response: Any) -> None:
    """Covers everything a retrieval response exposed (complete coverage, all implicit)."""
    stub.Feedback(pb.FeedbackRequest(retrieval_id=response.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=30)


def commit_request(session_id: str, **kw: Any) -> pb.CommitRequest:
    kw.setdefault("final_goal", "Finish the task")
    kw.setdefault("outcome", res.OUTCOME_SUCCESS)
    kw.setdefault("outcome_summary", f"Task {uuid.uuid4().hex[:8]} finished.")
    kw.setdefault("verification", pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary="Tests passed."))
    return pb.CommitRequest(session_id=session_id, **kw)


def commit(stub: pb_grpc.MemoryServiceStub, session_id: str, **kw: Any) -> pb.CommitResponse:
    return stub.Commit(commit_request(session_id, **kw), timeout=30)


def wait_until(
    predicate: Callable[[], Any], timeout: float = 60.0, interval: float = 0.1, what: str = "condition"
) -> Any:
    """Polls with a generous deadline (never a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


# ---------------------------------------------------------------------------------------- robustness
# Helpers of the fuzz, crash-safety and overload tests (tests/integration/test_fuzz.py,
# test_crash_safety.py, test_overload.py).


def health_status(channel: grpc.Channel, timeout: float = 30) -> int:
    """The server's overall health (grpc.health.v1), e.g. HealthCheckResponse.SERVING."""
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    return health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(service=""), timeout=timeout).status


def assert_serving(channel: grpc.Channel) -> None:
    from grpc_health.v1 import health_pb2

    assert health_status(channel) == health_pb2.HealthCheckResponse.SERVING


def raw_engine(database_url: str):
    """A plain engine on the test database, outside the service (no pool, no BEGIN IMMEDIATE)."""
    from sqlalchemy import create_engine
    from sqlalchemy.pool import NullPool

    return create_engine(database_url, poolclass=NullPool)


@contextlib.contextmanager
def hold_write_lock(database_url: str, session_id: str):
    """Makes the server's writes wait, deterministically, until the block exits.

    SQLite: the test takes the database write lock (every unit of work of the service begins
    IMMEDIATE, so each waits for it, up to its 30 s busy timeout). PostgreSQL: the test locks the
    named session's row, which Remember, Feedback (its activity touch) and Commit of that session
    lock or update; other requests are not held.
    """
    if database_url.startswith("sqlite"):
        import sqlite3

        conn = sqlite3.connect(database_url.split("///", 1)[-1], isolation_level=None, timeout=30)
        try:
            conn.execute("BEGIN IMMEDIATE")
            yield
        finally:
            conn.execute("ROLLBACK")
            conn.close()
        return
    from sqlalchemy import text

    engine = raw_engine(database_url)
    try:
        with engine.connect() as conn:
            trans = conn.begin()
            locked = conn.execute(text("SELECT id FROM sessions WHERE id = :id FOR UPDATE"), {"id": session_id}).all()
            assert locked, f"session {session_id} not found"
            try:
                yield
            finally:
                trans.rollback()
    finally:
        engine.dispose()


def metric_value(metrics_port: int, name: str, **labels: str) -> float:
    """Sum of the samples of one Prometheus metric on /metrics whose labels include `labels`."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    body = urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30).read().decode()
    total = 0.0
    for family in text_string_to_metric_families(body):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                total += sample.value
    return total


def server_executable() -> str:
    beside = Path(sys.executable).with_name("slowave-server")
    if beside.exists():
        return str(beside)
    import shutil

    found = shutil.which("slowave-server")
    assert found, "the slowave-server entry point is not installed"
    return found


@dataclass
class ServerProcess:
    """The installed `slowave-server` entry point as a child process, with a stub connected to it."""

    proc: subprocess.Popen
    lines: list[str]
    port: int
    channel: grpc.Channel
    stub: pb_grpc.MemoryServiceStub

    def kill(self) -> None:
        """SIGKILL: no drain, no cleanup, as a crash or an OOM kill would end it."""
        self.channel.close()
        self.proc.kill()
        self.proc.wait(timeout=60)

    def stop(self) -> None:
        self.channel.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=30)


def start_server_process(cwd: Path, database_url: str, **env: str) -> ServerProcess:
    """Starts `slowave-server` on `database_url` (extra SLOWAVE_* variables in `env`) and waits until
    it serves; its log is kept in `lines`."""
    import re
    import threading

    full_env = {
        **os.environ,
        "SLOWAVE_LISTEN_ADDR": "127.0.0.1:0",
        "SLOWAVE_METRICS_ADDR": "",
        "SLOWAVE_DATABASE_URL": database_url,
        **env,
    }
    cwd.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([server_executable()], env=full_env, stderr=subprocess.PIPE, text=True, cwd=cwd)
    lines: list[str] = []
    # Keep draining its log, or a full pipe would block the server.
    threading.Thread(target=lambda: lines.extend(iter(proc.stderr.readline, "")), daemon=True).start()

    def ready() -> Any:
        if proc.poll() is not None:
            raise AssertionError("slowave-server exited during start:\n" + "".join(lines))
        return next((m for line in list(lines) if (m := re.search(r"slowave serving \S+ on port (\d+)", line))), None)

    match = wait_until(ready, timeout=120, what="slowave-server to start")
    port = int(match.group(1))
    channel = grpc.insecure_channel(f"127.0.0.1:{port}")
    return ServerProcess(proc, lines, port, channel, pb_grpc.MemoryServiceStub(channel))


__all__ = ["RetrievalLimits", "pb", "res"]


# ---------------------------------------------------------------------------------------- API keys


def start_keyed_server(tmp_path: Path, keys: dict[str, str], **overrides: Any) -> Server:
    """A server that requires API keys: `keys` maps each plaintext key to its tenant (configured as
    hashes, as an operator would)."""
    from slowave.domain.api_keys import KeyEntry, hash_key

    entries = tuple(KeyEntry(tenant, hash_key(key)) for key, tenant in keys.items())
    return start_test_server(tmp_path, api_keys=entries, **overrides)


class _WithMetadata(grpc.UnaryUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    def __init__(self, metadata: list[tuple[str, str]]) -> None:
        self.metadata = metadata

    def _details(self, details: grpc.ClientCallDetails) -> grpc.ClientCallDetails:
        class Details(grpc.ClientCallDetails):
            pass

        d = Details()
        d.method, d.timeout, d.credentials = details.method, details.timeout, details.credentials
        d.wait_for_ready, d.compression = details.wait_for_ready, details.compression
        d.metadata = list(details.metadata or []) + self.metadata
        return d

    def intercept_unary_unary(self, continuation, client_call_details, request):
        return continuation(self._details(client_call_details), request)

    def intercept_stream_stream(self, continuation, client_call_details, request_iterator):
        return continuation(self._details(client_call_details), request_iterator)


def channel_with_metadata(channel: grpc.Channel, metadata: list[tuple[str, str]]) -> grpc.Channel:
    """`channel`, sending `metadata` (e.g. [("authorization", "Bearer …")]) with every call."""
    return grpc.intercept_channel(channel, _WithMetadata(metadata))


def keyed_stub(channel: grpc.Channel, key: str) -> pb_grpc.MemoryServiceStub:
    """A MemoryService stub whose calls carry `authorization: Bearer <key>`."""
    return pb_grpc.MemoryServiceStub(channel_with_metadata(channel, [("authorization", f"Bearer {key}")]))
