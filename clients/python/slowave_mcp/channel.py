"""The bridge's one connection to MemoryService: channel, credentials, per-call metadata."""

from __future__ import annotations

from dataclasses import dataclass

import grpc
from google.protobuf.message import Message

from slowave.v1 import memory_service_pb2_grpc as pb_grpc

DEFAULT_TARGET = "127.0.0.1:50051"
DEFAULT_TIMEOUT_SECONDS = 30.0


@dataclass
class MemoryServiceConnection:
    channel: grpc.Channel
    stub: pb_grpc.MemoryServiceStub
    metadata: tuple[tuple[str, str], ...]
    timeout: float

    def invoke(self, rpc: str, request: Message) -> Message:
        """One unary call; raises grpc.RpcError. Never retried here: Remember, Feedback and Commit
        are not idempotent, and the envelope's `retryable` tells the agent what to do instead."""
        return getattr(self.stub, rpc)(request, timeout=self.timeout, metadata=self.metadata)

    def close(self) -> None:
        self.channel.close()


def connect(
    target: str = DEFAULT_TARGET,
    *,
    api_key: str | None = None,
    tls: bool = False,
    root_ca: bytes | None = None,
    timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> MemoryServiceConnection:
    """Insecure by default (a local server); TLS with the system roots, or with `root_ca` (PEM)."""
    if tls or root_ca is not None:
        channel = grpc.secure_channel(target, grpc.ssl_channel_credentials(root_certificates=root_ca))
    else:
        channel = grpc.insecure_channel(target)
    # Metadata rather than call credentials: gRPC refuses call credentials on an insecure channel,
    # and a key is still useful against a plaintext server on a trusted network.
    metadata = (("authorization", f"Bearer {api_key}"),) if api_key else ()
    return MemoryServiceConnection(channel, pb_grpc.MemoryServiceStub(channel), metadata, timeout)
