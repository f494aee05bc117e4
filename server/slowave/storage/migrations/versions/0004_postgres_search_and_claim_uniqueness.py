"""PostgreSQL full-text index (tsvector + GIN); at most one active memory per claim.

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import re
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None

_WORD = re.compile(r"[^\W_]+")


def _words(text: str) -> str:
    # As slowave.domain.relevance.tokens at the time of writing (migrations never import app code).
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(ch))
    return " ".join(_WORD.findall(folded))


def upgrade() -> None:
    bind = op.get_bind()
    # The duplicate rule of behaviour §6 as a constraint: two concurrent Remembers of one claim cannot
    # both create it (the loser's transaction fails and is retried as MATCHED).
    op.create_index(
        "uq_memories_active_claim",
        "memories",
        ["tenant", "scope", "type", "content_hash"],
        unique=True,
        sqlite_where=sa.text("status = 'active'"),
        postgresql_where=sa.text("status = 'active'"),
    )
    if bind.dialect.name != "postgresql":
        return
    # The words are the service's own tokens (the same the SQLite index and relevance use), indexed
    # with the `simple` configuration: no stemming, no stop words, any language.
    op.execute("ALTER TABLE memories ADD COLUMN content_tsv tsvector")
    memories = sa.table("memories", sa.column("number", sa.Integer), sa.column("content", sa.Text))
    update = sa.text("UPDATE memories SET content_tsv = to_tsvector('simple', :w) WHERE number = :n")
    for row in bind.execute(sa.select(memories.c.number, memories.c.content)).all():
        bind.execute(update, {"w": _words(row.content), "n": row.number})
    op.execute("CREATE INDEX ix_memories_content_tsv ON memories USING gin (content_tsv)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("DROP INDEX ix_memories_content_tsv")
        op.execute("ALTER TABLE memories DROP COLUMN content_tsv")
    op.drop_index("uq_memories_active_claim", table_name="memories")
