"""Frozen catalogs and their pages (behaviour §5.3, 5.4): rendering, page budgets, what remains."""

from __future__ import annotations

import math
from dataclasses import dataclass

RENDER_LIMIT_CHARS = 1024


def render_content(content: str) -> tuple[str, tuple[int, int] | None]:
    """Content as served: beyond 1024 characters, its longest prefix of at most 1024 characters that
    is followed by white space in the original, trailing white space removed (else the first 1024).
    Returns the text and, when shortened, (source_chars, shown_chars)."""
    if len(content) <= RENDER_LIMIT_CHARS:
        return content, None
    shown = ""
    for i in range(RENDER_LIMIT_CHARS, 0, -1):
        if content[i].isspace():
            shown = content[:i].rstrip()
            if shown:
                break
    if not shown:
        shown = content[:RENDER_LIMIT_CHARS]
    return shown, (len(content), len(shown))


def procedure_texts(goal: str, summary: str, steps: list[str], caveats: list[str]) -> list[str]:
    return [goal, summary, *steps, *caveats]


def page_count(sizes: list[int], offset: int, max_items: int, budget_bytes: int) -> int:
    """How many items from `offset` fit on a page: at most `max_items`, ending before the first item
    that would exceed the byte budget, unless the page is still empty (one oversized record is
    still delivered whole)."""
    taken, used = 0, 0
    for size in sizes[offset:]:
        if taken >= max_items:
            break
        if taken and used + size > budget_bytes:
            break
        taken += 1
        used += size
    return taken


@dataclass(frozen=True)
class Remaining:
    extra_candidates: int
    kinds: list[str]
    approx_extra_tokens: int


def remaining(memory_types: list[str], memory_chars: list[int], procedure_chars: list[int]) -> Remaining:
    kinds = set(memory_types)
    if procedure_chars:
        kinds.add("procedure")
    chars = sum(memory_chars) + sum(procedure_chars)
    return Remaining(len(memory_types) + len(procedure_chars), sorted(kinds), math.ceil(chars / 4))
