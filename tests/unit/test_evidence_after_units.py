"""Feedback's `applied` computes learned(m, q) after the call from the evidence read before it
(MemoryEvidence.with_own_units): it must equal what the store holds once the units are added."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from slowave.domain.learning import learned_for_cue
from slowave.service.learned import memory_evidence

CUES = [frozenset(t.split()) for t in ("deploy port payment", "deploy port", "payment retri", "backup nightli")]


def test_evidence_after_units_equals_the_stored_evidence(db):
    rng = random.Random(7)
    seq = 0
    with db.transaction() as uow:
        memory = uow.memories.insert(
            tenant="t",
            scope="project:x",
            type_="fact",
            content="payments-api deploys on port 8443.",
            source_kind="explicit_remember",
            source_session_id=None,
            now=datetime(2026, 12, 4, tzinfo=UTC),
        )
        cues = [uow.cues.number("t", f"hash{i}", terms) for i, terms in enumerate(CUES)]
    checked_sign_changes = 0
    for _ in range(300):
        cue_index = rng.randrange(len(cues))
        cue, terms = cues[cue_index], CUES[cue_index]
        units = rng.choice([-3, -2, -1, 1, 2, 3])
        with db.transaction() as uow:
            before = memory_evidence(uow, uow.memories.get("t", memory, lock=True), cue)
            seq += 1
            uow.cues.add_units(memory, cue, units, seq)
            stored = memory_evidence(uow, uow.memories.get("t", memory), cue)
        computed = before.with_own_units(units)
        assert (computed.own_units, computed.positive_cues, computed.negative_cues) == (
            stored.own_units,
            stored.positive_cues,
            stored.negative_cues,
        )
        assert learned_for_cue(computed, terms) == learned_for_cue(stored, terms)
        checked_sign_changes += (before.own_units > 0) != (stored.own_units > 0)
    assert checked_sign_changes > 10  # the walk crosses zero under a cue many times
