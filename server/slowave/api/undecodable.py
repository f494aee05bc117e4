"""Requests whose bytes are not a valid protobuf message get INVALID_ARGUMENT, not INTERNAL.

grpcio answers a request its deserializer cannot parse (truncated or corrupt bytes, invalid UTF-8
in a string field such as an unpaired surrogate) with INTERNAL "Exception deserializing request!"
and no details, which the contract reserves for server failures (retryable). It is bad input:
this interceptor lets such bytes through the deserializer as an `Undecodable` marker, and the
handler answers the usual INVALID_ARGUMENT with ErrorInfo INVALID_INPUT and a BadRequest on the
whole request (path ""), before anything is read or written.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc

from slowave.api.status import abort, to_status
from slowave.domain.errors import InvalidInput, Violation


class Undecodable:
    """What the tolerant deserializer returns for bytes that do not parse."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _tolerant(deserialize: Callable[[bytes], Any]) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:
            return Undecodable(exc)

    return parse


class UndecodableRequestInterceptor(grpc.ServerInterceptor):
    """Applies to the unary methods of the services whose name starts with `prefix`."""

    def __init__(self, prefix: str = "/slowave.v1.") -> None:
        self.prefix = prefix

    def intercept_service(self, continuation, handler_call_details):
        handler = continuation(handler_call_details)
        if (
            handler is None
            or handler.unary_unary is None
            or handler.request_deserializer is None
            or not handler_call_details.method.startswith(self.prefix)
        ):
            return handler
        behavior = handler.unary_unary
        message = handler_call_details.method.rsplit("/", 1)[-1] + "Request"

        def checked(request, context):
            if isinstance(request, Undecodable):
                abort(
                    context,
                    to_status(
                        InvalidInput(
                            [
                                Violation(
                                    "",
                                    f"the request bytes are not a valid {message} message (protobuf encoding, UTF-8 strings)",
                                )
                            ]
                        )
                    ),
                )
            return behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked,
            request_deserializer=_tolerant(handler.request_deserializer),
            response_serializer=handler.response_serializer,
        )
