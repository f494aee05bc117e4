"""JSON tool arguments → protobuf request messages, strictly (behaviour §4.6, "JSON → protobuf").

Keys are the protobuf field names; an unknown key, a `null`, or a value of the wrong JSON type is a
problem at its path (`items[1].memory_feedback[0].assessment`), and every problem of a message is
collected, never just the first. Enum values are the lowercase value names without their prefix.
The walk is driven by the message descriptors, so it cannot drift from the `.proto` files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from slowave_client.values import enum_number, enum_words

EXTRA_KEY = "extra input is not permitted"

# Contract 4.6: in these feedback label fields an unknown string (or `unspecified`) is sent as the
# UNSPECIFIED value, present, so the service rejects that one entry (10.2) and its siblings land.
LABEL_FIELDS = frozenset(
    {
        ("slowave.v1.MemoryFeedbackEntry", "assessment"),
        ("slowave.v1.MemoryFeedbackEntry", "stale_reason"),
        ("slowave.v1.MemoryFeedbackEntry", "relevance"),
        ("slowave.v1.MemoryFeedbackEntry", "effect"),
        ("slowave.v1.ProcedureFeedbackEntry", "use"),
        ("slowave.v1.ProcedureFeedbackEntry", "effect"),
    }
)

_INT_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (-(2**31), 2**31 - 1),
    FieldDescriptor.CPPTYPE_INT64: (-(2**63), 2**63 - 1),
    FieldDescriptor.CPPTYPE_UINT32: (0, 2**32 - 1),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}

# RFC 3339 `date-time`: the offset is mandatory (`Z` or ±hh:mm); a bare local time is ambiguous.
_RFC3339 = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|([+-])(\d{2}):(\d{2}))$")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Problem:
    """One field violation, in the service's terms: protobuf path and human description."""

    path: str
    message: str


def join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def fill_message(
    msg: Message, data: Any, path: str, problems: list[Problem], *, skip: frozenset[str] = frozenset()
) -> None:
    """Sets every key of the JSON object `data` on `msg`; keys in `skip` are left to the caller."""
    if not isinstance(data, dict):
        problems.append(Problem(path, "must be an object"))
        return
    fields = msg.DESCRIPTOR.fields_by_name
    for key, value in data.items():
        if key in skip:
            continue
        p = join(path, key)
        fd = fields.get(key)
        if fd is None:
            problems.append(Problem(p, EXTRA_KEY))
        elif value is None:
            problems.append(Problem(p, "must not be null"))
        elif fd.is_repeated:
            _fill_list(msg, fd, value, p, problems)
        elif fd.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
            _fill_submessage(getattr(msg, key), value, p, problems)
        else:
            converted = _scalar(msg, fd, value, p, problems)
            if converted is not None:
                _assign(problems, p, lambda: setattr(msg, key, converted))


def _fill_list(msg: Message, fd: FieldDescriptor, value: Any, path: str, problems: list[Problem]) -> None:
    if not isinstance(value, list):
        problems.append(Problem(path, "must be an array"))
        return
    target = getattr(msg, fd.name)
    for i, item in enumerate(value):
        p = f"{path}[{i}]"
        if item is None:
            problems.append(Problem(p, "must not be null"))
        elif fd.cpp_type == FieldDescriptor.CPPTYPE_MESSAGE:
            _fill_submessage(target.add(), item, p, problems)
        else:
            converted = _scalar(msg, fd, item, p, problems)
            if converted is not None:
                _assign(problems, p, lambda: target.append(converted))


def _fill_submessage(sub: Message, value: Any, path: str, problems: list[Problem]) -> None:
    if isinstance(sub, timestamp_pb2.Timestamp):
        parse_timestamp(sub, value, path, problems)
    elif isinstance(sub, struct_pb2.Struct):
        if not isinstance(value, dict):
            problems.append(Problem(path, "must be an object"))
            return
        # Struct contents are the service's to judge (3.5): nulls and nesting pass through as sent.
        _assign(problems, path, lambda: (sub.SetInParent(), sub.update(value)))
    else:
        sub.SetInParent()  # a present `{}` sets the message, as the key's presence says
        fill_message(sub, value, path, problems)


def _scalar(msg: Message, fd: FieldDescriptor, value: Any, path: str, problems: list[Problem]) -> Any:
    """The protobuf value for one JSON scalar, or None after recording why it is unacceptable."""
    cpp = fd.cpp_type
    if cpp == FieldDescriptor.CPPTYPE_ENUM:
        return _enum(msg, fd, value, path, problems)
    if cpp == FieldDescriptor.CPPTYPE_STRING:
        if isinstance(value, str):
            return value
        problems.append(Problem(path, "must be a string"))
    elif cpp == FieldDescriptor.CPPTYPE_BOOL:
        if isinstance(value, bool):
            return value
        problems.append(Problem(path, "must be a boolean"))
    elif cpp in _INT_RANGES:
        # JSON types must match: `3.0`, `"3"` and `true` are not integers (bool is an int in Python).
        if not isinstance(value, int) or isinstance(value, bool):
            problems.append(Problem(path, "must be an integer"))
            return None
        low, high = _INT_RANGES[cpp]
        if not low <= value <= high:
            problems.append(Problem(path, f"must be an integer between {low} and {high}"))
            return None
        return value
    else:  # double / float
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return float(value)
        problems.append(Problem(path, "must be a number"))
    return None


def _enum(msg: Message, fd: FieldDescriptor, value: Any, path: str, problems: list[Problem]) -> int | None:
    # `unspecified` is what an absent value means, never valid input.
    number = enum_number(fd.enum_type, value) if isinstance(value, str) and value != "unspecified" else None
    if number is not None:
        return number
    if isinstance(value, str) and (msg.DESCRIPTOR.full_name, fd.name) in LABEL_FIELDS:
        return 0
    problems.append(Problem(path, f"must be one of: {', '.join(enum_words(fd.enum_type))}"))
    return None


def _assign(problems: list[Problem], path: str, action: Any) -> None:
    # The runtime refuses a few JSON-legal values (lone surrogates, numbers beyond a double).
    try:
        action()
    except (ValueError, TypeError, OverflowError) as exc:
        problems.append(Problem(path, f"is not a valid value ({exc})"))


def parse_timestamp(target: timestamp_pb2.Timestamp, value: Any, path: str, problems: list[Problem]) -> None:
    """RFC 3339 with an explicit offset (`Z` or ±hh:mm), e.g. `2026-08-20T09:30:00Z`."""
    match = _RFC3339.match(value) if isinstance(value, str) else None
    if match is None:
        problems.append(
            Problem(path, "must be an RFC 3339 date-time with an explicit offset, e.g. 2026-08-20T09:30:00Z")
        )
        return
    year, month, day, hour, minute, second, fraction, sign, off_h, off_m = match.groups()
    try:
        offset = timedelta(0)
        if sign:
            if int(off_h) > 23 or int(off_m) > 59:
                raise ValueError("offset out of range")
            offset = timedelta(hours=int(off_h), minutes=int(off_m)) * (1 if sign == "+" else -1)
        local = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=timezone(offset))
        delta = local.astimezone(UTC) - _EPOCH
    except (ValueError, OverflowError):
        problems.append(Problem(path, "is not a valid date-time"))
        return
    target.seconds = delta.days * 86400 + delta.seconds
    target.nanos = int((fraction or "").ljust(9, "0")[:9])
