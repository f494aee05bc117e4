"""The drain of a graceful shutdown: calls that arrive after it began get UNAVAILABLE, retryable.

grpcio's `server.stop(grace)` lets in-flight calls finish but answers calls that race with it
with CANCELLED, which clients (and the SDK's retry policy) rightly do not retry: in a rolling
restart about one call in a hundred was lost that way. So the server drains first, at the
application level: health turns NOT_SERVING, every new MemoryService call is refused with
UNAVAILABLE + ErrorInfo `internal_error` (retryable) + RetryInfo, which a client retries on
another replica, and only once the calls already admitted have finished (or the grace period is
over) does gRPC itself stop.
"""

from __future__ import annotations

import threading
import time

import grpc

from slowave.api.status import abort, to_status
from slowave.domain.errors import ShuttingDown


class DrainInterceptor(grpc.ServerInterceptor):
    """Counts the unary calls of the services whose name starts with `prefix`; refuses new ones
    once `begin()` was called."""

    def __init__(self, prefix: str = "/slowave.v1.") -> None:
        self.prefix = prefix
        self._lock = threading.Condition()
        self._draining = False
        self._in_flight = 0

    def begin(self) -> None:
        with self._lock:
            self._draining = True

    @property
    def draining(self) -> bool:
        return self._draining

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def wait_idle(self, timeout: float) -> bool:
        """Waits until no admitted call is running; False when `timeout` passed first."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while self._in_flight:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._lock.wait(remaining)
        return True

    def _admit(self) -> bool:
        with self._lock:
            if self._draining:
                return False
            self._in_flight += 1
            return True

    def _done(self) -> None:
        with self._lock:
            self._in_flight -= 1
            if not self._in_flight:
                self._lock.notify_all()

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if handler is None or handler.unary_unary is None or not handler_call_details.method.startswith(self.prefix):
            return handler
        behavior = handler.unary_unary

        def admitted(request, context):
            if not self._admit():
                abort(context, to_status(ShuttingDown("the server is shutting down; retry the call")))
            try:
                return behavior(request, context)
            finally:
                self._done()

        return grpc.unary_unary_rpc_method_handler(
            admitted,
            request_deserializer=handler.request_deserializer,
            response_serializer=handler.response_serializer,
        )
