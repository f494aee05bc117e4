"""The Python SDK (slowave_client) against real servers: cycles, typed errors, retries, deadlines,
API keys and TLS. Stand-in servers are used only where the real one cannot be made to misbehave
on demand (a hanging handler, a scripted UNAVAILABLE) or to show what a client sent."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_status import rpc_status

from slowave.api.app import start_server
from slowave.config import Settings
from slowave.v1 import memory_service_pb2 as pb
from slowave_client import (
    NO_RETRIES,
    AsyncClient,
    Client,
    DeadlineExceeded,
    FailedPrecondition,
    IncompleteFeedbackError,
    InvalidArgument,
    InvalidRequest,
    NotFound,
    ResourceExhausted,
    RetryEvent,
    RetryPolicy,
    TlsConfig,
    Unauthenticated,
    Unavailable,
)
from tests.support import Server, new_database_url, new_scope, start_test_server, wait_until

pytestmark = pytest.mark.backend_neutral

VERIFIED = {"status": "verified", "summary": "The tests passed."}
# Fast reconnects: after a refused connection gRPC otherwise waits a second or more before the
# channel tries again, which only slows these tests down.
FAST_RECONNECT = [("grpc.initial_reconnect_backoff_ms", 100), ("grpc.max_reconnect_backoff_ms", 500)]
PATIENT = RetryPolicy(max_attempts=200, initial_backoff=0.05, max_backoff=0.5)


def summary() -> str:
    return f"Task {uuid.uuid4().hex[:8]} finished."


# ---------------------------------------------------------------------------------- full cycles


def test_full_cycle_with_the_blocking_client(server: Server, scope: str):
    claim = f"The staging deploy of {scope} listens on port 8443."
    with Client(server.address) as memory:
        assert memory.health() == "serving"
        assert memory.health("slowave.v1.MemoryService") == "serving"
        assert memory.health("no.such.Service") == "service_unknown"

        first = memory.activate(
            "Find out why staging deploys time out",
            "Diagnose staging timeouts",
            scope,
            task_context={"env": "staging", "retries": 3},
        )
        assert first.session_id.startswith("sess_") and first.retrieval_id.startswith("ctx_")
        assert first.memory_state == "cold_start" and first.memories == ()
        stored = memory.remember(
            first.session_id, scope, claim, "fact", occurred_at=datetime.datetime.now(datetime.UTC)
        )
        assert (stored.disposition, stored.type, stored.scope) == ("created", "fact", scope)
        again = memory.remember(first.session_id, scope, claim.upper(), "fact")
        assert again.disposition == "matched" and again.memory_id == stored.memory_id
        batch = memory.remember_batch(
            first.session_id,
            scope,
            [(f"Decision for {scope}: use blue-green.", "decision"), {"content": "  ", "type": "fact"}],
        )
        assert [item.ok for item in batch] == [True, False]
        assert batch[0].data.type == "decision" and batch[1].error.code == "invalid_input"
        done = memory.commit(first.session_id, "Diagnose staging timeouts", "success", summary(), VERIFIED)
        assert (done.committed, done.operation, done.feedback_status) == (True, "closed", "complete")

        second = memory.activate(f"Configure the health check. {claim}", "Configure the health check", scope)
        exposed = [m.memory_id for m in second.memories]
        assert stored.memory_id in exposed and second.memory_state == "available"
        hit = next(m for m in second.memories if m.memory_id == stored.memory_id)
        assert hit.content == claim and hit.type == "fact" and 0 < hit.ranking.relevance <= 1

        with pytest.raises(IncompleteFeedbackError) as refused:
            memory.commit(second.session_id, "Configure the health check", "success", summary(), VERIFIED)
        assert refused.value.code == "incomplete_feedback" and refused.value.retryable
        assert [(o.retrieval_id, list(o.memory_ids)) for o in refused.value.outstanding] == [
            (second.retrieval_id, exposed)
        ]

        record = memory.feedback(
            second.retrieval_id, {stored.memory_id: "used"}, coverage="complete", missing=["the staging probe interval"]
        )
        assert record.coverage == "complete" and record.rejected == ()
        assert record.applied.strengthened == (stored.memory_id,)
        assert record.outstanding.memory_ids == () and record.missing == ("the staging probe interval",)
        closed = memory.commit(
            second.session_id,
            "Configure the health check",
            "success",
            summary(),
            VERIFIED,
            procedure={"summary": "Probe port 8443", "steps": ["curl :8443/health"], "context": {"env": "staging"}},
            trajectory=[{"kind": "action", "summary": "Pointed the probe at 8443", "status": "succeeded"}],
        )
        assert closed.operation == "closed" and closed.procedure_id == f"proc_{second.session_id}"


def test_recall_pages_through_a_catalog(server: Server, scope: str):
    words = f"pagination-{uuid.uuid4().hex[:6]}"
    with Client(server.address) as memory:
        seed = memory.activate("seed", "seed", scope)
        results = memory.remember_batch(
            seed.session_id, scope, [(f"Fact {i} about {words} in the build system.", "fact") for i in range(4)]
        )
        assert all(r.ok for r in results)
        memory.commit(seed.session_id, "seed", "success", summary(), VERIFIED)

        task = memory.activate("Look up the build", "Look up", scope)
        first = memory.recall(task.session_id, scope, f"{words} build system", page_size=1, evidence_mode="full")
        assert first.retrieval_id.startswith("rec_") and len(first.memories) == 1 and first.more_available
        assert first.evidence_mode == "full" and first.continue_from
        second = memory.recall(task.session_id, scope, continue_from=first.continue_from)
        assert second.retrieval_id == first.retrieval_id
        assert second.memories and second.memories[0].memory_id != first.memories[0].memory_id
        memory.feedback_batch(
            [
                {"retrieval_id": task.retrieval_id, "coverage": "complete"},
                {"retrieval_id": first.retrieval_id, "coverage": "complete"},
            ]
        )
        assert memory.commit(task.session_id, "Look up", "partial", summary(), VERIFIED).outcome == "partial"


def test_full_cycle_with_the_asyncio_client(server: Server, scope: str):
    claim = f"The nightly job of {scope} runs at 02:00 UTC."

    async def cycle() -> None:
        async with AsyncClient(server.address) as memory:
            assert await memory.health() == "serving"
            first = await memory.activate("Schedule the nightly job", "Schedule it", scope)
            stored = await memory.remember(first.session_id, scope, claim, "fact")
            batch = await memory.remember_batch(
                first.session_id, scope, [("Retries are capped at three.", "constraint")]
            )
            assert batch[0].ok and batch[0].data.type == "constraint"
            await memory.commit(first.session_id, "Schedule it", "success", summary(), VERIFIED)

            second = await memory.activate(f"Move the nightly job. {claim}", "Move it", scope)
            assert stored.memory_id in [m.memory_id for m in second.memories]
            fresh = await memory.recall(second.session_id, scope, claim)
            assert stored.memory_id in [m.memory_id for m in fresh.memories]
            with pytest.raises(IncompleteFeedbackError) as refused:
                await memory.commit(second.session_id, "Move it", "success", summary(), VERIFIED)
            assert {o.retrieval_id for o in refused.value.outstanding} == {second.retrieval_id, fresh.retrieval_id}
            results = await memory.feedback_batch(
                [
                    {
                        "retrieval_id": second.retrieval_id,
                        "memory_feedback": {stored.memory_id: "used"},
                        "coverage": "complete",
                    },
                    {"retrieval_id": fresh.retrieval_id, "coverage": "complete"},
                ]
            )
            assert [r.ok for r in results] == [True, True]
            await memory.feedback(fresh.retrieval_id, retrieval_quality="good enough")
            done = await memory.commit(second.session_id, "Move it", "success", summary(), VERIFIED)
            assert done.operation == "closed"
            update = await memory.commit(second.session_id, "Move it", "failure", summary(), VERIFIED)
            assert (update.operation, update.already_ended, update.outcome) == ("updated", True, "failure")

    asyncio.run(cycle())


# ---------------------------------------------------------------------------------- typed errors


def test_invalid_remember_raises_field_violations_and_stores_nothing(server: Server, scope: str):
    with Client(server.address) as memory:
        task = memory.activate("Remember badly", "Test validation", scope)
        before = server.snapshot()
        with pytest.raises(InvalidArgument) as bad:
            memory.remember(task.session_id, scope, "   ", "unspecified")
        assert type(bad.value) is InvalidArgument, "the server found it, not the SDK"
        assert bad.value.status == grpc.StatusCode.INVALID_ARGUMENT and bad.value.reason == "INVALID_INPUT"
        assert bad.value.code == "invalid_input" and not bad.value.retryable
        assert sorted(v.field for v in bad.value.field_violations) == ["content", "type"]
        assert all(v.description for v in bad.value.field_violations)
        with pytest.raises(InvalidArgument) as trajectory:
            memory.commit(
                task.session_id,
                "g",
                "success",
                summary(),
                VERIFIED,
                trajectory=[{"kind": "action", "summary": "ok"}, {"kind": "action", "summary": " "}],
            )
        assert [v.field for v in trajectory.value.field_violations] == ["trajectory[1].summary"]
        assert server.snapshot() == before
        with pytest.raises(InvalidRequest):  # caught by the SDK: nothing is sent
            memory.remember(task.session_id, scope, "x", "rumour")
        with pytest.raises(ResourceExhausted) as oversized:  # refused by gRPC itself (behaviour §4.1)
            memory.remember(task.session_id, scope, "x" * (9 * 1024 * 1024), "fact")
        assert (oversized.value.code, oversized.value.retryable, oversized.value.reason) == (
            "invalid_input",
            False,
            None,
        )


def test_lookup_and_state_errors_have_their_classes(server: Server, scope: str):
    with Client(server.address) as memory:
        with pytest.raises(NotFound) as session:
            memory.recall("sess_abc123", scope, "anything")
        assert (session.value.reason, session.value.code) == ("SESSION_NOT_FOUND", "invalid_input")
        with pytest.raises(NotFound) as retrieval:
            memory.feedback("ctx_000000000000", coverage="complete")
        assert (retrieval.value.reason, retrieval.value.code) == ("NOT_FOUND", "not_found")

        task = memory.activate("Check scopes", "Check", scope)
        with pytest.raises(FailedPrecondition) as mismatch:
            memory.remember(task.session_id, scope + "-other", "A claim.", "fact")
        assert mismatch.value.reason == "SCOPE_MISMATCH" and not isinstance(mismatch.value, IncompleteFeedbackError)
        memory.feedback(task.retrieval_id, coverage="complete")
        memory.commit(task.session_id, "Check", "success", summary(), VERIFIED)
        with pytest.raises(FailedPrecondition) as ended:
            memory.recall(task.session_id, scope, "anything")
        assert ended.value.reason == "SESSION_ENDED"


# ----------------------------------------------------------------------- retries and deadlines


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_on_port(port: int, database_url: str) -> Server:
    """A real server on a known port (the shared helper always binds port 0)."""
    settings = Settings(
        listen_addr=f"127.0.0.1:{port}",
        database_url=database_url,
        metrics_addr="",
        consolidation_poll_seconds=0.2,
        gauge_refresh_seconds=0.2,
    )
    return Server(start_server(settings), database_url)


@pytest.fixture
def own_servers() -> Iterator[list[Server]]:
    started: list[Server] = []
    yield started
    for srv in started:
        srv.stop()


def test_client_started_before_the_server_retries_until_it_serves(tmp_path: Path, own_servers: list[Server]):
    port, url = free_port(), new_database_url(tmp_path)
    retries: list[RetryEvent] = []

    def on_retry(event: RetryEvent) -> None:
        retries.append(event)
        if not own_servers:  # the first attempt has failed: only now does the server come up
            own_servers.append(start_on_port(port, url))

    with Client(f"127.0.0.1:{port}", retry=PATIENT, timeout=120, on_retry=on_retry, options=FAST_RECONNECT) as memory:
        assert memory.health() == "serving"
        assert retries and all(isinstance(e.error, Unavailable) for e in retries)
        assert retries[0].attempt == 1 and retries[0].method == "Check"


def test_commit_survives_a_server_restart_and_activate_is_not_repeated(tmp_path: Path, own_servers: list[Server]):
    port, url, scope = free_port(), new_database_url(tmp_path), new_scope()
    own_servers.append(start_on_port(port, url))
    retries: list[RetryEvent] = []

    def on_retry(event: RetryEvent) -> None:
        retries.append(event)
        if event.method == "Commit" and not own_servers:
            own_servers.append(start_on_port(port, url))

    with Client(f"127.0.0.1:{port}", retry=PATIENT, timeout=120, on_retry=on_retry, options=FAST_RECONNECT) as memory:
        task = memory.activate("Survive a restart", "Survive", scope)
        memory.remember(task.session_id, scope, "Restarts keep the data.", "fact")
        own_servers.pop().stop()

        # Opening a session is not safe to repeat after an ambiguous UNAVAILABLE: one attempt only.
        with pytest.raises(Unavailable) as down:
            memory.activate("Another task", "Another", scope)
        assert not down.value.from_service and retries == []

        done = memory.commit(task.session_id, "Survive", "success", summary(), VERIFIED)
        assert len(own_servers) == 1 and retries and {e.method for e in retries} == {"Commit"}
        # The first attempt never reached a server: this call closed the session, it did not update it.
        assert (done.operation, done.episodes_formed) == ("closed", 1)


@dataclass
class StandIn:
    """A stand-in MemoryService on a free port: answers Activate from `activate`, records metadata."""

    activate: Callable[[pb.ActivateRequest, grpc.ServicerContext], pb.ActivateResponse]
    credentials: grpc.ServerCredentials | None = None
    metadata: list[dict[str, str]] = field(default_factory=list)
    peers: list[dict[str, list[bytes]]] = field(default_factory=list)
    port: int = 0

    def __post_init__(self) -> None:
        def handle(request: pb.ActivateRequest, context: grpc.ServicerContext) -> pb.ActivateResponse:
            self.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})
            self.peers.append(dict(context.auth_context()))
            return self.activate(request, context)

        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
        self.server.add_generic_rpc_handlers(
            [
                grpc.method_handlers_generic_handler(
                    "slowave.v1.MemoryService",
                    {
                        "Activate": grpc.unary_unary_rpc_method_handler(
                            handle,
                            request_deserializer=pb.ActivateRequest.FromString,
                            response_serializer=pb.ActivateResponse.SerializeToString,
                        ),
                    },
                )
            ]
        )
        health_servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, self.server)
        health_servicer.set("", health_pb2.HealthCheckResponse.SERVING)
        if self.credentials is None:
            self.port = self.server.add_insecure_port("127.0.0.1:0")
        else:
            self.port = self.server.add_secure_port("127.0.0.1:0", self.credentials)
        self.server.start()

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.server.stop(grace=0).wait()


@pytest.fixture
def stand_ins() -> Iterator[Callable[..., StandIn]]:
    started: list[StandIn] = []

    def make(activate: Callable[..., pb.ActivateResponse] | None = None, **kw: Any) -> StandIn:
        stand_in = StandIn(activate or (lambda request, context: pb.ActivateResponse(session_id="sess_standin")), **kw)
        started.append(stand_in)
        return stand_in

    yield make
    for s in started:
        s.stop()


def _service_unavailable(context: grpc.ServicerContext) -> None:
    info = any_pb2.Any()
    info.Pack(
        error_details_pb2.ErrorInfo(
            reason="INTERNAL_ERROR", domain="slowave.ai", metadata={"code": "internal_error", "retryable": "true"}
        )
    )
    context.abort_with_status(
        rpc_status.to_status(
            status_pb2.Status(
                code=code_pb2.UNAVAILABLE, message="the database is unavailable; retry shortly", details=[info]
            )
        )
    )


def test_activate_is_repeated_only_when_the_service_itself_was_unavailable(stand_ins):
    calls = {"n": 0}

    def flaky_database(request: pb.ActivateRequest, context: grpc.ServicerContext) -> pb.ActivateResponse:
        calls["n"] += 1
        if calls["n"] == 1:
            _service_unavailable(context)
        return pb.ActivateResponse(session_id="sess_second_try")

    def broken_proxy(request: pb.ActivateRequest, context: grpc.ServicerContext) -> pb.ActivateResponse:
        context.abort(grpc.StatusCode.UNAVAILABLE, "upstream connect error")
        raise AssertionError("unreachable")

    retries: list[RetryEvent] = []
    with Client(
        stand_ins(flaky_database).address, retry=RetryPolicy(initial_backoff=0.01), on_retry=retries.append
    ) as c:
        assert c.activate("t", "g", "project:x").session_id == "sess_second_try"
    assert calls["n"] == 2 and len(retries) == 1 and retries[0].error.from_service

    proxy = stand_ins(broken_proxy)
    with Client(proxy.address, retry=RetryPolicy(initial_backoff=0.01), on_retry=retries.append) as c:
        with pytest.raises(Unavailable) as raised:
            c.activate("t", "g", "project:x")
    assert len(proxy.metadata) == 1 and len(retries) == 1 and not raised.value.from_service


def test_deadline_exceeded_is_raised_and_not_retried(stand_ins):
    release = threading.Event()

    def hang(request: pb.ActivateRequest, context: grpc.ServicerContext) -> pb.ActivateResponse:
        release.wait(60)
        return pb.ActivateResponse()

    hanging = stand_ins(hang)
    retries: list[RetryEvent] = []
    try:
        with Client(hanging.address, timeout=0.5, on_retry=retries.append) as memory:
            with pytest.raises(DeadlineExceeded) as sync_error:
                memory.activate("t", "g", "project:x")
            with pytest.raises(DeadlineExceeded):
                memory.activate("t", "g", "project:x", timeout=0.2)

        async def async_call() -> None:
            async with AsyncClient(hanging.address, on_retry=retries.append) as memory:
                await memory.activate("t", "g", "project:x", timeout=0.3)

        with pytest.raises(DeadlineExceeded):
            asyncio.run(async_call())
    finally:
        release.set()
    assert sync_error.value.status == grpc.StatusCode.DEADLINE_EXCEEDED and sync_error.value.reason is None
    assert retries == [] and len(hanging.metadata) == 3


# ------------------------------------------------------------------------------ API key and TLS


def test_api_key_travels_as_bearer_metadata(stand_ins):
    recorder = stand_ins()
    with Client(recorder.address, api_key="swk_sdk-key-0123456789") as memory:
        memory.activate("t", "g", "project:x")
    with Client(recorder.address) as anonymous:
        anonymous.activate("t", "g", "project:x")

    async def async_call() -> None:
        async with AsyncClient(recorder.address, api_key="swk_async-key-0123456789") as memory:
            await memory.activate("t", "g", "project:x")

    asyncio.run(async_call())
    assert [m.get("authorization") for m in recorder.metadata] == [
        "Bearer swk_sdk-key-0123456789",
        None,
        "Bearer swk_async-key-0123456789",
    ]


@dataclass
class Pki:
    ca: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path


def make_pki(directory: Path) -> Pki:
    """A CA, a server certificate for 127.0.0.1 and localhost, a client certificate, another CA."""
    now = datetime.datetime.now(datetime.UTC)

    def cert(name: str, key: Any, issuer: tuple[Any, Any] | None, *, ca: bool = False, server: bool = False) -> Any:
        subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        signer_name, signer_key = (issuer[0].subject, issuer[1]) if issuer else (subject, key)
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(signer_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
                ),
                critical=False,
            )
        return builder.sign(signer_key, hashes.SHA256())

    def write(name: str, data: bytes) -> Path:
        path = directory / name
        path.write_bytes(data)
        return path

    def pem(obj: Any) -> bytes:
        if hasattr(obj, "private_bytes"):
            return obj.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        return obj.public_bytes(serialization.Encoding.PEM)

    directory.mkdir(parents=True, exist_ok=True)
    ca_key, other_key, server_key, client_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(4))
    ca = cert("sdk test CA", ca_key, None, ca=True)
    return Pki(
        ca=write("ca.pem", pem(ca)),
        server_cert=write("server.pem", pem(cert("slowave", server_key, (ca, ca_key), server=True))),
        server_key=write("server.key", pem(server_key)),
        client_cert=write("client.pem", pem(cert("sdk-client", client_key, (ca, ca_key)))),
        client_key=write("client.key", pem(client_key)),
        other_ca=write("other-ca.pem", pem(cert("another CA", other_key, None, ca=True))),
    )


def test_mutual_tls_to_a_stand_in_presents_the_client_certificate(tmp_path: Path, stand_ins):
    pki = make_pki(tmp_path / "pki")
    creds = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    secure = stand_ins(credentials=creds)
    tls = TlsConfig(ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key)
    with Client(secure.address, tls=tls, api_key="swk_over-tls-0123456789") as memory:
        assert memory.health() == "serving"
        assert memory.activate("t", "g", "project:x").session_id == "sess_standin"
    assert secure.peers[0]["x509_common_name"] == [b"sdk-client"]
    assert secure.metadata[0]["authorization"] == "Bearer swk_over-tls-0123456789"
    # By name instead of by address: the certificate names localhost too.
    with Client(f"localhost:{secure.port}", tls=tls) as by_name:
        assert by_name.health() == "serving"
    for refused in (
        TlsConfig(ca_file=pki.ca),
        TlsConfig(ca_file=pki.other_ca, cert_file=pki.client_cert, key_file=pki.client_key),
    ):
        with Client(secure.address, tls=refused, retry=NO_RETRIES, timeout=30) as memory:
            with pytest.raises(Unavailable):
                memory.health()
    with Client(secure.address, retry=NO_RETRIES, timeout=30) as plaintext:
        with pytest.raises(Unavailable):
            plaintext.health()
    assert len(secure.metadata) == 1, "no refused connection reached the handler"


def test_tls_and_api_keys_end_to_end_with_the_real_server(tmp_path: Path):
    """The real server's SLOWAVE_TLS_* and SLOWAVE_API_KEYS support, through the SDK."""
    from slowave.domain.api_keys import KeyEntry, hash_key

    pki = make_pki(tmp_path / "pki")
    key = "swk_sdk-e2e-0123456789abcdefghijklmnopqrstuvwxyz"
    srv = start_test_server(
        tmp_path / "srv",
        api_keys=(KeyEntry("acme", hash_key(key)),),
        tls_cert_file=str(pki.server_cert),
        tls_key_file=str(pki.server_key),
        tls_client_ca_file=str(pki.ca),
    )
    tls = TlsConfig(ca_file=pki.ca, cert_file=pki.client_cert, key_file=pki.client_key)
    scope = new_scope()
    try:
        with Client(srv.address, tls=tls, api_key=key) as memory:
            task = memory.activate("Encrypted task", "Encrypt", scope)
            memory.remember(task.session_id, scope, "Everything here travels over TLS.", "fact")
            assert memory.commit(task.session_id, "Encrypt", "success", summary(), VERIFIED).committed
        with Client(srv.address, tls=tls) as keyless:
            assert keyless.health() == "serving"  # health is exempt from API keys
            with pytest.raises(Unauthenticated) as refused:
                keyless.activate("t", "g", scope)
            assert (refused.value.code, refused.value.retryable) == ("unauthenticated", False)
        with Client(srv.address, tls=tls, api_key="swk_wrong-0123456789abcdefghijklmnop") as wrong:
            with pytest.raises(Unauthenticated):
                wrong.activate("t", "g", scope)
        with Client(srv.address, tls=TlsConfig(ca_file=pki.ca), api_key=key, retry=NO_RETRIES) as no_cert:
            with pytest.raises(Unavailable):
                no_cert.activate("t", "g", scope)
    finally:
        srv.stop()


def test_wait_for_ready_waits_for_a_late_server(tmp_path: Path, own_servers: list[Server]):
    port, url = free_port(), new_database_url(tmp_path)
    result: dict[str, Any] = {}
    calling = threading.Event()

    def call() -> None:
        with Client(
            f"127.0.0.1:{port}", wait_for_ready=True, retry=NO_RETRIES, timeout=120, options=FAST_RECONNECT
        ) as memory:
            calling.set()
            try:
                result["health"] = memory.health()
            except Exception as exc:
                result["error"] = exc

    caller = threading.Thread(target=call)
    caller.start()
    # The server binds its port only after its migrations, long after the call's first connection
    # attempt was refused: without wait_for_ready that attempt would fail with UNAVAILABLE.
    assert calling.wait(60)
    own_servers.append(start_on_port(port, url))
    caller.join(timeout=120)
    wait_until(lambda: result, timeout=60, what="the waiting call to finish")
    assert result == {"health": "serving"}
