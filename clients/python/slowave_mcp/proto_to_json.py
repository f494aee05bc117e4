"""Protobuf responses and gRPC statuses → the seed's JSON (behaviour §4.6, "Protobuf → JSON", "Errors").

Messages render with their protobuf field names; enums as lowercase words without prefix;
Timestamps as RFC 3339 UTC with `Z`; Structs as objects; non-`optional` scalars and all lists always
present; `optional` and message fields only when set. A failed call becomes
`{"ok": false, "error": {code, message, retryable[, outstanding][, field_errors]}}`.
"""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.rpc import status_pb2
from grpc_status import rpc_status

from slowave_client.errors import unpack_details
from slowave_client.values import enum_word, from_struct


def render_message(msg: Message) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for fd in msg.DESCRIPTOR.fields:
        if fd.is_repeated:
            out[fd.name] = [_value(fd, v) for v in getattr(msg, fd.name)]
        elif fd.has_presence:
            if msg.HasField(fd.name):
                out[fd.name] = _value(fd, getattr(msg, fd.name))
        else:
            out[fd.name] = _value(fd, getattr(msg, fd.name))
    return out


def _value(fd: FieldDescriptor, value: Any) -> Any:
    if fd.enum_type is not None:
        word = enum_word(fd.enum_type, value)
        return value if word is None else word  # an undefined number (enums are open) stays a number
    if fd.message_type is None:
        return value
    if fd.message_type.full_name == "google.protobuf.Timestamp":
        return value.ToJsonString()
    if fd.message_type.full_name == "google.protobuf.Struct":
        return from_struct(value)
    return render_message(value)


# ------------------------------------------------------------------------------------------ errors


def error(code: str, message: str, retryable: bool, **extra: Any) -> dict[str, Any]:
    return {"ok": False, "error": {"code": code, "message": message, "retryable": retryable, **extra}}


def render_rpc_error(err: grpc.RpcError) -> dict[str, Any]:
    """A failed call (an RpcError of the sync or aio API) as the seed's error envelope."""
    code = err.code() if callable(getattr(err, "code", None)) else grpc.StatusCode.UNKNOWN
    message = (err.details() if callable(getattr(err, "details", None)) else None) or str(code)
    try:
        status = rpc_status.from_call(err)
    except ValueError:  # details whose code disagrees with the call's: trust neither
        status = None
    return render_status(code, message, status)


def render_status(code: grpc.StatusCode, message: str, status: status_pb2.Status | None) -> dict[str, Any]:
    details = unpack_details(status)
    info, bad, incomplete = details.info, details.bad_request, details.incomplete
    if info is None or "code" not in info.metadata:
        return _without_error_info(code, message)
    extra: dict[str, Any] = {}
    if info.metadata["code"] == "incomplete_feedback":
        extra["outstanding"] = [
            {"retrieval_id": o.retrieval_id, "memory_ids": list(o.memory_ids), "procedure_ids": list(o.procedure_ids)}
            for o in (incomplete.outstanding if incomplete is not None else ())
        ]
    if bad is not None:
        extra["field_errors"] = [{"path": v.field, "message": v.description} for v in bad.field_violations]
    return error(info.metadata["code"], message, info.metadata.get("retryable") == "true", **extra)


def _without_error_info(code: grpc.StatusCode, message: str) -> dict[str, Any]:
    """Statuses gRPC made itself, or an unreachable server (4.6)."""
    if code == grpc.StatusCode.RESOURCE_EXHAUSTED and "larger than" in message.lower():
        # gRPC's own size refusal ("Received message larger than max (…)"): resending the same
        # request can never work, so it is the agent's input to fix (4.1). Any other bare
        # RESOURCE_EXHAUSTED (e.g. the concurrency limit) falls under the general rule below.
        return error("invalid_input", message, False)
    return error("internal_error", message, True)
