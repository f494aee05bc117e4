"""Replay equals state: recompute every memory's per-cue evidence from the ledger and compare it
with the running sums Feedback maintains (behaviour §12: learning is a deterministic function of the
accepted ledger rows)."""

from __future__ import annotations

from dataclasses import dataclass, field

from slowave.domain.learning import cue_counts, replay_cue_sums
from slowave.service.context import ServiceContext


@dataclass
class ReplayReport:
    cue_sums: int = 0  # (memory, cue) sums recomputed
    differences: list[str] = field(default_factory=list)
    repaired: bool = False


def replay_learning(ctx: ServiceContext, *, repair: bool = False) -> ReplayReport:
    """One transaction: the comparison sees one consistent ledger and state (and a repair writes
    exactly what it compared against)."""
    with ctx.db.transaction() as uow:
        replayed = replay_cue_sums(uow.cues.effective_memory_assessments(), uow.cues.retired_seqs())
        counts = cue_counts(replayed)
        stored, stored_counts = uow.cues.stored_sums(), uow.cues.stored_counts()
        report = ReplayReport(cue_sums=len(replayed))
        for key in sorted(set(replayed) | set(stored)):
            if replayed.get(key) != stored.get(key):
                report.differences.append(
                    f"memory {key[0]} cue {key[1]}: stored (units, last_seq) {stored.get(key)}, ledger {replayed.get(key)}"
                )
        for memory in sorted(set(counts) | set(stored_counts)):
            if counts.get(memory, (0, 0)) != stored_counts.get(memory, (0, 0)):
                report.differences.append(
                    f"memory {memory}: stored (positive_cues, negative_cues) "
                    f"{stored_counts.get(memory, (0, 0))}, ledger {counts.get(memory, (0, 0))}"
                )
        if repair and report.differences:
            uow.cues.replace_sums(replayed, counts)
            report.repaired = True
    return report
