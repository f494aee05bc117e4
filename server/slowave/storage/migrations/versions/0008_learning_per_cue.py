"""Learned evidence per cue (behaviour §12.1 revised 2026-12).

Adds `cues` (each retrieval's cue once per tenant, with its terms), `retrievals.cue_number`,
`memory_cue_evidence` (the running sum of units per memory and cue) and, on memories, the number of
cues with a positive / negative sum and `retired_seq` (ledger rows from it on count for nothing).
The one-number-per-memory `learned_units` goes. The new state is backfilled by replaying the
ledger with the same fold the running code and `slowave-admin learning-replay` use.

Retrievals stored before this migration kept no cue text. An activation's cue is taken to be its
session's task (its semantic context, if any, was not kept); a recall's query was not kept at all,
so its evidence is filed under one unknown cue without terms per tenant, which carries to other
cues only through the global term.

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

from datetime import datetime

import sqlalchemy as sa
from alembic import op

from slowave.domain.identifiers import memory_number
from slowave.domain.learning import (
    UNKNOWN_CUE_HASH,
    EffectiveAssessment,
    cue_counts,
    cue_key_hash,
    replay_cue_sums,
)
from slowave.domain.terms import terms

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    bind = op.get_bind()
    op.create_table(
        "cues",
        sa.Column("number", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
        sa.UniqueConstraint("tenant", "key_hash", name="uq_cues_key"),
    )
    op.create_table(
        "memory_cue_evidence",
        sa.Column("memory_number", sa.Integer(), primary_key=True),
        sa.Column("cue_number", sa.Integer(), primary_key=True),
        sa.Column("units", sa.Integer(), nullable=False),
        sa.Column("last_seq", sa.Integer(), nullable=False),
    )
    op.create_index("ix_memory_cue_evidence_recent", "memory_cue_evidence", ["memory_number", "last_seq"])
    op.add_column("retrievals", sa.Column("cue_number", sa.Integer()))
    # The policy label names the learning constants now. SQLite does not enforce VARCHAR lengths
    # (and rebuilding the referenced retrievals table would fight its foreign keys), so only
    # PostgreSQL's column is widened.
    if bind.dialect.name == "postgresql":
        op.alter_column(
            "retrievals", "policy_version", type_=sa.String(256), existing_type=sa.String(128), existing_nullable=False
        )
    op.add_column("memories", sa.Column("retired_seq", sa.Integer()))
    op.add_column("memories", sa.Column("positive_cues", sa.Integer(), nullable=False, server_default=sa.text("0")))
    op.add_column("memories", sa.Column("negative_cues", sa.Integer(), nullable=False, server_default=sa.text("0")))

    _backfill_cues(bind)
    retired_seq = _backfill_retired_seq(bind)
    _backfill_evidence(bind, retired_seq)
    op.execute("ALTER TABLE memories DROP COLUMN learned_units")


def _backfill_cues(bind: sa.Connection) -> None:
    cues: dict[tuple[str, str], tuple[int, str]] = {}
    assignments = []
    rows = bind.execute(
        sa.text(
            "SELECT r.number, r.tenant, r.kind, s.task FROM retrievals r LEFT JOIN sessions s ON s.id = r.session_id "
            "ORDER BY r.number"
        )
    ).all()
    for number, tenant, kind, task in rows:
        if kind == "activation" and task:
            key, cue_terms = cue_key_hash(task), " ".join(sorted(set(terms(task))))
        else:
            key, cue_terms = UNKNOWN_CUE_HASH, ""
        if (tenant, key) not in cues:
            cues[(tenant, key)] = (len(cues) + 1, cue_terms)
        assignments.append({"r": number, "c": cues[(tenant, key)][0]})
    table = sa.table("cues", sa.column("number"), sa.column("tenant"), sa.column("key_hash"), sa.column("terms"))
    values = [
        {"number": n, "tenant": tenant, "key_hash": key, "terms": cue_terms}
        for (tenant, key), (n, cue_terms) in cues.items()
    ]
    for i in range(0, len(values), _BATCH):
        bind.execute(sa.insert(table), values[i : i + _BATCH])
    if values and bind.dialect.name == "postgresql":  # explicit numbers do not advance the sequence
        bind.execute(sa.text("SELECT setval(pg_get_serial_sequence('cues', 'number'), :n)"), {"n": len(values)})
    for i in range(0, len(assignments), _BATCH):
        bind.execute(sa.text("UPDATE retrievals SET cue_number = :c WHERE number = :r"), assignments[i : i + _BATCH])


def _backfill_retired_seq(bind: sa.Connection) -> dict[int, int]:
    """Where each retired memory's countable ledger ends: at the `stale` row that retired it, or —
    for a memory retired by consolidation — at the first row recorded at or after its retirement."""
    stale = {}
    for seq, target in bind.execute(
        sa.text(
            "SELECT seq, target_id FROM feedback_rows WHERE target_kind = 'memory' AND accepted AND NOT implicit "
            "AND assessment = 'stale' ORDER BY seq"
        )
    ).all():
        number = memory_number(target)
        if number is not None:
            stale.setdefault(number, seq)
    end = (bind.execute(sa.text("SELECT max(seq) FROM feedback_rows")).scalar() or 0) + 1
    retired_seq = {}
    for number, retired_at in bind.execute(
        sa.text("SELECT number, retired_at FROM memories WHERE status = 'retired'")
    ).all():
        if number in stale:
            retired_seq[number] = stale[number]
            continue
        if isinstance(retired_at, str):
            retired_at = datetime.fromisoformat(retired_at)
        after = bind.execute(
            sa.text("SELECT min(seq) FROM feedback_rows WHERE recorded_at >= :at").bindparams(
                sa.bindparam("at", type_=sa.DateTime(timezone=retired_at.tzinfo is not None))
            ),
            {"at": retired_at},
        ).scalar()
        retired_seq[number] = after if after is not None else end
    updates = [{"n": n, "s": s} for n, s in retired_seq.items()]
    for i in range(0, len(updates), _BATCH):
        bind.execute(sa.text("UPDATE memories SET retired_seq = :s WHERE number = :n"), updates[i : i + _BATCH])
    return retired_seq


def _backfill_evidence(bind: sa.Connection, retired_seq: dict[int, int]) -> None:
    assessments = []
    for seq, target, cue, assessment, effect in bind.execute(
        sa.text(
            "SELECT f.seq, f.target_id, r.cue_number, f.assessment, f.effect FROM feedback_rows f "
            "JOIN retrievals r ON r.id = f.retrieval_id "
            "WHERE f.target_kind = 'memory' AND f.accepted AND f.effective ORDER BY f.seq"
        )
    ).all():
        number = memory_number(target)
        if number is not None and assessment is not None:
            assessments.append(EffectiveAssessment(seq, number, cue, assessment, effect))
    sums = replay_cue_sums(assessments, retired_seq)
    rows = [{"memory_number": m, "cue_number": c, "units": u, "last_seq": s} for (m, c), (u, s) in sums.items()]
    table = sa.table(
        "memory_cue_evidence",
        sa.column("memory_number"),
        sa.column("cue_number"),
        sa.column("units"),
        sa.column("last_seq"),
    )
    for i in range(0, len(rows), _BATCH):
        bind.execute(sa.insert(table), rows[i : i + _BATCH])
    counts = [{"n": m, "p": p, "q": q} for m, (p, q) in cue_counts(sums).items()]
    for i in range(0, len(counts), _BATCH):
        bind.execute(
            sa.text("UPDATE memories SET positive_cues = :p, negative_cues = :q WHERE number = :n"),
            counts[i : i + _BATCH],
        )


def downgrade() -> None:
    raise NotImplementedError(
        "0008 replaces learned_units by per-cue evidence; restore a backup taken before upgrading"
    )
