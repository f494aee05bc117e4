"""Requests whose bytes are not a valid protobuf message get INVALID_ARGUMENT, not INTERNAL.

grpcio answers a request its deserializer cannot parse (truncated or corrupt bytes, invalid UTF-8
in a string field such as an unpaired surrogate) with INTERNAL "Exception deserializing request!"
and no details, which the contract reserves for server failures (retryable). It is bad input:
this interceptor lets such bytes through the deserializer as an `Undecodable` marker, and the
handler answers the usual INVALID_ARGUMENT with ErrorInfo INVALID_INPUT and a BadRequest on the
whole request (path ""), before anything is read or written.

One cause gets a precise answer: a `google.protobuf.Struct` (`task_context`, `procedure.context`)
nested past protobuf's parse depth (≈ 33 object levels, each costing three message levels) fails to
parse at all, yet it is the depth violation the rules would report at depth 9. The raw bytes are
then walked by the request's descriptor to find the Struct field on the deepest branch, and that
field gets the rules' own depth violation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import grpc
from google.protobuf.descriptor import Descriptor

from slowave.api.status import abort, to_status
from slowave.domain.errors import InvalidInput, Violation
from slowave.domain.structs import DEPTH_VIOLATION
from slowave.v1 import memory_service_pb2

_STRUCT = "google.protobuf.Struct"
# Well past any nesting a parsable request has, well short of Python's recursion limit.
_WALK_DEPTH = 160


class Undecodable:
    """What the tolerant deserializer returns for bytes that do not parse; `too_deep` is the path of
    the Struct field nested past the parse depth, when that is why."""

    def __init__(self, error: Exception, too_deep: str | None = None) -> None:
        self.error = error
        self.too_deep = too_deep


def _tolerant(deserialize: Callable[[bytes], Any], request: Descriptor | None) -> Callable[[bytes], Any]:
    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except Exception as exc:
            too_deep = None
            if request is not None and "MaxDepth" in str(exc):
                too_deep = _deepest_struct(request, data)
            return Undecodable(exc, too_deep)

    return parse


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _deepest_struct(descriptor: Descriptor, data: bytes) -> str | None:
    """The path (`task_context`, `procedure.context`, `items[2]...`) of the Struct field on the
    deepest branch of the encoded message, or None when that branch holds no Struct."""
    try:
        _, path = _walk(descriptor, data, "", None, 0)
    except Exception:  # malformed as well as too deep: the whole-request answer stands
        return None
    return path


def _walk(descriptor: Descriptor, data: bytes, prefix: str, struct: str | None, depth: int) -> tuple[int, str | None]:
    deepest, deepest_struct = depth, struct
    if depth >= _WALK_DEPTH:
        return deepest, deepest_struct
    seen: dict[str, int] = {}
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire_type = key >> 3, key & 7
        if wire_type == 0:
            _, pos = _varint(data, pos)
        elif wire_type == 1:
            pos += 8
        elif wire_type == 5:
            pos += 4
        elif wire_type == 2:
            length, pos = _varint(data, pos)
            chunk, pos = data[pos : pos + length], pos + length
            field = descriptor.fields_by_number.get(number)
            if field is None or field.message_type is None:
                continue
            path = f"{prefix}.{field.name}" if prefix else field.name
            if field.is_repeated:
                index = seen[field.name] = seen.get(field.name, -1) + 1
                path = f"{path}[{index}]"
            inner = struct or (path if field.message_type.full_name == _STRUCT else None)
            found, found_struct = _walk(field.message_type, chunk, path, inner, depth + 1)
            if found > deepest:
                deepest, deepest_struct = found, found_struct
        else:
            raise ValueError("groups are not used by this contract")
    return deepest, deepest_struct


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
        descriptor = memory_service_pb2.DESCRIPTOR.message_types_by_name.get(message)

        def checked(request, context):
            if isinstance(request, Undecodable):
                if request.too_deep is not None:
                    violation = Violation(request.too_deep, DEPTH_VIOLATION)
                else:
                    violation = Violation(
                        "", f"the request bytes are not a valid {message} message (protobuf encoding, UTF-8 strings)"
                    )
                abort(context, to_status(InvalidInput([violation])))
            return behavior(request, context)

        return grpc.unary_unary_rpc_method_handler(
            checked,
            request_deserializer=_tolerant(handler.request_deserializer, descriptor),
            response_serializer=handler.response_serializer,
        )
