"""Procedure capture at commit (seed; behaviour §11.3) and the view of a stored procedure."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from slowave.domain.learning import CAUTIONARY_CAVEAT


@dataclass(frozen=True)
class CapturedProcedure:
    goal: str
    summary: str
    context: dict[str, Any]
    steps: list[str] = field(default_factory=list)
    caveats: list[str] = field(default_factory=list)


def describes_a_method(summary: str | None, steps: list[str]) -> bool:
    """The seed requires no field, but a procedure needs a summary or at least one step."""
    return summary is not None or bool(steps)


def capture(
    goal: str | None,
    final_goal: str,
    summary: str | None,
    context: dict[str, Any],
    steps: list[str],
    caveats: list[str],
) -> CapturedProcedure:
    return CapturedProcedure(goal or final_goal, summary or "", context, list(steps), list(caveats))


def served_caveats(caveats: list[str], outcome: str) -> list[str]:
    """A procedure from a failed session is still returned, with the cautionary caveat last."""
    if outcome == "failure":
        return [*caveats, CAUTIONARY_CAVEAT]
    return list(caveats)


def applicability_text(goal: str, activation_task: str) -> str:
    return f"{goal}\n{activation_task}"
