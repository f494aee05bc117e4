"""Total word count of all memories in term_stats (BM25's average length, computed by the service).

Revision ID: 0006
Revises: 0005
"""
from __future__ import annotations

import re
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

_WORD = re.compile(r"[^\W_]+")
_TOTAL_WORDS = " words"  # slowave.domain.relevance.TOTAL_WORDS_TERM at the time of writing


def _word_count(text: str) -> int:
    # As slowave.domain.relevance.tokens at the time of writing (migrations never import app code).
    folded = "".join(ch for ch in unicodedata.normalize("NFKD", text.casefold()) if not unicodedata.combining(ch))
    return len(_WORD.findall(folded))


def upgrade() -> None:
    bind = op.get_bind()
    memories = sa.table("memories", sa.column("content", sa.Text))
    total = sum(_word_count(content) for (content,) in bind.execute(sa.select(memories.c.content)))
    term_stats = sa.table("term_stats", sa.column("term", sa.String), sa.column("docs", sa.Integer))
    bind.execute(sa.delete(term_stats).where(term_stats.c.term == _TOTAL_WORDS))
    bind.execute(sa.insert(term_stats).values(term=_TOTAL_WORDS, docs=total))


def downgrade() -> None:
    term_stats = sa.table("term_stats", sa.column("term", sa.String))
    op.get_bind().execute(sa.delete(term_stats).where(term_stats.c.term == _TOTAL_WORDS))
