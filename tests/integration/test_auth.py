"""API keys → tenants (behaviour §3.1, 4.2, 4.5 stage 1), over real gRPC; the loopback-only rule."""

from __future__ import annotations

import hashlib
import logging
import os
import re
import subprocess
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from sqlalchemy import inspect, text

from slowave.api.app import start_server
from slowave.api.auth import StartupRefused
from slowave.config import Settings
from slowave.domain.api_keys import KeyEntry, hash_key
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.support import (
    activate,
    assess_all,
    channel_with_metadata,
    check_error,
    commit,
    commit_request,
    expect_error,
    keyed_stub,
    new_database_url,
    new_scope,
    pb,
    remember,
    res,
    server_executable,
    start_keyed_server,
    start_test_server,
    wait_until,
)

KEY_ACME = "swk_acme-0123456789abcdefghijklmnopqrstuvwxyzAB"
KEY_ACME_2 = "swk_acme-second-key-0123456789abcdefghijklmnop"
KEY_GLOBEX = "swk_globex-0123456789abcdefghijklmnopqrstuvwxy"
KEYS = {KEY_ACME: "acme", KEY_ACME_2: "acme", KEY_GLOBEX: "globex"}
UNKNOWN_KEY = "swk_unknown-0123456789abcdefghijklmnopqrstuvw"


def unauthenticated(err) -> None:
    check_error(err, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", "unauthenticated", False)


def permission_denied(err) -> None:
    check_error(err, grpc.StatusCode.PERMISSION_DENIED, "PERMISSION_DENIED", "permission_denied", False)


@pytest.fixture(scope="module")
def keyed(tmp_path_factory):
    srv = start_keyed_server(tmp_path_factory.mktemp("keyed"), KEYS)
    yield srv
    srv.stop()


def every_rpc(stub) -> dict:
    """One syntactically valid call of each RPC (what they name need not exist)."""
    scope = new_scope()
    return {
        "Activate": lambda: stub.Activate(pb.ActivateRequest(task="t", initial_goal="g", scope=scope), timeout=30),
        "Remember": lambda: stub.Remember(
            pb.RememberRequest(session_id="sess_000000000000", scope=scope, content="c"), timeout=30
        ),
        "Recall": lambda: stub.Recall(
            pb.RecallRequest(session_id="sess_000000000000", scope=scope, query="q"), timeout=30
        ),
        "Feedback": lambda: stub.Feedback(pb.FeedbackRequest(retrieval_id="ctx_000000000000"), timeout=30),
        "Commit": lambda: stub.Commit(commit_request("sess_000000000000"), timeout=30),
    }


# ------------------------------------------------------------------------------- contract scenarios


def test_s11_another_tenants_session_and_retrieval_are_not_found(keyed):
    acme, globex = keyed_stub(keyed.channel, KEY_ACME), keyed_stub(keyed.channel, KEY_GLOBEX)
    scope = new_scope()
    a = activate(acme, scope)
    remember(acme, a.session_id, scope, "The staging cluster runs on ARM nodes.")

    err = expect_error(lambda: remember(globex, a.session_id, scope, "x"))
    check_error(err, grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input", False)
    err = expect_error(
        lambda: globex.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope, query="ARM"), timeout=30)
    )
    check_error(err, grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input", False)
    err = expect_error(lambda: commit(globex, a.session_id))
    check_error(err, grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input", False)
    err = expect_error(
        lambda: globex.Feedback(
            pb.FeedbackRequest(retrieval_id=a.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=30
        )
    )
    check_error(err, grpc.StatusCode.NOT_FOUND, "NOT_FOUND", "not_found", False)

    # The owner still has both, untouched: the session is open and its retrieval unassessed.
    assess_all(acme, a)
    assert commit(acme, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED


def test_s12_keys_configured_and_no_authorization_metadata_is_unauthenticated(keyed):
    before = keyed.snapshot()
    for name, call in every_rpc(keyed.stub).items():  # keyed.stub sends no metadata
        err = expect_error(call)
        unauthenticated(err)
        assert err.domain == "slowave.ai", name
    assert keyed.snapshot() == before, "a refused call reads and writes nothing"
    refused = keyed.running.metrics.registry.get_sample_value(
        "slowave_requests_refused_total", {"reason": "UNAUTHENTICATED"}
    )
    assert refused is not None and refused >= 5


# ------------------------------------------------------------------------------- refusals


@pytest.mark.parametrize(
    "value",
    [
        KEY_ACME,  # no scheme
        f"Basic {KEY_ACME}",
        "Bearer",
        "Bearer ",
        f"Bearer {KEY_ACME} {KEY_ACME}",
        f"Bearer{KEY_ACME}",
    ],
)
def test_malformed_authorization_is_unauthenticated(keyed, value):
    channel = channel_with_metadata(keyed.channel, [("authorization", value)])
    err = expect_error(every_rpc(pb_grpc.MemoryServiceStub(channel))["Activate"])
    unauthenticated(err)
    assert KEY_ACME not in err.message


def test_repeated_authorization_metadata_is_malformed(keyed):
    channel = channel_with_metadata(
        keyed.channel, [("authorization", f"Bearer {KEY_ACME}"), ("authorization", f"Bearer {KEY_GLOBEX}")]
    )
    unauthenticated(expect_error(every_rpc(pb_grpc.MemoryServiceStub(channel))["Activate"]))


def test_unknown_key_is_unauthenticated_on_every_rpc_and_writes_nothing(keyed):
    stub = keyed_stub(keyed.channel, UNKNOWN_KEY)
    before = keyed.snapshot()
    for call in every_rpc(stub).values():
        err = expect_error(call)
        unauthenticated(err)
        assert UNKNOWN_KEY not in err.message
    assert keyed.snapshot() == before


def test_authentication_precedes_validation(keyed):
    """Behaviour §4.5: stage 1 decides, even for a request that would be INVALID_ARGUMENT."""
    bad = pb.ActivateRequest(task="", initial_goal="", scope="nonsense")
    unauthenticated(expect_error(lambda: keyed.stub.Activate(bad, timeout=30)))
    err = expect_error(lambda: keyed_stub(keyed.channel, KEY_ACME).Activate(bad, timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT


def test_scheme_is_case_insensitive_and_two_keys_of_one_tenant_share_its_store(keyed):
    lower = pb_grpc.MemoryServiceStub(channel_with_metadata(keyed.channel, [("authorization", f"bearer {KEY_ACME}")]))
    second = keyed_stub(keyed.channel, KEY_ACME_2)
    scope = new_scope()
    a = activate(lower, scope)
    claim = f"Deploys of {scope} go through the blue pipeline."
    remember(lower, a.session_id, scope, claim)
    assert commit(second, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED, "same tenant, same session"
    seen = activate(second, scope, task=claim)
    assert [m.content for m in seen.memories] == [claim]
    other = activate(keyed_stub(keyed.channel, KEY_GLOBEX), scope, task=claim)
    assert list(other.memories) == [] and other.memory_state == res.MEMORY_STATE_COLD_START


# ------------------------------------------------------------------------------- health and reflection


def test_health_is_unauthenticated_and_reflection_needs_a_key(keyed):
    health = health_pb2_grpc.HealthStub(keyed.channel)
    for service in ("", "slowave.v1.MemoryService"):
        assert (
            health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10).status
            == health_pb2.HealthCheckResponse.SERVING
        )

    def list_services(channel: grpc.Channel) -> list[str]:
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)
        answer = next(
            stub.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10)
        )
        return [s.name for s in answer.list_services_response.service]

    unauthenticated(expect_error(lambda: list_services(keyed.channel)))
    keyed_channel = channel_with_metadata(keyed.channel, [("authorization", f"Bearer {KEY_GLOBEX}")])
    assert "slowave.v1.MemoryService" in list_services(keyed_channel)


# ------------------------------------------------------------------------------- disable, revoke


def test_disabled_tenant_is_permission_denied_until_enabled(make_server):
    srv = make_server(api_keys=tuple(KeyEntry(t, hash_key(k)) for k, t in KEYS.items()), auth_cache_seconds=0)
    acme, globex = keyed_stub(srv.channel, KEY_ACME), keyed_stub(srv.channel, KEY_GLOBEX)
    scope = new_scope()
    a = activate(acme, scope)
    srv.admin("tenants", "disable", "acme")
    before = srv.snapshot()
    for call in every_rpc(acme).values():
        permission_denied(expect_error(call))
    permission_denied(expect_error(lambda: remember(keyed_stub(srv.channel, KEY_ACME_2), a.session_id, scope, "x")))
    assert srv.snapshot() == before
    assert "state: disabled" in srv.admin("tenants", "list")
    activate(globex, scope)  # other tenants are unaffected
    # A wrong key stays UNAUTHENTICATED: disabling a tenant does not reveal which keys are real.
    unauthenticated(expect_error(every_rpc(keyed_stub(srv.channel, UNKNOWN_KEY))["Activate"]))
    srv.admin("tenants", "enable", "acme")
    remember(acme, a.session_id, scope, "Back in service after the audit.")
    with pytest.raises(subprocess.CalledProcessError):
        srv.admin("tenants", "disable", "no-such-tenant")


def _mint(srv, tenant: str) -> tuple[str, str]:
    out = srv.admin("keys", "mint", tenant, "--label", "test")
    key = re.search(r"^api_key: (\S+)$", out, re.M).group(1)
    shown = re.search(r"^key_hash: sha256:([0-9a-f]+)", out, re.M).group(1)
    return key, shown


def test_minted_key_works_and_revocation_is_immediate_without_cache(make_server):
    srv = make_server(api_keys=(KeyEntry("acme", hash_key(KEY_ACME)),), auth_cache_seconds=0)
    key, shown = _mint(srv, "initech")
    assert hash_key(key).startswith(f"sha256:{shown}")
    assert key not in srv.admin("keys", "list"), "listings show hash prefixes only"
    assert f"sha256:{shown}" in srv.admin("keys", "list", "--tenant", "initech")
    stub = keyed_stub(srv.channel, key)
    scope = new_scope()
    a = activate(stub, scope)
    assert "revoked" in srv.admin("keys", "revoke", shown)
    unauthenticated(expect_error(lambda: remember(stub, a.session_id, scope, "too late")))
    activate(keyed_stub(srv.channel, KEY_ACME), scope)  # other keys unaffected
    with pytest.raises(subprocess.CalledProcessError):
        srv.admin("keys", "revoke", shown)  # already revoked


def test_revocation_and_disabling_apply_within_the_cache_time(make_server):
    ttl = 2.0
    srv = make_server(api_keys=(KeyEntry("acme", hash_key(KEY_ACME)),), auth_cache_seconds=ttl)
    key, shown = _mint(srv, "hooli")
    stub = keyed_stub(srv.channel, key)
    scope = new_scope()
    activate(stub, scope)  # cached as valid now
    srv.admin("keys", "revoke", shown)
    revoked_at = time.monotonic()

    def refused() -> bool:
        try:
            activate(stub, scope)
            return False
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
            return True

    wait_until(refused, timeout=120, interval=0.2, what="the revoked key to be refused")
    # Bounded: the cached answer expires after `ttl`; the slack covers a loaded machine only.
    assert time.monotonic() - revoked_at < ttl + 30

    acme = keyed_stub(srv.channel, KEY_ACME)
    activate(acme, scope)
    srv.admin("tenants", "disable", "acme")

    def denied() -> bool:
        try:
            activate(acme, scope)
            return False
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.PERMISSION_DENIED
            return True

    wait_until(denied, timeout=120, interval=0.2, what="the disabled tenant to be refused")


# ------------------------------------------------------------------------------- configuration sources


def _all_text(srv) -> str:
    """Every row of every table (the full-text index's tables included), as text."""
    parts = []
    engine = srv.running.ctx.db.engine
    with engine.connect() as conn:
        for name in inspect(conn).get_table_names():
            for row in conn.execute(text(f'SELECT * FROM "{name}"')):
                parts.append(" ".join(repr(v) if isinstance(v, bytes) else str(v) for v in row))
    return "\n".join(parts)


def test_keys_from_file_and_environment_and_only_hashes_stored(tmp_path, caplog):
    caplog.set_level(logging.DEBUG)
    plain_in_file = "file-plaintext-key-0123456789abcdef"
    plain_in_env = "env-plaintext-key-0123456789abcdef"
    hashed_in_file = "swk_hashed-in-file-0123456789abcdefghijklmnopq"
    keys_file = tmp_path / "keys.conf"
    keys_file.write_text(f"# operators' key list\nacme {hash_key(hashed_in_file)}\nacme {plain_in_file}\n")
    env = {"SLOWAVE_API_KEYS_FILE": str(keys_file), "SLOWAVE_API_KEYS": f"globex={plain_in_env}"}
    settings = Settings.from_env(env)
    srv = start_test_server(tmp_path / "srv", api_keys=settings.api_keys)
    try:
        minted, _ = _mint(srv, "initech")
        plaintexts = {plain_in_file: "acme", hashed_in_file: "acme", plain_in_env: "globex", minted: "initech"}
        scope = new_scope()
        for key, tenant in plaintexts.items():
            stub = keyed_stub(srv.channel, key)
            a = activate(stub, scope, task=f"work for {tenant}")
            remember(stub, a.session_id, scope, f"A fact that {tenant} keeps.")
            assess_all(stub, a)
            commit(stub, a.session_id)
        srv.consolidate()
        unauthenticated(expect_error(every_rpc(keyed_stub(srv.channel, "not-a-configured-key-00000"))["Activate"]))
        # Tenants come from the configured mapping: both acme keys see acme's claims only.
        facts = {
            m.content
            for m in activate(
                keyed_stub(srv.channel, plain_in_file), scope, task="A fact that acme keeps. A fact that globex keeps."
            ).memories
        }
        assert facts == {"A fact that acme keeps."}

        dump = _all_text(srv)
        for key in plaintexts:
            assert key not in dump, "a plaintext key reached the database"
            assert hashlib.sha256(key.encode()).hexdigest() in dump, "its hash is what is stored"
        if srv.database_url.startswith("sqlite"):
            path = Path(srv.database_url.split("///", 1)[1])
            raw = b"".join(p.read_bytes() for p in path.parent.glob(path.name + "*"))
            for key in plaintexts:
                assert key.encode() not in raw
        for key in plaintexts:
            assert key not in caplog.text, "a plaintext key was logged"
    finally:
        srv.stop()


def test_a_key_removed_from_the_configuration_stops_working_after_restart(tmp_path):
    url = new_database_url(tmp_path)
    first = start_keyed_server(tmp_path / "a", {KEY_ACME: "acme", KEY_ACME_2: "acme"}, database_url=url)
    scope = new_scope()
    a = activate(keyed_stub(first.channel, KEY_ACME_2), scope)
    first.stop()
    second = start_keyed_server(tmp_path / "b", {KEY_ACME: "acme"}, database_url=url)
    try:
        unauthenticated(expect_error(lambda: activate(keyed_stub(second.channel, KEY_ACME_2), scope)))
        assess_all(keyed_stub(second.channel, KEY_ACME), a)  # the tenant's data is still there
        assert commit(keyed_stub(second.channel, KEY_ACME), a.session_id).operation == pb.COMMIT_OPERATION_CLOSED
    finally:
        second.stop()


def test_a_key_configured_for_another_tenant_than_stored_refuses_to_start(tmp_path):
    url = new_database_url(tmp_path)
    start_keyed_server(tmp_path / "a", {KEY_ACME: "acme"}, database_url=url).stop()
    with pytest.raises(StartupRefused, match="belongs to tenant 'acme'"):
        start_keyed_server(tmp_path / "b", {KEY_ACME: "globex"}, database_url=url)


# ------------------------------------------------------------------------------- without keys


def test_without_keys_everything_is_the_local_tenant_and_metadata_is_ignored(make_server):
    srv = make_server()
    scope = new_scope()
    plain = activate(srv.stub, scope)
    garbage = keyed_stub(srv.channel, "whatever")
    remember(garbage, plain.session_id, scope, "Shared by every caller of an open server.")
    malformed = pb_grpc.MemoryServiceStub(channel_with_metadata(srv.channel, [("authorization", "Basic x")]))
    assess_all(malformed, plain)
    commit(malformed, plain.session_id)
    with srv.running.ctx.db.engine.connect() as conn:
        tenants = {r.tenant for r in conn.execute(text("SELECT tenant FROM sessions"))}
    assert tenants == {"local"}


def test_minting_the_first_key_locks_an_open_server_for_good(make_server):
    srv = make_server(auth_cache_seconds=0.5)
    scope = new_scope()
    activate(srv.stub, scope)
    key, shown = _mint(srv, "local")

    def locked() -> bool:
        try:
            activate(srv.stub, scope)
            return False
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
            return True

    wait_until(locked, timeout=120, interval=0.2, what="the server to require keys")
    activate(keyed_stub(srv.channel, key), scope)
    srv.admin("keys", "revoke", shown)

    def refused() -> bool:  # the key stays valid until the auth cache expires
        try:
            activate(keyed_stub(srv.channel, key), scope)
            return False
        except grpc.RpcError as err:
            assert err.code() == grpc.StatusCode.UNAUTHENTICATED
            return True

    wait_until(refused, timeout=120, interval=0.2, what="the revoked key to be refused")
    unauthenticated(expect_error(lambda: activate(srv.stub, scope)))  # revoking every key does not reopen it


# ------------------------------------------------------------------------------- loopback-only without keys


def _settings(tmp_path: Path, addr: str, **kw) -> Settings:
    return Settings(listen_addr=addr, database_url=new_database_url(tmp_path), metrics_addr="", **kw)


@pytest.mark.parametrize("addr", ["0.0.0.0:0", "[::]:0", ":0", "8.8.8.8:0", "example.com:0"])
def test_open_server_refuses_non_loopback_addresses(tmp_path, addr):
    with pytest.raises(StartupRefused, match="SLOWAVE_ALLOW_INSECURE_BIND=1"):
        start_server(_settings(tmp_path, addr))


@pytest.mark.parametrize("addr", ["127.0.0.1:0", "localhost:0", "[::1]:0"])
def test_open_server_binds_loopback_addresses(tmp_path, addr):
    if addr.startswith("[::1]") and not os.path.exists("/proc/net/if_inet6"):
        pytest.skip("no IPv6 on this machine")
    running = start_server(_settings(tmp_path, addr))
    try:
        host = "[::1]" if addr.startswith("[::1]") else "127.0.0.1"
        with grpc.insecure_channel(f"{host}:{running.port}") as channel:
            reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=30)
        assert running.port > 0 and reply.status == health_pb2.HealthCheckResponse.SERVING
    finally:
        running.stop(grace=1)


@pytest.mark.parametrize(
    "extra", [{"allow_insecure_bind": True}, {"api_keys": (KeyEntry("acme", hash_key(KEY_ACME)),)}]
)
def test_non_loopback_bind_with_keys_or_opt_in(tmp_path, extra):
    running = start_server(_settings(tmp_path, "0.0.0.0:0", **extra))
    try:
        channel = grpc.insecure_channel(f"127.0.0.1:{running.port}")
        stub = keyed_stub(channel, KEY_ACME)
        assert activate(stub, new_scope()).session_id.startswith("sess_")
        channel.close()
    finally:
        running.stop(grace=1)


def test_server_process_explains_the_refusal(tmp_path):
    env = {
        **os.environ,
        "SLOWAVE_LISTEN_ADDR": "0.0.0.0:0",
        "SLOWAVE_METRICS_ADDR": "",
        "SLOWAVE_DATABASE_URL": new_database_url(tmp_path),
    }
    env.pop("SLOWAVE_ALLOW_INSECURE_BIND", None)
    env.pop("SLOWAVE_API_KEYS", None)
    env.pop("SLOWAVE_API_KEYS_FILE", None)
    out = subprocess.run([server_executable()], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 2, out.stderr
    assert "refusing to listen on 0.0.0.0:0" in out.stderr and "SLOWAVE_ALLOW_INSECURE_BIND=1" in out.stderr
    assert "Traceback" not in out.stderr


def test_the_resolved_tenant_reaches_the_per_rpc_log_line(keyed, caplog):
    caplog.set_level(logging.INFO, logger="slowave.access")
    activate(keyed_stub(keyed.channel, KEY_GLOBEX), new_scope())
    unauthenticated(expect_error(lambda: activate(keyed.stub, new_scope())))

    def lines() -> list[dict]:
        return [r.rpc for r in caplog.records if getattr(r, "rpc", None) and r.rpc["method"].endswith("/Activate")]

    wait_until(lambda: len(lines()) >= 2, timeout=60, what="two access lines")
    assert [(x["code"], x["tenant"]) for x in lines()[-2:]] == [("OK", "globex"), ("UNAUTHENTICATED", None)]
