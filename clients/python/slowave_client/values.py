"""Plain Python values ↔ protobuf: enums, Struct, Timestamp, and whole messages from dicts. The
MCP bridge reads enum words and Structs with these functions too.

Dict keys are protobuf field names (the same keys the contract's JSON bridge uses), so a request can
be written once as a dict, a JSON document or keyword arguments. Enum values may be given as the
seed's lowercase names (`"used"`, `"no_effect"`), the full proto names (`"MEMORY_ASSESSMENT_USED"`)
or the proto ints. `None` means "absent" everywhere, so keyword arguments can default to it.
Every vocabulary is read from the enum descriptors.
"""

from __future__ import annotations

import math
import typing
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.descriptor import EnumDescriptor, FieldDescriptor
from google.protobuf.message import Message

from slowave_client.errors import FieldViolation, InvalidRequest

_STRUCT = "google.protobuf.Struct"
_TIMESTAMP = "google.protobuf.Timestamp"


# ------------------------------------------------------------------------------------------ enums


def enum_prefix(enum: EnumDescriptor) -> str:
    """`MEMORY_ASSESSMENT_` for MemoryAssessment: buf's STANDARD rules make the zero value
    `<PREFIX>UNSPECIFIED`, so the prefix is read from it rather than derived from the enum name."""
    zero = str(enum.values_by_number[0].name)
    prefix: str = zero[: -len("UNSPECIFIED")] if zero.endswith("UNSPECIFIED") else ""
    return prefix


def enum_word(enum: EnumDescriptor, number: int) -> str | None:
    """The seed's spelling: lowercase, without prefix (`MEMORY_STATE_COLD_START` → `cold_start`);
    None for a number the enum does not define (proto3 enums are open)."""
    value = enum.values_by_number.get(number)
    return None if value is None else str(value.name).removeprefix(enum_prefix(enum)).lower()


def enum_words(enum: EnumDescriptor) -> tuple[str, ...]:
    """The words of the defined values in declaration order, without `unspecified` (never valid input)."""
    return tuple(str(v.name).removeprefix(enum_prefix(enum)).lower() for v in enum.values if v.number)


def enum_number(enum: EnumDescriptor, word: str) -> int | None:
    """The number of the value spelled exactly `word` (`no_effect`), else None."""
    value = enum.values_by_name.get(enum_prefix(enum) + word.upper()) if word == word.lower() else None
    return None if value is None else int(value.number)


def enum_name(enum: EnumDescriptor, number: int) -> str:
    """`enum_word`, except that a value this client does not know (the contract lets the service add
    some) is returned as `unrecognized:<n>` instead of failing the whole response."""
    word = enum_word(enum, number)
    return f"unrecognized:{number}" if word is None else word


def enum_value(enum: EnumDescriptor, value: str | int) -> int:
    """`"used"`, `"USED"`, `"memory_assessment_used"`, `"no-effect"` or an int → the enum number.

    Ints pass through unchecked: proto3 enums are open and the service decides what an undefined
    number means (a per-target rejection in feedback labels, INVALID_ARGUMENT elsewhere).
    """
    if isinstance(value, bool):
        raise ValueError(f"expected a {enum.name} name or number, got a boolean")
    if isinstance(value, int):
        return value
    if not isinstance(value, str):
        raise ValueError(f"expected a {enum.name} name or number, got {type(value).__name__}")
    key = value.strip().upper().replace("-", "_").replace(" ", "_")
    prefix = enum_prefix(enum)
    for candidate in (key, prefix + key):
        found = enum.values_by_name.get(candidate)
        if found is not None:
            return int(found.number)
    choices = ", ".join(enum_words(enum))
    raise ValueError(f"unknown {enum.name} {value!r}; expected one of: {choices}")


# ------------------------------------------------------------------------- Struct and Timestamp


def to_struct(value: Mapping[str, Any]) -> struct_pb2.Struct:
    if not isinstance(value, Mapping):
        raise ValueError(f"expected an object (dict), got {type(value).__name__}")
    struct = struct_pb2.Struct()
    try:
        struct.update(value)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not representable as a protobuf Struct: {exc}") from None
    return struct


def from_struct(struct: struct_pb2.Struct) -> dict[str, Any]:
    """Struct numbers are doubles; integral ones come back as ints, as the contract's canonical JSON
    writes them (`{"retries": 3}` rather than `3.0`). A null (or a Value with no kind) is None."""
    return {key: _from_value(v) for key, v in struct.fields.items()}


def _from_value(value: struct_pb2.Value) -> Any:
    kind = value.WhichOneof("kind")
    if kind == "struct_value":
        return from_struct(value.struct_value)
    if kind == "list_value":
        return [_from_value(v) for v in value.list_value.values]
    if kind == "number_value":
        n = value.number_value
        return int(n) if math.isfinite(n) and n.is_integer() and abs(n) < 2**53 else n
    if kind == "string_value":
        return value.string_value
    if kind == "bool_value":
        return value.bool_value
    return None


def to_timestamp(value: datetime | str | timestamp_pb2.Timestamp) -> timestamp_pb2.Timestamp:
    """A timezone-aware datetime or an RFC 3339 string with an explicit offset (`Z` or `±hh:mm`).

    Naive datetimes are refused: guessing local time or UTC would silently shift provenance times.
    """
    if isinstance(value, timestamp_pb2.Timestamp):
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"not an RFC 3339 time: {value!r}") from None
    if not isinstance(value, datetime):
        raise ValueError(f"expected a datetime or an RFC 3339 string, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError("the time needs an explicit UTC offset (e.g. 2026-01-31T12:00:00Z)")
    ts = timestamp_pb2.Timestamp()
    ts.FromDatetime(value.astimezone(UTC))
    return ts


def from_timestamp(ts: timestamp_pb2.Timestamp) -> datetime:
    when: datetime = ts.ToDatetime(tzinfo=UTC)
    return when


def format_time(value: datetime) -> str:
    """RFC 3339 in UTC with `Z`, in protobuf's own JSON form of a Timestamp, as the JSON bridge
    renders times."""
    text: str = to_timestamp(value).ToJsonString()
    return text


# -------------------------------------------------------------------------------- whole messages


def build_message(message_type: type[Message], data: Mapping[str, Any] | Message, path: str = "") -> Message:
    """A new `message_type` filled from `data`; every problem is reported at once as InvalidRequest."""
    if isinstance(data, message_type):
        return data
    message = message_type()
    violations: list[FieldViolation] = []
    _fill(message, data, path, violations)
    if violations:
        raise InvalidRequest(violations)
    return message


def _join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def _fill(message: Message, data: Any, path: str, out: list[FieldViolation]) -> None:
    if isinstance(data, Message):
        if data.DESCRIPTOR is not message.DESCRIPTOR:
            out.append(FieldViolation(path, f"expected {message.DESCRIPTOR.name}, got {data.DESCRIPTOR.name}"))
        else:
            message.CopyFrom(data)
        return
    if not isinstance(data, Mapping):
        out.append(FieldViolation(path, f"expected an object (dict), got {type(data).__name__}"))
        return
    fields = message.DESCRIPTOR.fields_by_name
    for key, value in data.items():
        where = _join(path, str(key))
        field = typing.cast(FieldDescriptor | None, fields.get(key) if isinstance(key, str) else None)
        if field is None:
            out.append(FieldViolation(where, "unknown field"))
            continue
        if value is None:
            continue
        if field.is_repeated:
            _fill_list(message, field, value, where, out)
        elif field.message_type is not None:
            _fill_message_field(message, field, value, where, out)
        else:
            try:
                setattr(message, field.name, _scalar(field, value))
            except ValueError as exc:
                out.append(FieldViolation(where, str(exc)))


def _fill_list(message: Message, field: FieldDescriptor, value: Any, where: str, out: list[FieldViolation]) -> None:
    # A lone string is iterable too; taking it as a list of characters would be a silent mistake.
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        out.append(FieldViolation(where, f"expected a list, got {type(value).__name__}"))
        return
    container = getattr(message, field.name)
    for i, item in enumerate(value):
        at = f"{where}[{i}]"
        if item is None:
            out.append(FieldViolation(at, "null is not a valid list item"))
        elif field.message_type is not None:
            _fill(container.add(), item, at, out)
        else:
            try:
                container.append(_scalar(field, item))
            except ValueError as exc:
                out.append(FieldViolation(at, str(exc)))


def _fill_message_field(
    message: Message, field: FieldDescriptor, value: Any, where: str, out: list[FieldViolation]
) -> None:
    target = getattr(message, field.name)
    kind = field.message_type.full_name if field.message_type is not None else ""
    try:
        if kind == _STRUCT and not isinstance(value, Message):
            target.CopyFrom(to_struct(value))
            return
        if kind == _TIMESTAMP and not isinstance(value, Message):
            target.CopyFrom(to_timestamp(value))
            return
    except ValueError as exc:
        out.append(FieldViolation(where, str(exc)))
        return
    # An empty dict still means "present" (e.g. an empty procedure object reaches the server's rule).
    target.SetInParent()
    _fill(target, value, where, out)


_INT_TYPES = {
    FieldDescriptor.TYPE_INT32,
    FieldDescriptor.TYPE_INT64,
    FieldDescriptor.TYPE_UINT32,
    FieldDescriptor.TYPE_UINT64,
    FieldDescriptor.TYPE_SINT32,
    FieldDescriptor.TYPE_SINT64,
    FieldDescriptor.TYPE_FIXED32,
    FieldDescriptor.TYPE_FIXED64,
    FieldDescriptor.TYPE_SFIXED32,
    FieldDescriptor.TYPE_SFIXED64,
}
_INT_RANGE = {
    FieldDescriptor.TYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SINT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_SFIXED32: (-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.TYPE_FIXED32: (0, 2**32 - 1),
}


def _scalar(field: FieldDescriptor, value: Any) -> Any:
    """Type-checks one scalar; protobuf's own TypeErrors do not say which field or what was expected."""
    if field.enum_type is not None:
        return enum_value(field.enum_type, value)
    kind = field.type
    if kind == FieldDescriptor.TYPE_STRING:
        if not isinstance(value, str):
            raise ValueError(f"expected a string, got {type(value).__name__}")
        return value
    if kind == FieldDescriptor.TYPE_BOOL:
        if not isinstance(value, bool):
            raise ValueError(f"expected a boolean, got {type(value).__name__}")
        return value
    if kind in _INT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"expected an integer, got {type(value).__name__}")
        low, high = _INT_RANGE.get(kind, (-(2**63), 2**64 - 1))
        if not low <= value <= high:
            raise ValueError(f"integer out of range: {value}")
        return value
    if kind in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"expected a number, got {type(value).__name__}")
        return float(value)
    if kind == FieldDescriptor.TYPE_BYTES:
        if not isinstance(value, bytes):
            raise ValueError(f"expected bytes, got {type(value).__name__}")
        return value
    raise ValueError(f"unsupported field type {kind}")
