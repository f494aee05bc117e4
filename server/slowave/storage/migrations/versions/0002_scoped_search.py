"""Term statistics for full-text queries, longer containment keys, memory vectors (semantic channel).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import re
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_KEY_CHARS = 16
_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> list[str]:
    # As slowave.domain.relevance.tokens at the time of writing (migrations never import app code).
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(ch))
    return [w[:128] for w in _WORD.findall(folded)]


def upgrade() -> None:
    bind = op.get_bind()
    memories = sa.table(
        "memories",
        sa.column("number", sa.Integer),
        sa.column("tenant", sa.String),
        sa.column("scope", sa.String),
        sa.column("content", sa.Text),
        sa.column("content_norm", sa.Text),
        sa.column("content_key", sa.String),
    )
    for row in bind.execute(sa.select(memories.c.number, memories.c.content_norm)).all():
        key = row.content_norm[:_KEY_CHARS] if len(row.content_norm) >= _KEY_CHARS else None
        bind.execute(memories.update().where(memories.c.number == row.number).values(content_key=key))

    op.create_table(
        "memory_vectors",
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("encoder_id", sa.String(length=128), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("number", "encoder_id"),
    )
    op.create_index("ix_memory_vectors_scope", "memory_vectors", ["tenant", "scope", "encoder_id", "number"])

    # Document frequency of each word: queries leave out words too common to be worth scoring.
    # (FTS5's own vocabulary table counts a word's documents by reading its whole doclist.)
    op.create_table(
        "term_stats",
        sa.Column("term", sa.String(length=128), nullable=False),
        sa.Column("docs", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("term"),
    )
    counts: dict[str, int] = {"": 0}  # "" counts all documents
    for row in bind.execute(sa.select(memories.c.content)).all():
        counts[""] += 1
        for term in set(_words(row.content)):
            counts[term] = counts.get(term, 0) + 1
    if counts:
        stats = sa.table("term_stats", sa.column("term", sa.String), sa.column("docs", sa.Integer))
        bind.execute(stats.insert(), [{"term": k, "docs": v} for k, v in counts.items()])


def downgrade() -> None:
    op.drop_index("ix_memory_vectors_scope", table_name="memory_vectors")
    op.drop_table("memory_vectors")
    op.drop_table("term_stats")
