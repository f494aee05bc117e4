"""Reading request values the way the domain wants them: Structs as plain Python with `NULL` for a
protobuf null, Timestamps as UTC datetimes. Non-finite numbers and nulls are kept, for the domain's
rules to name (protobuf's json_format would refuse the first and blur the second)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2

from slowave.domain.structs import NULL


def struct_to_python(struct: struct_pb2.Struct) -> dict:
    return {k: value_to_python(v) for k, v in struct.fields.items()}


def value_to_python(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return struct_to_python(value.struct_value)
    if kind == "list_value":
        return [value_to_python(v) for v in value.list_value.values]
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        return value.number_value
    if kind == "bool_value":
        return value.bool_value
    return NULL  # null_value, or a Value with no kind set


def timestamp_to_datetime(ts: timestamp_pb2.Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)
