"""Structured context (behaviour §3.5) and procedure applicability matching (behaviour §12.4).

Values arrive as plain Python: dict, list, str, float (or int), bool, and `NULL` for a protobuf
NullValue (kept distinct from "absent" so the rules can name it).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from slowave.domain.errors import Violation
from slowave.domain.text import NUL, NUL_VIOLATION

MAX_DEPTH = 8
DEPTH_VIOLATION = f"must be nested at most {MAX_DEPTH} levels deep"
MAX_CANONICAL_BYTES = 16384
_TASK_KEY = re.compile(r"^[a-z][a-z0-9_.:-]{0,63}$")
_PROCEDURE_KEY_DISALLOWED = re.compile(r"[^a-z0-9_.:-]+")


class _Null:
    def __repr__(self) -> str:
        return "NULL"


NULL: Any = _Null()


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _is_container(v: Any) -> bool:
    return isinstance(v, (dict, list))


def depth(value: Any) -> int:
    """Top-level object = 1; each nested object, and each list holding a container, adds 1."""
    if isinstance(value, dict):
        return 1 + max((depth(v) for v in value.values()), default=0)
    if isinstance(value, list):
        inner = max((depth(v) for v in value), default=0)
        return inner + (1 if any(_is_container(v) for v in value) else 0)
    return 0


def _canonical_value(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _canonical_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_canonical_value(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def canonical_json(value: Any) -> str:
    """Keys sorted by code point, no white space, non-ASCII unescaped, integral numbers as integers."""
    return json.dumps(_canonical_value(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _dedup(items: list[Any]) -> list[Any]:
    seen: set[str] = set()
    out = []
    for item in items:
        key = canonical_json(item)
        if key not in seen:
            seen.add(key)
            out.append(item)
    return out


def _check_size(violations: list[Violation], path: str, value: dict[str, Any]) -> None:
    if depth(value) > MAX_DEPTH:
        violations.append(Violation(path, DEPTH_VIOLATION))
        return
    size = len(canonical_json(value).encode("utf-8"))
    if size > MAX_CANONICAL_BYTES:
        violations.append(Violation(path, f"canonical JSON is {size} bytes; at most {MAX_CANONICAL_BYTES} allowed"))


def _nul_violations(violations: list[Violation], path: str, value: Any) -> bool:
    """U+0000 in any key or string is refused, as in every other text field (PostgreSQL text
    cannot store it); True when one was found."""
    found = False
    if isinstance(value, dict):
        for key, item in value.items():
            sub = path + "." + key.replace(NUL, "\\u0000")  # the path names the key readably
            if NUL in key:
                violations.append(Violation(sub, NUL_VIOLATION))
                found = True
            found = _nul_violations(violations, sub, item) or found
    elif isinstance(value, list):
        for i, item in enumerate(value):
            found = _nul_violations(violations, f"{path}[{i}]", item) or found
    elif isinstance(value, str) and NUL in value:
        violations.append(Violation(path, NUL_VIOLATION))
        found = True
    return found


def normalize_task_context(violations: list[Violation], path: str, value: dict[str, Any]) -> dict[str, Any]:
    """Strict rules for `task_context`: every deviation is a violation at its path."""
    start = len(violations)
    if depth(value) > MAX_DEPTH:
        violations.append(Violation(path, DEPTH_VIOLATION))
        return {}
    if _nul_violations(violations, path, value):
        return {}
    normalized = _normalize_task_object(violations, path, value)
    if len(violations) == start:
        _check_size(violations, path, normalized)
    return normalized


def _bad_scalar(v: Any) -> str | None:
    if v is NULL:
        return "null is not allowed"
    if isinstance(v, float) and not math.isfinite(v):
        return "non-finite numbers are not allowed"
    return None


def _normalize_task_object(violations: list[Violation], path: str, obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for raw_key, v in obj.items():
        key = raw_key.strip().lower()
        sub = f"{path}.{raw_key}"
        if not _TASK_KEY.match(key):
            violations.append(Violation(sub, "key must match ^[a-z][a-z0-9_.:-]{0,63}$ after trimming and lowercasing"))
            continue
        if key in out:
            violations.append(Violation(sub, f"key normalises to `{key}`, which another key of this object also does"))
            continue
        if isinstance(v, dict):
            out[key] = _normalize_task_object(violations, sub, v)
        elif isinstance(v, list):
            items = []
            for i, item in enumerate(v):
                problem = _bad_scalar(item)
                if problem is None and _is_container(item):
                    problem = "lists may hold only strings, numbers and booleans"
                if problem:
                    violations.append(Violation(f"{sub}[{i}]", problem))
                else:
                    items.append(item)
            out[key] = _dedup(items)
        else:
            problem = _bad_scalar(v)
            if problem:
                violations.append(Violation(sub, problem))
            else:
                out[key] = v
    return out


def normalize_procedure_context(violations: list[Violation], path: str, value: dict[str, Any]) -> dict[str, Any]:
    """Lenient rules for `procedure.context`: only depth, size and U+0000 are violations (behaviour §3.5)."""
    if depth(value) > MAX_DEPTH:
        violations.append(Violation(path, DEPTH_VIOLATION))
        return {}
    if _nul_violations(violations, path, value):
        return {}
    normalized: dict[str, Any] = _normalize_procedure_value(value)  # a dict stays a dict
    _check_size(violations, path, normalized)
    return normalized


def _procedure_key(raw: str) -> str | None:
    trimmed = raw.strip()
    if not trimmed:
        return None
    return _PROCEDURE_KEY_DISALLOWED.sub("_", trimmed.lower())[:64]


def _normalize_procedure_value(v: Any) -> Any:
    if isinstance(v, dict):
        chosen: dict[str, tuple[str, Any]] = {}
        for raw_key in sorted(v):  # code-point order: the smallest original key wins a collision
            key = _procedure_key(raw_key)
            if key is None or key in chosen:
                continue
            item = _normalize_procedure_value(v[raw_key])
            if item is not _DROP:
                chosen[key] = (raw_key, item)
        return {k: item for k, (_, item) in chosen.items()}
    if isinstance(v, list):
        items = [_normalize_procedure_value(i) for i in v]
        return _dedup([i for i in items if i is not _DROP])
    if _bad_scalar(v):
        return _DROP
    return v


_DROP: Any = object()


def merge_task_context(stored: dict[str, Any], update: dict[str, Any]) -> dict[str, Any]:
    """Recall's merge: top-level keys of the update overwrite."""
    merged = dict(stored)
    merged.update(update)
    return merged


def contexts_match(a: Any, b: Any) -> bool:
    """Type-strict matching of normalised values, at every depth (behaviour §12.4)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in a.keys() & b.keys():
            if key.endswith("_id"):
                continue
            if not contexts_match(a[key], b[key]):
                return False
        return True
    if isinstance(a, list) and isinstance(b, list):
        return any(contexts_match(x, y) for x in a for y in b)
    if isinstance(a, list):
        return any(contexts_match(x, b) for x in a)
    if isinstance(b, list):
        return any(contexts_match(a, y) for y in b)
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) or _is_number(b):
        return _is_number(a) and _is_number(b) and a == b
    if isinstance(a, str) and isinstance(b, str):
        return a.strip().casefold() == b.strip().casefold()
    return False
