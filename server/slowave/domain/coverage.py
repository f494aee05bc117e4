"""Coverage: how silence is read in one feedback call (seed; behaviour §10.3)."""

from __future__ import annotations

from dataclasses import dataclass

from slowave.domain.exposure import Target


@dataclass(frozen=True)
class CoverageResult:
    implicit: list[Target]  # targets to give an implicit neutral row, in exposure order
    outstanding: list[Target]  # targets still without an accepted row after the call
    declaration_accepted: bool  # False only when COMPLETE was requested and something is outstanding


def apply_coverage(
    exposure: list[Target],
    previously_covered: set[Target],
    mentioned_ids: set[str],
    accepted_now: set[Target],
    requested: str,
) -> CoverageResult:
    """`mentioned_ids`: every id named by an entry of this call, in either list, accepted or not.

    COMPLETE declares the rest reviewed: each exposed target not covered before and not mentioned
    gets an implicit row. A mentioned target whose entries were all rejected stays outstanding;
    the declaration never covers a failed explicit assessment.
    """
    implicit: list[Target] = []
    if requested == "complete":
        implicit = [t for t in exposure if t not in previously_covered and t[1] not in mentioned_ids]
    covered = previously_covered | accepted_now | set(implicit)
    outstanding = [t for t in exposure if t not in covered]
    accepted = requested != "complete" or not outstanding
    return CoverageResult(implicit, outstanding, accepted)
