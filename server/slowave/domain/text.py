"""Text rules shared by every request: nonblank, byte and character limits, claim equivalence."""

from __future__ import annotations

import re
from collections.abc import Sequence

from slowave.domain.errors import Violation

TEXT_LIMIT_BYTES = 4096
CONTENT_LIMIT_BYTES = 16384
TRAJECTORY_SUMMARY_LIMIT_CHARS = 1000
IDENTIFIER_LIMIT_CHARS = 256
LIST_LIMIT = 200
BATCH_LIMIT = 100
TRAJECTORY_LIMIT = 32

_WHITESPACE = re.compile(r"\s+")
NUL = "\x00"
NUL_VIOLATION = "must not contain the NUL character (U+0000), which PostgreSQL text cannot store"


def is_blank(value: str | None) -> bool:
    return value is None or not value.strip()


def utf8_len(value: str) -> int:
    return len(value.encode("utf-8"))


def normalize_claim(text: str) -> str:
    """The equivalence of claims (behaviour §6): trimmed, white space collapsed, case folded."""
    return _WHITESPACE.sub(" ", text.strip()).casefold()


def check_text(
    violations: list[Violation],
    path: str,
    value: str | None,
    *,
    required: bool,
    limit_bytes: int = TEXT_LIMIT_BYTES,
) -> str | None:
    """Validates one free-text field; returns it trimmed, or None when absent or blank."""
    if value is not None and utf8_len(value) > limit_bytes:
        violations.append(Violation(path, f"must be at most {limit_bytes} bytes of UTF-8"))
        return None
    if value is not None and NUL in value:
        violations.append(Violation(path, NUL_VIOLATION))
        return None
    if is_blank(value):
        if required:
            violations.append(Violation(path, "must not be blank"))
        return None
    assert value is not None  # is_blank(None) is true
    return value.strip()


def check_identifier(violations: list[Violation], path: str, value: str | None, *, required: bool) -> str | None:
    """Identifiers are trimmed, at most 256 characters, and never rejected for their format."""
    if value is not None and len(value) > IDENTIFIER_LIMIT_CHARS:
        violations.append(Violation(path, f"must be at most {IDENTIFIER_LIMIT_CHARS} characters"))
        return None
    if value is not None and NUL in value:
        violations.append(Violation(path, NUL_VIOLATION))
        return None
    if is_blank(value):
        if required:
            violations.append(Violation(path, "is required"))
        return None
    assert value is not None  # is_blank(None) is true
    return value.strip()


def check_list_length(
    violations: list[Violation], path: str, values: Sequence[object], limit: int = LIST_LIMIT
) -> bool:
    if len(values) > limit:
        violations.append(Violation(path, f"must have at most {limit} entries"))
        return False
    return True


def clean_text_list(violations: list[Violation], path: str, values: list[str]) -> list[str]:
    """A list of free texts: at most 200, each at most 4 KiB, trimmed, blank entries dropped."""
    if not check_list_length(violations, path, values):
        return []
    cleaned = []
    for i, value in enumerate(values):
        text = check_text(violations, f"{path}[{i}]", value, required=False)
        if text is not None:
            cleaned.append(text)
    return cleaned
