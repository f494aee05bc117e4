"""SDK connection set-up: API-key metadata, TLS credentials and channel choice (no network)."""

from __future__ import annotations

from pathlib import Path

import grpc
import pytest

from slowave_client import connection
from slowave_client.connection import TlsConfig, auth_metadata, channel_options, open_channel


def test_api_key_becomes_a_bearer_authorization_header():
    assert auth_metadata("k-123") == (("authorization", "Bearer k-123"),)
    assert auth_metadata("  k-123\n") == (("authorization", "Bearer k-123"),)
    assert auth_metadata(None) == () and auth_metadata("  ") == ()
    with pytest.raises(ValueError):
        auth_metadata("two words")
    with pytest.raises(ValueError):
        auth_metadata("clé")


def test_client_certificate_needs_its_key():
    with pytest.raises(ValueError):
        TlsConfig(cert_file="client.pem")
    with pytest.raises(ValueError):
        TlsConfig(key_file="client.key")


@pytest.fixture
def captured(monkeypatch):
    """Records what grpc is asked to build instead of building it."""
    calls: dict[str, object] = {}

    def ssl_channel_credentials(root_certificates=None, private_key=None, certificate_chain=None):
        calls["ssl"] = (root_certificates, private_key, certificate_chain)
        return "CREDS"

    monkeypatch.setattr(grpc, "ssl_channel_credentials", ssl_channel_credentials)
    monkeypatch.setattr(
        grpc,
        "secure_channel",
        lambda target, creds, options=None: calls.setdefault("channel", ("secure", target, creds, dict(options or ()))),
    )
    monkeypatch.setattr(
        grpc,
        "insecure_channel",
        lambda target, options=None: calls.setdefault("channel", ("insecure", target, None, dict(options or ()))),
    )
    monkeypatch.setattr(
        grpc.aio,
        "secure_channel",
        lambda target, creds, options=None: calls.setdefault(
            "channel", ("aio-secure", target, creds, dict(options or ()))
        ),
    )
    monkeypatch.setattr(
        grpc.aio,
        "insecure_channel",
        lambda target, options=None: calls.setdefault("channel", ("aio-insecure", target, None, dict(options or ()))),
    )
    return calls


def test_plaintext_is_the_default(captured):
    open_channel("10.0.0.1:50051")
    kind, target, creds, options = captured["channel"]
    assert (kind, target, creds) == ("insecure", "10.0.0.1:50051", None)
    assert "ssl" not in captured and "grpc.ssl_target_name_override" not in options


def test_tls_true_uses_the_system_roots(captured):
    open_channel("memory.example:443", tls=True)
    assert captured["ssl"] == (None, None, None)
    assert captured["channel"][:3] == ("secure", "memory.example:443", "CREDS")


def test_tls_files_are_read_into_the_credentials(captured, tmp_path: Path):
    (tmp_path / "ca.pem").write_bytes(b"CA-PEM")
    (tmp_path / "client.pem").write_bytes(b"CERT-PEM")
    (tmp_path / "client.key").write_bytes(b"KEY-PEM")
    tls = TlsConfig(
        ca_file=tmp_path / "ca.pem",
        cert_file=str(tmp_path / "client.pem"),
        key_file=tmp_path / "client.key",
        server_name="slowave.internal",
    )
    open_channel("127.0.0.1:50051", tls=tls, asynchronous=True, options=[("grpc.primary_user_agent", "t")])
    assert captured["ssl"] == (b"CA-PEM", b"KEY-PEM", b"CERT-PEM")
    kind, _, creds, options = captured["channel"]
    assert kind == "aio-secure" and creds == "CREDS"
    assert options["grpc.ssl_target_name_override"] == "slowave.internal"
    assert options["grpc.primary_user_agent"] == "t"


def test_a_missing_tls_file_fails_when_the_channel_is_opened(captured, tmp_path: Path):
    with pytest.raises(FileNotFoundError):
        open_channel("127.0.0.1:1", tls=TlsConfig(ca_file=tmp_path / "absent.pem"))


def test_caller_options_override_the_defaults():
    merged = dict(channel_options(None, [("grpc.max_reconnect_backoff_ms", 500)]))
    assert merged["grpc.max_reconnect_backoff_ms"] == 500
    assert (
        dict(channel_options(None))["grpc.max_reconnect_backoff_ms"]
        == dict(connection.DEFAULT_OPTIONS)["grpc.max_reconnect_backoff_ms"]
    )
