"""Connection set-up in one place: plaintext or TLS (optionally mutual), and the API-key metadata."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, overload

import grpc

DEFAULT_TARGET = "127.0.0.1:50051"

# gRPC's reconnect backoff grows to 120 s by default: after a long outage a fail-fast client would
# then see UNAVAILABLE for up to two minutes after the server is back. Ten seconds bounds that.
DEFAULT_OPTIONS: tuple[tuple[str, Any], ...] = (("grpc.max_reconnect_backoff_ms", 10_000),)


@dataclass(frozen=True)
class TlsConfig:
    """TLS for the channel. With no `ca_file` the system's trusted roots verify the server."""

    ca_file: str | Path | None = None
    """PEM bundle of the roots that signed the server's certificate."""
    cert_file: str | Path | None = None
    """PEM client certificate chain, for servers that require mutual TLS (with `key_file`)."""
    key_file: str | Path | None = None
    """PEM private key of `cert_file`."""
    server_name: str | None = None
    """Name to expect in the server's certificate when it differs from the target's host
    (e.g. connecting by IP address to a certificate issued for `slowave.internal`)."""

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("a client certificate needs its private key, and a key its certificate")


def _read(path: str | Path | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()


def channel_credentials(tls: TlsConfig) -> grpc.ChannelCredentials:
    """The credentials `tls` describes; files are read now, so a missing file fails here, not on the
    first call."""
    return grpc.ssl_channel_credentials(
        root_certificates=_read(tls.ca_file), private_key=_read(tls.key_file), certificate_chain=_read(tls.cert_file)
    )


def channel_options(tls: TlsConfig | None, options: Sequence[tuple[str, Any]] = ()) -> list[tuple[str, Any]]:
    merged = dict(DEFAULT_OPTIONS)
    if tls is not None and tls.server_name:
        merged["grpc.ssl_target_name_override"] = tls.server_name
    merged.update(options)
    return list(merged.items())


def _tls(tls: TlsConfig | bool | None) -> TlsConfig | None:
    if tls is True:
        return TlsConfig()
    return tls or None


@overload
def open_channel(
    target: str = ...,
    *,
    tls: TlsConfig | bool | None = ...,
    asynchronous: Literal[False] = ...,
    options: Sequence[tuple[str, Any]] = ...,
) -> grpc.Channel: ...
@overload
def open_channel(
    target: str = ...,
    *,
    tls: TlsConfig | bool | None = ...,
    asynchronous: Literal[True],
    options: Sequence[tuple[str, Any]] = ...,
) -> grpc.aio.Channel: ...


def open_channel(
    target: str = DEFAULT_TARGET,
    *,
    tls: TlsConfig | bool | None = None,
    asynchronous: bool = False,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.Channel | grpc.aio.Channel:
    """A channel to `target` (`host:port`): plaintext by default, TLS with `tls=True` (system roots)
    or a TlsConfig. `asynchronous=True` gives a grpc.aio channel (create it inside the event loop
    that will use it)."""
    config = _tls(tls)
    opts = channel_options(config, options)
    if config is None:
        return (
            grpc.aio.insecure_channel(target, options=opts)
            if asynchronous
            else grpc.insecure_channel(target, options=opts)
        )
    creds = channel_credentials(config)
    if asynchronous:
        return grpc.aio.secure_channel(target, creds, options=opts)
    return grpc.secure_channel(target, creds, options=opts)


def auth_metadata(api_key: str | None) -> tuple[tuple[str, str], ...]:
    """`authorization: Bearer <key>` (behaviour §3.1), or nothing without a key.

    Sent as per-call metadata rather than call credentials: gRPC refuses call credentials on a
    plaintext channel, and keys are also used over plaintext on loopback and inside a mesh.
    """
    if api_key is None or not api_key.strip():
        return ()
    key = api_key.strip()
    if any(c.isspace() or not c.isprintable() or not c.isascii() for c in key):
        raise ValueError("an API key must be printable ASCII without white space")
    return (("authorization", f"Bearer {key}"),)


def trace_metadata() -> tuple[tuple[str, str], ...]:
    """The current OpenTelemetry context as W3C `traceparent` / `tracestate` / `baggage` metadata,
    so that the server's span of the call continues the caller's trace; nothing when no span is
    active or OpenTelemetry is not installed."""
    if _propagate is None:
        return ()
    carrier: dict[str, str] = {}
    _propagate.inject(carrier)
    return tuple(carrier.items())


try:
    from opentelemetry import propagate as _propagate
except ImportError:  # the API is a dependency of the SDK, but a trimmed environment may lack it
    _propagate = None  # type: ignore[assignment]
