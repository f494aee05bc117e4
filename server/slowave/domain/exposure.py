"""Exposure (seed; behaviour §5.4, 10.1): the targets a retrieval has shown, which its feedback covers.

A retrieval's exposure set is the union of the memories and procedures on every page it served,
in the order each was first shown; serving a page again (a continuation read twice) exposes
nothing new. The commit gate asks that every exposed target has an accepted assessment.
"""

from __future__ import annotations

from collections.abc import Iterable

Target = tuple[str, str]  # (kind, id) with kind "memory" or "procedure"


def newly_exposed(already: Iterable[Target], served: list[Target]) -> list[Target]:
    """The targets of a served page not exposed before, in page order."""
    known = set(already)
    return [t for t in served if t not in known]
