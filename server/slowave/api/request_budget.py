"""A bound on the request bytes being worked on at once, and their memory given back afterwards.

Sixty concurrent requests of 7.9 MB each, all refused by validation, used to leave the process
≈ 400 MB resident: each is held as bytes, parsed into a message, and its strings copied and
checked, in sixty threads at once, and glibc keeps what its per-thread arenas grew to. Large
requests (`LARGE_REQUEST_BYTES` and up) therefore share a budget of `IN_FLIGHT_BYTES`: one that
does not fit is refused before it is parsed, with RESOURCE_EXHAUSTED + ErrorInfo
`resource_exhausted` (retryable) + RetryInfo, the contract's overload answer; and when a large
request is done the allocator is asked to return free memory to the system (`malloc_trim`).
Requests below the threshold — all ordinary traffic — are neither counted nor delayed.
"""

from __future__ import annotations

import threading
from typing import Any

import grpc

from slowave.api.allocator import trimmer
from slowave.api.status import abort, to_status
from slowave.domain.errors import Overloaded

LARGE_REQUEST_BYTES = 256 * 1024
IN_FLIGHT_BYTES = 32 * 1024 * 1024  # four requests of the 8 MiB maximum


class _OverBudget:
    """What the deserializer returns for a large request that does not fit the budget."""


class _Reserved:
    """A parsed large request and the bytes it holds of the budget."""

    def __init__(self, request: Any, size: int) -> None:
        self.request, self.size = request, size


class RequestBudgetInterceptor(grpc.ServerInterceptor):
    def __init__(self, in_flight_bytes: int = IN_FLIGHT_BYTES, prefix: str = "/slowave.v1.") -> None:
        self.capacity = in_flight_bytes
        self.prefix = prefix
        self._used = 0
        self._lock = threading.Lock()
        self._trim = trimmer()

    @property
    def used(self) -> int:
        return self._used

    def _reserve(self, size: int) -> bool:
        with self._lock:
            if self._used + size > self.capacity:
                return False
            self._used += size
            return True

    def _release(self, size: int) -> None:
        with self._lock:
            self._used -= size
        self._trim()

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if (
            handler is None
            or handler.unary_unary is None
            or handler.request_deserializer is None
            or not handler_call_details.method.startswith(self.prefix)
        ):
            return handler
        behavior, deserialize = handler.unary_unary, handler.request_deserializer

        def parse(data: bytes) -> Any:
            size = len(data)
            if size < LARGE_REQUEST_BYTES:
                return deserialize(data)
            if not self._reserve(size):
                return _OverBudget()
            try:
                return _Reserved(deserialize(data), size)
            except BaseException:
                self._release(size)
                raise

        def bounded(request, context):
            if isinstance(request, _OverBudget):
                abort(context, to_status(Overloaded("too many large requests at once; retry the call")))
            if not isinstance(request, _Reserved):
                return behavior(request, context)
            try:
                return behavior(request.request, context)
            finally:
                self._release(request.size)

        return grpc.unary_unary_rpc_method_handler(
            bounded, request_deserializer=parse, response_serializer=handler.response_serializer
        )
