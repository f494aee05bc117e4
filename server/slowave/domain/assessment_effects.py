"""Applying assessments (seed; behaviour §10.2, 12.1, 12.3, 12.4): what an accepted feedback row changes.

The ledger keeps every row; only some of them act. Per (retrieval, target) the first accepted
explicit row is the *effective* one: it alone adds learning evidence (for the retrieval's cue) or
counts in a procedure's evidence (domain.learning.procedure_counts). Retirement is the exception: the first `stale` row for an active
memory retires it whether or not it is effective, because a later correction must still be able to
stop a memory coming back. A retired memory's learned adjustment is frozen. Implicit rows (the
`complete` declaration) change nothing but coverage and never reach this module.
"""

from __future__ import annotations

from dataclasses import dataclass

from slowave.domain.feedback_entries import MemoryEntry
from slowave.domain.learning import memory_unit


@dataclass(frozen=True)
class Retirement:
    stale_reason: str
    replacement_memory_id: str | None  # the authorization checked it names an active memory

    @property
    def supersedes(self) -> bool:
        """Retrieval stands the replacement in for the memory (domain.supersession), and
        `applied.replacements` lists the pair."""
        return self.stale_reason == "superseded" and self.replacement_memory_id is not None


@dataclass(frozen=True)
class MemoryEffect:
    learning_units: int  # added to the memory's evidence under the retrieval's cue; 0: nothing
    retirement: Retirement | None


def memory_effect(entry: MemoryEntry, *, effective: bool, active: bool, has_cue: bool) -> MemoryEffect:
    """What an accepted explicit assessment of a memory does to it.

    `effective`: the first accepted explicit row for this memory under its retrieval; `active`:
    the memory is not retired; `has_cue`: the retrieval kept the cue its evidence goes under."""
    units = memory_unit(entry.assessment, entry.effect) if effective and active and has_cue else 0
    retirement = None
    if entry.assessment == "stale" and active:
        retirement = Retirement(entry.stale_reason or "", entry.replacement_memory_id)
    return MemoryEffect(units, retirement)
