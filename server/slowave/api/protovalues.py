"""Reading protobuf values the way the contract wants: enum words, Structs, Timestamps."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.descriptor import EnumDescriptor

from slowave.domain.structs import NULL

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def enum_prefix(descriptor: EnumDescriptor) -> str:
    return _CAMEL.sub("_", descriptor.name).upper() + "_"


def enum_word(descriptor: EnumDescriptor, number: int) -> str | None:
    """The lowercase value name without prefix (`partially_verified`), or None for an undefined number."""
    value = descriptor.values_by_number.get(number)
    if value is None:
        return None
    return value.name[len(enum_prefix(descriptor)) :].lower()


def enum_number(descriptor: EnumDescriptor, word: str) -> int:
    return descriptor.values_by_name[enum_prefix(descriptor) + word.upper()].number


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


def python_to_struct(data: dict, target: struct_pb2.Struct) -> None:
    for k, v in data.items():
        _set_value(target.fields[k], v)


def _set_value(target: struct_pb2.Value, v: Any) -> None:
    if isinstance(v, dict):
        target.struct_value.SetInParent()
        python_to_struct(v, target.struct_value)
    elif isinstance(v, list):
        target.list_value.SetInParent()
        for item in v:
            _set_value(target.list_value.values.add(), item)
    elif isinstance(v, bool):
        target.bool_value = v
    elif isinstance(v, (int, float)):
        target.number_value = float(v)
    elif isinstance(v, str):
        target.string_value = v
    else:
        target.null_value = struct_pb2.NULL_VALUE


def timestamp_to_datetime(ts: timestamp_pb2.Timestamp) -> datetime:
    return ts.ToDatetime(tzinfo=UTC)
