"""Plain-text rendering of results for people (`slowave --format table`)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator, Sequence
from typing import Any

from slowave_client.results import ActivateResult, Procedure, RecallResult, as_json


def _clip(text: str, width: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: max(1, width - 1)] + "…"


def grid(headers: Sequence[str], rows: Sequence[Sequence[str]], last_width: int | None = None) -> str:
    """Left-aligned columns sized to their content; the last column is clipped to `last_width`."""
    cells = [list(r) for r in rows]
    if last_width is not None:
        for r in cells:
            r[-1] = _clip(r[-1], last_width)
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells]
    return "\n".join(lines)


def _terminal_width() -> int:
    return max(80, shutil.get_terminal_size((120, 24)).columns)


def retrieval(result: ActivateResult | RecallResult) -> str:
    """Activate / Recall: a header line, then memories and procedures best first."""
    head = [f"session {result.session_id}", f"retrieval {result.retrieval_id}"]
    if isinstance(result, ActivateResult):
        head.append(f"memory state {result.memory_state}")
    head.append(f"relevant {result.relevant_total}")
    out = ["   ".join(head)]
    mem_rows = [
        [
            str(i),
            m.memory_id,
            m.type,
            f"{m.ranking.score:.3f}",
            f"{m.ranking.relevance:.3f}",
            f"{m.ranking.learned:+.3f}",
            m.pathway,
            m.content,
        ]
        for i, m in enumerate(result.memories, 1)
    ]
    fixed = sum(len(c) + 2 for c in mem_rows[0][:-1]) if mem_rows else 60
    if mem_rows:
        out += [
            "",
            grid(
                ["#", "MEMORY", "TYPE", "SCORE", "RELEVANCE", "LEARNED", "PATHWAY", "CONTENT"],
                mem_rows,
                last_width=max(30, _terminal_width() - fixed - 8),
            ),
        ]
    else:
        out += ["", "no memories"]
    if result.procedures:
        out += [
            "",
            grid(
                ["#", "PROCEDURE", "SCORE", "OUTCOME", "USED", "GOAL"],
                [_procedure_row(i, p) for i, p in enumerate(result.procedures, 1)],
                last_width=60,
            ),
        ]
    for w in result.warnings:
        out.append(f"warning {w.code}: {w.message}")
    if result.more_available and result.continue_from:
        extra = result.accessible_field.extra_candidates if result.accessible_field else "?"
        out.append(f"more: {extra} further items; next page: --continue-from {result.continue_from}")
    return "\n".join(out)


def _procedure_row(i: int, p: Procedure) -> list[str]:
    return [str(i), p.procedure_id, f"{p.ranking.score:.3f}", p.outcome, str(p.evidence.used), p.goal]


def fields(result: Any) -> str:
    """Any other result as `name  value` lines (nested fields dotted, lists comma-separated)."""
    rows = list(_flatten(as_json(result)))
    return grid(["FIELD", "VALUE"], rows) if rows else "(empty)"


def _flatten(value: Any, prefix: str = "") -> Iterator[list[str]]:
    if isinstance(value, dict):
        for key, v in value.items():
            yield from _flatten(v, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list) and any(isinstance(v, (dict, list)) for v in value):
        for i, v in enumerate(value):
            yield from _flatten(v, f"{prefix}[{i}]")
    elif isinstance(value, list):
        yield [prefix, ", ".join(str(v) for v in value)]
    elif isinstance(value, bool):
        yield [prefix, "yes" if value else "no"]
    else:
        yield [prefix, str(value)]
