"""Use-case results → protobuf messages, generically: result dataclasses carry the proto field
names and enum words, so one function maps them all."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any, TypeVar

from google.protobuf import struct_pb2, timestamp_pb2
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from slowave.api.protovalues import enum_number, python_to_struct

M = TypeVar("M", bound=Message)


def to_message(obj: Any, message: M) -> M:
    """Fills `message` from a result dataclass; None leaves a field unset."""
    fields = message.DESCRIPTOR.fields_by_name
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if value is None or f.name not in fields:
            continue
        fd = fields[f.name]
        if fd.is_repeated:
            target = getattr(message, f.name)
            for item in value:
                if fd.type == FieldDescriptor.TYPE_MESSAGE:
                    _fill(target.add(), item)
                elif fd.type == FieldDescriptor.TYPE_ENUM:
                    target.append(enum_number(fd.enum_type, item))
                else:
                    target.append(item)
        elif fd.type == FieldDescriptor.TYPE_MESSAGE:
            _fill(getattr(message, f.name), value)
        elif fd.type == FieldDescriptor.TYPE_ENUM:
            setattr(message, f.name, enum_number(fd.enum_type, value))
        else:
            setattr(message, f.name, value)
    return message


def _fill(target: Message, value: Any) -> None:
    if isinstance(target, timestamp_pb2.Timestamp):
        assert isinstance(value, datetime)
        target.FromDatetime(value)
    elif isinstance(target, struct_pb2.Struct):
        target.SetInParent()
        python_to_struct(value, target)
    else:
        target.SetInParent()
        to_message(value, target)
