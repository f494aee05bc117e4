"""Reading a memory's learned adjustment for a cue (behaviour §12.1) out of the stored evidence."""

from __future__ import annotations

from collections.abc import Iterable

from slowave.domain.learning import NO_EVIDENCE, MemoryEvidence, learned_for_cue
from slowave.storage.unit_of_work import UnitOfWork


def learned_adjustments(
    uow: UnitOfWork, rows: Iterable, cue: int | None, cue_terms: frozenset[str]
) -> dict[int, float]:
    """number -> learned(m, q) for the memories (rows with `number`, `positive_cues`,
    `negative_cues`) that have any evidence; the others' adjustment is 0."""
    counts = {r.number: (r.positive_cues, r.negative_cues) for r in rows if r.positive_cues or r.negative_cues}
    return {n: learned_for_cue(e, cue_terms) for n, e in uow.cues.memory_evidence(counts, cue).items()}


def memory_evidence(uow: UnitOfWork, row, cue: int | None) -> MemoryEvidence:
    """The evidence `learned(m, q)` is computed from, for one memory row (NO_EVIDENCE without any)."""
    if not (row.positive_cues or row.negative_cues):
        return NO_EVIDENCE
    return uow.cues.memory_evidence({row.number: (row.positive_cues, row.negative_cues)}, cue)[row.number]
