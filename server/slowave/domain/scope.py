"""Scopes (behaviour §3.2): `kind:id`, trimmed, compared exactly."""

from __future__ import annotations

from slowave.domain.errors import Violation
from slowave.domain.text import IDENTIFIER_LIMIT_CHARS, NUL, NUL_VIOLATION


def check_scope(violations: list[Violation], value: str, path: str = "scope") -> str | None:
    scope = value.strip()
    if len(value) > IDENTIFIER_LIMIT_CHARS:
        violations.append(Violation(path, f"must be at most {IDENTIFIER_LIMIT_CHARS} characters"))
        return None
    if NUL in value:
        violations.append(Violation(path, NUL_VIOLATION))
        return None
    kind, sep, ident = scope.partition(":")
    if len(scope) < 3 or not sep or not kind.strip() or not ident.strip():
        violations.append(Violation(path, "must be `kind:id` with both parts nonblank, e.g. `project:my-repo`"))
        return None
    return scope


def fragmentation_key(scope: str) -> str:
    """Scopes that differ only by letter case or `-` versus `_` share this key."""
    return scope.casefold().replace("-", "_")
