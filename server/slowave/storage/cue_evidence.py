"""Learned evidence per cue: the cues of retrievals and each memory's running sums under them.

Sums change only together with the ledger rows that change them, under the lock on the memory's
row that Feedback holds; service.learning_replay recomputes them from the ledger.
"""

from __future__ import annotations

from sqlalchemy import Integer, bindparam, func, select, update

from slowave.domain.identifiers import memory_number
from slowave.domain.learning import COMPARED_CUES, CueUnits, EffectiveAssessment, MemoryEvidence
from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, upsert, values_of

_c, _e, _m = t.cues, t.memory_cue_evidence, t.memories

_CUE_BY_KEY = select(_c.c.number).where(_c.c.tenant == bindparam("tenant"), _c.c.key_hash == bindparam("key_hash"))
_CUE_TERMS = select(_c.c.terms).where(_c.c.number == bindparam("cue"))
_SUM = select(_e.c.units).where(_e.c.memory_number == bindparam("memory"), _e.c.cue_number == bindparam("cue"))
_numbers = values_of("numbers", Integer())
_OWN_SUMS = select(_e.c.memory_number, _e.c.units).where(
    any_of(_e.c.memory_number, _numbers), _e.c.cue_number == bindparam("cue")
)
_recent = (
    select(
        _e.c.memory_number,
        _e.c.units,
        _c.c.terms,
        func.row_number().over(partition_by=_e.c.memory_number, order_by=_e.c.last_seq.desc()).label("recency"),
    )
    .join(_c, _c.c.number == _e.c.cue_number)
    .where(
        any_of(_e.c.memory_number, _numbers),
        _e.c.cue_number != bindparam("cue"),
        _e.c.units != 0,
    )
    .subquery()
)
# The most recently assessed other cues of each memory, newest first.
_OTHER_SUMS = (
    select(_recent.c.memory_number, _recent.c.units, _recent.c.terms)
    .where(_recent.c.recency <= COMPARED_CUES)
    .order_by(_recent.c.memory_number, _recent.c.recency)
)


# A concurrent first use of the same cue inserts once.
_NEW_CUE = upsert(
    lambda insert: (
        insert(_c)
        .values(tenant=bindparam("tenant"), key_hash=bindparam("key_hash"), terms=bindparam("cue_terms"))
        .on_conflict_do_nothing(index_elements=[_c.c.tenant, _c.c.key_hash])
    )
)
_evidence = (_e.c.memory_number == bindparam("memory"), _e.c.cue_number == bindparam("cue"))
_SET_SUM = update(_e).where(*_evidence).values(units=bindparam("sum"), last_seq=bindparam("seq"))
_ADD_CUE_COUNTS = (
    update(_m)
    .where(_m.c.number == bindparam("memory"))
    .values(
        positive_cues=_m.c.positive_cues + bindparam("positive", type_=Integer()),
        negative_cues=_m.c.negative_cues + bindparam("negative", type_=Integer()),
    )
)
_f, _r = t.feedback_rows, t.retrievals
_EFFECTIVE_MEMORY_ASSESSMENTS = (
    select(_f.c.seq, _f.c.target_id, _r.c.cue_number, _f.c.assessment, _f.c.effect)
    .join(_r, _r.c.id == _f.c.retrieval_id)
    .where(
        _f.c.target_kind == "memory",
        _f.c.accepted.is_(True),
        _f.c.effective.is_(True),
        _f.c.assessment.is_not(None),
    )
    .order_by(_f.c.seq)
)
_RETIRED_SEQS = select(_m.c.number, _m.c.retired_seq).where(_m.c.retired_seq.is_not(None))
_ALL_SUMS = select(_e.c.memory_number, _e.c.cue_number, _e.c.units, _e.c.last_seq)
_counted = (_m.c.positive_cues != 0) | (_m.c.negative_cues != 0)
_CUE_COUNTS = select(_m.c.number, _m.c.positive_cues, _m.c.negative_cues).where(_counted)
_CLEAR_SUMS = _e.delete()
_CLEAR_COUNTS = update(_m).where(_counted).values(positive_cues=0, negative_cues=0)
_SET_COUNTS = (
    update(_m)
    .where(_m.c.number == bindparam("memory"))
    .values(positive_cues=bindparam("positive"), negative_cues=bindparam("negative"))
)


class CueEvidenceStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def find(self, tenant: str, key_hash: str) -> int | None:
        """The cue's number if it was ever stored (a read-only unit of work cannot store it)."""
        found: int | None = self.ex.scalar(_CUE_BY_KEY, {"tenant": tenant, "key_hash": key_hash})
        return found

    def number(self, tenant: str, key_hash: str, cue_terms: frozenset[str]) -> int:
        """The cue's number, stored on first use."""
        params = {"tenant": tenant, "key_hash": key_hash}
        found = self.ex.scalar(_CUE_BY_KEY, params)
        if found is not None:
            return found
        self.ex.run(_NEW_CUE, dict(params, cue_terms=" ".join(sorted(cue_terms))))
        return self.ex.scalar(_CUE_BY_KEY, params)

    def terms(self, cue: int | None) -> frozenset[str]:
        if cue is None:
            return frozenset()
        return frozenset((self.ex.scalar(_CUE_TERMS, {"cue": cue}) or "").split())

    def add_units(self, memory: int, cue: int, units: int, seq: int) -> None:
        """Adds an effective assessment's units to the memory's sum under the cue; the memory's
        counts of positive and negative cues follow the sum's sign. The caller holds the memory's lock."""
        before = self.ex.scalar(_SUM, {"memory": memory, "cue": cue})
        after = (before or 0) + units
        if before is None:
            self.ex.insert(_e, {"memory_number": memory, "cue_number": cue, "units": after, "last_seq": seq})
        else:
            self.ex.run(_SET_SUM, {"memory": memory, "cue": cue, "sum": after, "seq": seq})
        positive = (after > 0) - ((before or 0) > 0)
        negative = (after < 0) - ((before or 0) < 0)
        if positive or negative:
            self.ex.run(_ADD_CUE_COUNTS, {"memory": memory, "positive": positive, "negative": negative})

    def memory_evidence(self, counts: dict[int, tuple[int, int]], cue: int | None) -> dict[int, MemoryEvidence]:
        """The evidence of each memory (number -> its positive and negative cue counts) for ranking
        under `cue`: the sum under the cue itself and those under its most recently assessed others."""
        numbers = sorted(counts)
        if not numbers:
            return {}
        params = {"numbers": numbers, "cue": cue if cue is not None else -1}
        own = {number: units for number, units in self.ex.rows(_OWN_SUMS, params)}
        others: dict[int, list[CueUnits]] = {}
        for number, units, cue_terms in self.ex.rows(_OTHER_SUMS, params):
            others.setdefault(number, []).append(CueUnits(units, frozenset(cue_terms.split())))
        return {n: MemoryEvidence(own.get(n, 0), tuple(others.get(n, ())), *counts[n]) for n in numbers}

    # ------------------------------------------------------------ replay (admin, migration check)

    def effective_memory_assessments(self) -> list[EffectiveAssessment]:
        return [
            EffectiveAssessment(seq, number, cue, assessment, effect)
            for seq, target, cue, assessment, effect in self.ex.rows(_EFFECTIVE_MEMORY_ASSESSMENTS)
            if (number := memory_number(target)) is not None and cue is not None
        ]

    def retired_seqs(self) -> dict[int, int]:
        return {number: seq for number, seq in self.ex.rows(_RETIRED_SEQS)}

    def stored_sums(self) -> dict[tuple[int, int], tuple[int, int]]:
        return {(m, c): (u, s) for m, c, u, s in self.ex.rows(_ALL_SUMS)}

    def stored_counts(self) -> dict[int, tuple[int, int]]:
        """Memories with a non-zero positive or negative cue count."""
        return {n: (p, q) for n, p, q in self.ex.rows(_CUE_COUNTS)}

    def replace_sums(self, sums: dict[tuple[int, int], tuple[int, int]], counts: dict[int, tuple[int, int]]) -> None:
        """Writes replayed state over the stored one (repair)."""
        self.ex.run(_CLEAR_SUMS)
        rows = [{"memory_number": m, "cue_number": c, "units": u, "last_seq": s} for (m, c), (u, s) in sums.items()]
        self.ex.insert_many(_e, rows)
        self.ex.run(_CLEAR_COUNTS)
        self.ex.run_many(_SET_COUNTS, [{"memory": n, "positive": p, "negative": q} for n, (p, q) in counts.items()])
