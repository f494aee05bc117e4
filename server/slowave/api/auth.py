"""Who may call, and over what: API keys → tenant (behaviour §3.1), TLS / mTLS, the loopback-only rule.

The interceptor authenticates every call before anything else of the request is looked at (behaviour §4.5
stage 1) and puts the tenant into `request_context.tenant`, inside the handler thread, for the
servicer. Health checks are exempt: orchestrators and load balancers probe without credentials, and
health tells nothing about any tenant. Server reflection is not exempt once keys exist: it is part
of the API surface an anonymous caller has no business enumerating (`buf curl` sends keys with
`-H 'authorization: Bearer …'`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc

from slowave.api import request_context
from slowave.api.status import abort, internal_status, to_status
from slowave.domain.errors import DomainError
from slowave.domain.network import is_loopback_listen_address
from slowave.service.context import ServiceContext
from slowave.service.tenants import Authenticator, TenancyError, sync_configured_keys

log = logging.getLogger(__name__)

UNAUTHENTICATED_SERVICES = ("/grpc.health.v1.Health/",)


class StartupRefused(RuntimeError):
    """The configuration is unsafe or unusable; the message tells the operator what to change."""


class AuthInterceptor(grpc.ServerInterceptor):
    def __init__(self, authenticator: Authenticator, on_refused: Callable[[DomainError], None] | None = None) -> None:
        self.authenticator = authenticator
        self.on_refused = on_refused or (lambda _error: None)

    def _authenticate(self, context: grpc.ServicerContext) -> None:
        """Sets the caller's tenant, or aborts the call with the contract's status and ErrorInfo."""
        values = [v for k, v in (context.invocation_metadata() or ()) if k == "authorization"]
        try:
            tenant = self.authenticator.tenant([v if isinstance(v, str) else v.decode("latin-1") for v in values])
        except DomainError as exc:
            self.on_refused(exc)
            abort(context, to_status(exc))
        except Exception:
            log.exception("authentication failed unexpectedly")
            abort(context, internal_status())
        # Not reset here: the access-log interceptor (outermost) names it in the line it writes after
        # the call and then resets it; every call through here overwrites it before its handler runs.
        request_context.tenant.set(tenant)

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        if handler_call_details.method.startswith(UNAUTHENTICATED_SERVICES):
            return handler
        authenticate = self._authenticate
        if handler.unary_unary is not None:
            behavior = handler.unary_unary

            def unary(request, context):
                authenticate(context)
                return behavior(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:  # server reflection
            stream_behavior = handler.stream_stream

            def stream(request_iterator, context):
                authenticate(context)
                return stream_behavior(request_iterator, context)

            return grpc.stream_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        # No other kind of method is served; refuse rather than pass one through unchecked.
        return None


@dataclass
class Security:
    """What start_server needs: the interceptor and how to bind the port."""

    interceptor: AuthInterceptor
    credentials: grpc.ServerCredentials | None

    def add_port(self, server: grpc.Server, addr: str) -> int:
        if self.credentials is None:
            return server.add_insecure_port(addr)
        return server.add_secure_port(addr, self.credentials)


def prepare_security(ctx: ServiceContext, on_refused: Callable[[DomainError], None] | None = None) -> Security:
    """Stores the configured keys' hashes, loads TLS material and applies the loopback-only rule.

    Raises StartupRefused before anything listens.
    """
    settings = ctx.settings
    try:
        sync_configured_keys(ctx, settings.api_keys)
    except TenancyError as exc:
        raise StartupRefused(str(exc)) from None
    authenticator = Authenticator(ctx, settings.api_keys, settings.auth_cache_seconds)
    credentials = server_credentials(settings.tls_cert_file, settings.tls_key_file, settings.tls_client_ca_file)
    check_listen_address(
        settings.listen_addr,
        keys_required=authenticator.required(),
        client_certificates=settings.tls_client_ca_file is not None,
        allow_insecure=settings.allow_insecure_bind,
    )
    if authenticator.required():
        log.info(
            "authentication: API keys required (health checks exempt); key lookups cached %.0fs",
            settings.auth_cache_seconds,
        )
    else:
        log.info("authentication: none configured; every call runs as tenant %r", settings.tenant)
    return Security(AuthInterceptor(authenticator, on_refused), credentials)


def check_listen_address(addr: str, *, keys_required: bool, client_certificates: bool, allow_insecure: bool) -> None:
    """An open server (no keys, no client certificates) listens on loopback only, unless opted in.

    Server-only TLS does not count: it encrypts the connection but lets anyone connect.
    """
    if keys_required or client_certificates or allow_insecure or is_loopback_listen_address(addr):
        return
    raise StartupRefused(
        f"refusing to listen on {addr}: no API key is configured and no client certificate is required, so anyone "
        "who can reach this address could read and write every memory. Configure keys (SLOWAVE_API_KEYS_FILE or "
        "SLOWAVE_API_KEYS), require client certificates (SLOWAVE_TLS_CLIENT_CA_FILE), listen on a loopback "
        "address (127.0.0.1, [::1], localhost), or set SLOWAVE_ALLOW_INSECURE_BIND=1 if something in front of "
        "the server (a mesh, a firewall) already restricts who reaches it."
    )


def server_credentials(
    cert_file: str | None, key_file: str | None, client_ca_file: str | None
) -> grpc.ServerCredentials | None:
    """TLS with the given certificate chain and key; with a client CA, client certificates are required."""
    if cert_file is None and key_file is None:
        if client_ca_file is not None:
            raise StartupRefused("SLOWAVE_TLS_CLIENT_CA_FILE needs SLOWAVE_TLS_CERT_FILE and SLOWAVE_TLS_KEY_FILE")
        return None
    if cert_file is None or key_file is None:
        raise StartupRefused("TLS needs both SLOWAVE_TLS_CERT_FILE and SLOWAVE_TLS_KEY_FILE")
    cert, key = _read(cert_file, "SLOWAVE_TLS_CERT_FILE"), _read(key_file, "SLOWAVE_TLS_KEY_FILE")
    client_ca = _read(client_ca_file, "SLOWAVE_TLS_CLIENT_CA_FILE") if client_ca_file is not None else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def _read(path: str, variable: str) -> bytes:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise StartupRefused(f"{variable}={path}: cannot read it ({exc.strerror})") from None
    if b"-----BEGIN" not in data:
        raise StartupRefused(f"{variable}={path}: not a PEM file")
    return data
