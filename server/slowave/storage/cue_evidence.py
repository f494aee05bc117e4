"""Learned evidence per cue: the cues of retrievals and each memory's running sums under them.

Part of the repository (mixed into storage.repository.Repository, so it runs in the unit of work's
transaction). Sums change only together with the ledger rows that change them, under the lock on
the memory's row that Feedback holds; service.learning_replay recomputes them from the ledger.
"""

from __future__ import annotations

from sqlalchemy import Connection, bindparam, func, select, update

from slowave.domain.identifiers import memory_number
from slowave.domain.learning import COMPARED_CUES, CueUnits, EffectiveAssessment, MemoryEvidence
from slowave.storage import tables as t

_c, _e, _m = t.cues, t.memory_cue_evidence, t.memories

_CUE_BY_KEY = select(_c.c.number).where(_c.c.tenant == bindparam("tenant"), _c.c.key_hash == bindparam("key_hash"))
_CUE_TERMS = select(_c.c.terms).where(_c.c.number == bindparam("cue"))
_SUM = select(_e.c.units).where(_e.c.memory_number == bindparam("memory"), _e.c.cue_number == bindparam("cue"))
_OWN_SUMS = select(_e.c.memory_number, _e.c.units).where(
    _e.c.memory_number.in_(bindparam("numbers", expanding=True)), _e.c.cue_number == bindparam("cue")
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
        _e.c.memory_number.in_(bindparam("numbers", expanding=True)),
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


class CueEvidenceStore:
    conn: Connection
    dialect: str

    def cue_number(self, tenant: str, key_hash: str, cue_terms: frozenset[str]) -> int:
        """The cue's number, stored on first use (a concurrent first use of the same cue inserts once)."""
        params = {"tenant": tenant, "key_hash": key_hash}
        found = self.conn.execute(_CUE_BY_KEY, params).scalar()
        if found is not None:
            return found
        insert = dialect_insert(self.dialect)(_c).values(
            tenant=tenant, key_hash=key_hash, terms=" ".join(sorted(cue_terms))
        )
        self.conn.execute(insert.on_conflict_do_nothing(index_elements=[_c.c.tenant, _c.c.key_hash]))
        return self.conn.execute(_CUE_BY_KEY, params).scalar_one()

    def cue_terms(self, cue: int | None) -> frozenset[str]:
        if cue is None:
            return frozenset()
        return frozenset((self.conn.execute(_CUE_TERMS, {"cue": cue}).scalar() or "").split())

    def add_cue_units(self, memory: int, cue: int, units: int, seq: int) -> None:
        """Adds an effective assessment's units to the memory's sum under the cue; the memory's
        counts of positive and negative cues follow the sum's sign. The caller holds the memory's lock."""
        before = self.conn.execute(_SUM, {"memory": memory, "cue": cue}).scalar()
        after = (before or 0) + units
        if before is None:
            self.conn.execute(_e.insert().values(memory_number=memory, cue_number=cue, units=after, last_seq=seq))
        else:
            self.conn.execute(
                update(_e).where(_e.c.memory_number == memory, _e.c.cue_number == cue).values(units=after, last_seq=seq)
            )
        positive = (after > 0) - ((before or 0) > 0)
        negative = (after < 0) - ((before or 0) < 0)
        if positive or negative:
            self.conn.execute(
                update(_m)
                .where(_m.c.number == memory)
                .values(positive_cues=_m.c.positive_cues + positive, negative_cues=_m.c.negative_cues + negative)
            )

    def memory_evidence(self, counts: dict[int, tuple[int, int]], cue: int | None) -> dict[int, MemoryEvidence]:
        """The evidence of each memory (number -> its positive and negative cue counts) for ranking
        under `cue`: the sum under the cue itself and those under its most recently assessed others."""
        numbers = sorted(counts)
        if not numbers:
            return {}
        params = {"numbers": numbers, "cue": cue if cue is not None else -1}
        own = dict(self.conn.execute(_OWN_SUMS, params).all())
        others: dict[int, list[CueUnits]] = {}
        for number, units, cue_terms in self.conn.execute(_OTHER_SUMS, params):
            others.setdefault(number, []).append(CueUnits(units, frozenset(cue_terms.split())))
        return {n: MemoryEvidence(own.get(n, 0), tuple(others.get(n, ())), *counts[n]) for n in numbers}

    # ------------------------------------------------------------ replay (admin, migration check)

    def effective_memory_assessments(self) -> list[EffectiveAssessment]:
        f, r = t.feedback_rows, t.retrievals
        rows = self.conn.execute(
            select(f.c.seq, f.c.target_id, r.c.cue_number, f.c.assessment, f.c.effect)
            .join(r, r.c.id == f.c.retrieval_id)
            .where(
                f.c.target_kind == "memory",
                f.c.accepted.is_(True),
                f.c.effective.is_(True),
                f.c.assessment.is_not(None),
            )
            .order_by(f.c.seq)
        )
        return [
            EffectiveAssessment(seq, number, cue, assessment, effect)
            for seq, target, cue, assessment, effect in rows
            if (number := memory_number(target)) is not None and cue is not None
        ]

    def retired_seqs(self) -> dict[int, int]:
        return dict(self.conn.execute(select(_m.c.number, _m.c.retired_seq).where(_m.c.retired_seq.is_not(None))).all())

    def stored_cue_sums(self) -> dict[tuple[int, int], tuple[int, int]]:
        return {
            (m, c): (u, s)
            for m, c, u, s in self.conn.execute(select(_e.c.memory_number, _e.c.cue_number, _e.c.units, _e.c.last_seq))
        }

    def stored_cue_counts(self) -> dict[int, tuple[int, int]]:
        """Memories with a non-zero positive or negative cue count."""
        rows = self.conn.execute(
            select(_m.c.number, _m.c.positive_cues, _m.c.negative_cues).where(
                (_m.c.positive_cues != 0) | (_m.c.negative_cues != 0)
            )
        )
        return {n: (p, q) for n, p, q in rows}

    def replace_cue_sums(
        self, sums: dict[tuple[int, int], tuple[int, int]], counts: dict[int, tuple[int, int]]
    ) -> None:
        """Writes replayed state over the stored one (repair)."""
        self.conn.execute(_e.delete())
        if sums:
            self.conn.execute(
                _e.insert(),
                [{"memory_number": m, "cue_number": c, "units": u, "last_seq": s} for (m, c), (u, s) in sums.items()],
            )
        self.conn.execute(
            update(_m)
            .where((_m.c.positive_cues != 0) | (_m.c.negative_cues != 0))
            .values(positive_cues=0, negative_cues=0)
        )
        for number, (p, q) in counts.items():
            self.conn.execute(update(_m).where(_m.c.number == number).values(positive_cues=p, negative_cues=q))

    def max_ledger_seq(self) -> int:
        return self.conn.execute(select(func.max(t.feedback_rows.c.seq))).scalar() or 0


def dialect_insert(dialect: str):
    """INSERT with the backend's ON CONFLICT clause (both spell it the same way)."""
    if dialect == "postgresql":
        from sqlalchemy.dialects.postgresql import insert
    else:
        from sqlalchemy.dialects.sqlite import insert
    return insert
