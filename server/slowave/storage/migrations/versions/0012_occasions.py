"""Occasions: the claims one session remembered about one day, scored together (relevance.OccasionScorer).

Adds the `occasions` table and `memories.occasion`, and fills them from the memories remembered so
far, in the order they were stored, exactly as Remember now does (storage.occasions): per session
and occurrence day, runs of at most OCCASION_CLAIMS claims whose content terms are kept together,
and the scope's counts of occasions and their terms in scope_terms.

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

from collections import defaultdict

import sqlalchemy as sa
from alembic import op

from slowave.domain.relevance import OCCASION_CLAIMS, TOTAL_OCCASION_WORDS_TERM, TOTAL_OCCASIONS_TERM
from slowave.domain.terms import terms

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_BATCH = 1000


def upgrade() -> None:
    op.create_table(
        "occasions",
        sa.Column("number", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(256), nullable=False),
        sa.Column("session_id", sa.String(64), nullable=False),
        sa.Column("day", sa.String(10), nullable=False),
        sa.Column("claims", sa.Integer(), nullable=False),
        sa.Column("terms", sa.Text(), nullable=False),
    )
    op.create_index("ix_occasions_session_day", "occasions", ["tenant", "scope", "session_id", "day"])
    op.add_column("memories", sa.Column("occasion", sa.Integer()))

    bind = op.get_bind()
    rows = bind.execute(
        sa.text(
            "SELECT number, tenant, scope, source_session_id, occurred_on, content FROM memories"
            " WHERE source_kind = 'explicit_remember' AND source_session_id IS NOT NULL ORDER BY number"
        )
    ).all()
    groups: dict[tuple[str, str, str, str], list[list]] = defaultdict(list)  # key -> [[numbers, terms]]
    for number, tenant, scope, session, day, content in rows:
        runs = groups[(tenant, scope, session, day or "")]
        if not runs or len(runs[-1][0]) >= OCCASION_CLAIMS:
            runs.append([[], []])
        runs[-1][0].append(number)
        runs[-1][1].extend(terms(content))
    occasions = sa.table(
        "occasions",
        sa.column("number", sa.Integer()),
        sa.column("tenant", sa.String()),
        sa.column("scope", sa.String()),
        sa.column("session_id", sa.String()),
        sa.column("day", sa.String()),
        sa.column("claims", sa.Integer()),
        sa.column("terms", sa.Text()),
    )
    stats: dict[tuple[str, str, str], int] = defaultdict(int)
    members = []
    number = 0
    values = []
    for (tenant, scope, session, day), runs in sorted(groups.items(), key=lambda kv: kv[1][0][0][0]):
        for numbers, words in runs:
            number += 1
            values.append(
                dict(
                    number=number,
                    tenant=tenant,
                    scope=scope,
                    session_id=session,
                    day=day,
                    claims=len(numbers),
                    terms=" ".join(words),
                )
            )
            members += [{"o": number, "n": n} for n in numbers]
            stats[(tenant, scope, TOTAL_OCCASIONS_TERM)] += 1
            stats[(tenant, scope, TOTAL_OCCASION_WORDS_TERM)] += len(words)
    for i in range(0, len(values), _BATCH):
        bind.execute(occasions.insert(), values[i : i + _BATCH])
    for i in range(0, len(members), _BATCH):
        bind.execute(sa.text("UPDATE memories SET occasion = :o WHERE number = :n"), members[i : i + _BATCH])
    if stats:
        bind.execute(
            sa.text("INSERT INTO scope_terms (tenant, scope, term, docs) VALUES (:tenant, :scope, :term, :docs)"),
            [{"tenant": k[0], "scope": k[1], "term": k[2], "docs": v} for k, v in sorted(stats.items())],
        )
    if bind.dialect.name == "postgresql" and number:
        bind.execute(sa.text("SELECT setval(pg_get_serial_sequence('occasions', 'number'), :n)"), {"n": number})


def downgrade() -> None:
    bind = op.get_bind()
    bind.execute(
        sa.text("DELETE FROM scope_terms WHERE term IN (:a, :b)"),
        {"a": TOTAL_OCCASIONS_TERM, "b": TOTAL_OCCASION_WORDS_TERM},
    )
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("occasion")
    op.drop_index("ix_occasions_session_day", "occasions")
    op.drop_table("occasions")
