"""Contract messages in the service's words.

The service speaks the contract's closed vocabularies as the value names in lowercase without their
prefix (`partially_verified` for VERIFICATION_STATUS_PARTIALLY_VERIFIED), and reads every list of
them from the enum descriptors, so no vocabulary is restated in Python. `message` is the one place
where those words become enum numbers; Timestamps (from datetimes), Structs (from dicts), nested
messages and None (unset) are converted by the generated constructors themselves.
"""

from __future__ import annotations

from typing import Any, TypeVar

from google.protobuf.descriptor import EnumDescriptor
from google.protobuf.message import Message

M = TypeVar("M", bound=Message)


def enum_prefix(enum: EnumDescriptor) -> str:
    # buf's STANDARD lint names every zero value `<PREFIX>UNSPECIFIED`.
    return str(enum.values_by_number[0].name).removesuffix("UNSPECIFIED")


def enum_word(enum: EnumDescriptor, number: int) -> str | None:
    """`partially_verified`, or None for a number the enum does not define (proto3 enums are open)."""
    value = enum.values_by_number.get(number)
    return None if value is None else str(value.name).removeprefix(enum_prefix(enum)).lower()


def enum_words(enum: EnumDescriptor, *, with_unspecified: bool = False) -> tuple[str, ...]:
    """The defined values in declaration order; the zero value only where a field reads it as a default."""
    return tuple(
        str(v.name).removeprefix(enum_prefix(enum)).lower() for v in enum.values if v.number or with_unspecified
    )


def enum_number(enum: EnumDescriptor, word: str) -> int:
    value = enum.values_by_name.get(enum_prefix(enum) + word.upper())
    if value is None:
        raise ValueError(f"{enum.full_name} has no value {word!r}")
    return int(value.number)


def message(message_type: type[M], **fields: Any) -> M:
    """A `message_type` whose enum fields may be given as words. A name that is not a field of the
    message is an error, never dropped."""
    descriptor = message_type.DESCRIPTOR
    for name, value in fields.items():
        field = descriptor.fields_by_name.get(name)
        if field is None:
            raise ValueError(f"{descriptor.full_name} has no field {name!r}")
        if field.enum_type is not None and isinstance(value, str):
            try:
                fields[name] = enum_number(field.enum_type, value)
            except ValueError as exc:
                raise ValueError(f"{descriptor.full_name}.{name}: {exc}") from None
    return message_type(**fields)
