"""Python SDK for the Slowave MemoryService (`slowave.v1`): blocking and asyncio clients.

    from slowave_client import Client
    with Client("127.0.0.1:50051") as memory:
        task = memory.activate("…task…", "…goal…", "project:my-repo")

Modules: `client` / `aio` (the clients), `results` (what calls return), `errors` (what they raise),
`retry` (which failures are retried, and how), `connection` (TLS, API key), `values` (plain values ↔
protobuf), `calls` (one prepared request per RPC), `cli` (the `slowave` command).
"""

from __future__ import annotations

from slowave_client.aio import AsyncClient
from slowave_client.client import Client
from slowave_client.connection import TlsConfig, open_channel
from slowave_client.errors import (
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    FieldViolation,
    IncompleteFeedbackError,
    InternalError,
    InvalidArgument,
    InvalidRequest,
    NotFound,
    OutstandingRetrieval,
    PermissionDenied,
    ResourceExhausted,
    SlowaveError,
    Unauthenticated,
    Unavailable,
    Unimplemented,
)
from slowave_client.retry import NO_RETRIES, RetryEvent, RetryPolicy

__all__ = [
    "AsyncClient",
    "Cancelled",
    "Client",
    "DeadlineExceeded",
    "FailedPrecondition",
    "FieldViolation",
    "IncompleteFeedbackError",
    "InternalError",
    "InvalidArgument",
    "InvalidRequest",
    "NO_RETRIES",
    "NotFound",
    "OutstandingRetrieval",
    "PermissionDenied",
    "ResourceExhausted",
    "RetryEvent",
    "RetryPolicy",
    "SlowaveError",
    "TlsConfig",
    "Unauthenticated",
    "Unavailable",
    "Unimplemented",
    "open_channel",
]
