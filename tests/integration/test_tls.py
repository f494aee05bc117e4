"""TLS and mutual TLS (SLOWAVE_TLS_*), end to end with certificates made by the test."""

from __future__ import annotations

import datetime
import ipaddress
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from slowave.api.app import start_server
from slowave.api.auth import StartupRefused
from slowave.config import Settings
from slowave.domain.api_keys import KeyEntry, hash_key
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from tests.support import (
    activate,
    check_error,
    expect_error,
    keyed_stub,
    new_database_url,
    new_scope,
    start_test_server,
)

pytestmark = pytest.mark.backend_neutral


@dataclass
class Pem:
    cert: bytes
    key: bytes


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(name: str) -> tuple[Pem, x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                key_cert_sign=True,
                crl_sign=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .sign(key, hashes.SHA256())
    )
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key)), cert, key


def issue(ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, name: str, *, server: bool) -> Pem:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]),
            critical=False,
        )
    )
    if server:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
    cert = builder.sign(ca_key, hashes.SHA256())
    return Pem(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


@dataclass
class Pki:
    dir: Path
    server_ca: Pem
    server: Pem
    client_ca: Pem
    client: Pem
    stranger: Pem  # a client certificate from a CA the server does not trust
    stranger_ca: Pem

    def file(self, name: str, data: bytes) -> str:
        path = self.dir / name
        path.write_bytes(data)
        return str(path)

    def server_settings(self, mutual: bool) -> dict:
        settings = {
            "tls_cert_file": self.file("server.pem", self.server.cert),
            "tls_key_file": self.file("server.key", self.server.key),
        }
        if mutual:
            settings["tls_client_ca_file"] = self.file("client-ca.pem", self.client_ca.cert)
        return settings


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Pki:
    directory = tmp_path_factory.mktemp("pki")
    server_ca, sca_cert, sca_key = make_ca("slowave test server CA")
    client_ca, cca_cert, cca_key = make_ca("slowave test client CA")
    stranger_ca, xca_cert, xca_key = make_ca("some other CA")
    return Pki(
        directory,
        server_ca,
        issue(sca_cert, sca_key, "slowave", server=True),
        client_ca,
        issue(cca_cert, cca_key, "agent-1", server=False),
        issue(xca_cert, xca_key, "intruder", server=False),
        stranger_ca,
    )


def secure_channel(port: int, root: bytes, client: Pem | None = None) -> grpc.Channel:
    creds = grpc.ssl_channel_credentials(
        root_certificates=root,
        private_key=client.key if client else None,
        certificate_chain=client.cert if client else None,
    )
    return grpc.secure_channel(f"127.0.0.1:{port}", creds)


def fails_to_connect(channel: grpc.Channel) -> None:
    err = expect_error(lambda: activate(pb_grpc.MemoryServiceStub(channel), new_scope()))
    assert err.code == grpc.StatusCode.UNAVAILABLE, (err.code, err.message)
    assert not err.has_error_info, "the connection failed; no handler ran"
    channel.close()


def test_tls_serves_encrypted_and_refuses_plaintext(tmp_path, pki):
    srv = start_test_server(tmp_path, **pki.server_settings(mutual=False))
    try:
        channel = secure_channel(srv.running.port, pki.server_ca.cert)
        a = activate(pb_grpc.MemoryServiceStub(channel), new_scope())
        assert a.session_id.startswith("sess_")
        channel.close()
        fails_to_connect(grpc.insecure_channel(f"127.0.0.1:{srv.running.port}"))
        fails_to_connect(secure_channel(srv.running.port, pki.stranger_ca.cert))  # server not trusted
    finally:
        srv.stop()


def test_mutual_tls_requires_a_client_certificate_from_the_client_ca(tmp_path, pki):
    srv = start_test_server(tmp_path, **pki.server_settings(mutual=True))
    try:
        fails_to_connect(secure_channel(srv.running.port, pki.server_ca.cert))  # no client certificate
        fails_to_connect(secure_channel(srv.running.port, pki.server_ca.cert, pki.stranger))
        fails_to_connect(grpc.insecure_channel(f"127.0.0.1:{srv.running.port}"))
        channel = secure_channel(srv.running.port, pki.server_ca.cert, pki.client)
        assert activate(pb_grpc.MemoryServiceStub(channel), new_scope()).session_id.startswith("sess_")
        channel.close()
    finally:
        srv.stop()


def test_tls_with_api_keys(tmp_path, pki):
    key = "swk_tls-0123456789abcdefghijklmnopqrstuvwxyzABCD"
    srv = start_test_server(tmp_path, api_keys=(KeyEntry("acme", hash_key(key)),), **pki.server_settings(mutual=True))
    try:
        channel = secure_channel(srv.running.port, pki.server_ca.cert, pki.client)
        err = expect_error(lambda: activate(pb_grpc.MemoryServiceStub(channel), new_scope()))
        check_error(err, grpc.StatusCode.UNAUTHENTICATED, "UNAUTHENTICATED", "unauthenticated", False)
        assert activate(keyed_stub(channel, key), new_scope()).session_id.startswith("sess_")
        channel.close()
    finally:
        srv.stop()


def test_client_certificates_allow_a_non_loopback_bind_and_server_only_tls_does_not(tmp_path, pki):
    url = new_database_url(tmp_path)
    with pytest.raises(StartupRefused, match="SLOWAVE_ALLOW_INSECURE_BIND"):
        start_server(
            Settings(listen_addr="0.0.0.0:0", database_url=url, metrics_addr="", **pki.server_settings(mutual=False))
        )
    running = start_server(
        Settings(listen_addr="0.0.0.0:0", database_url=url, metrics_addr="", **pki.server_settings(mutual=True))
    )
    try:
        channel = secure_channel(running.port, pki.server_ca.cert, pki.client)
        assert activate(pb_grpc.MemoryServiceStub(channel), new_scope()).session_id.startswith("sess_")
        channel.close()
    finally:
        running.stop(grace=1)


@pytest.mark.parametrize(
    "which, message",
    [
        ({"tls_cert_file": "server.pem"}, "both SLOWAVE_TLS_CERT_FILE and SLOWAVE_TLS_KEY_FILE"),
        ({"tls_key_file": "server.key"}, "both SLOWAVE_TLS_CERT_FILE and SLOWAVE_TLS_KEY_FILE"),
        ({"tls_client_ca_file": "client-ca.pem"}, "SLOWAVE_TLS_CLIENT_CA_FILE needs"),
        ({"tls_cert_file": "missing.pem", "tls_key_file": "server.key"}, "SLOWAVE_TLS_CERT_FILE=.*cannot read"),
        ({"tls_cert_file": "server.pem", "tls_key_file": "garbage"}, "SLOWAVE_TLS_KEY_FILE=.*not a PEM file"),
    ],
)
def test_incomplete_or_unreadable_tls_configuration_refuses_to_start(tmp_path, pki, which, message):
    pki.server_settings(mutual=True)  # writes the files
    pki.file("garbage", b"not a key")
    paths = {k: str(pki.dir / v) for k, v in which.items()}
    with pytest.raises(StartupRefused, match=message):
        start_server(
            Settings(listen_addr="127.0.0.1:0", database_url=new_database_url(tmp_path), metrics_addr="", **paths)
        )
