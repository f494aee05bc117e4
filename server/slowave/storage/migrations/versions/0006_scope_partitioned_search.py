"""Full-text index and term statistics partitioned by tenant and scope.

Word counts were kept over the whole deployment (`term_stats`) and, on SQLite, FTS5's bm25 read
index-wide statistics: one tenant's words changed another tenant's relevance. Now `scope_terms`
counts per (tenant, scope) — with the total word count, for BM25's average length — and every
indexed word carries its partition's key, so postings hold one scope's memories only.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# As slowave.domain.relevance and slowave.storage.search_terms at the time of writing
# (migrations never import application code, which may change after them).
_WORD = re.compile(r"[^\W_]+")
_TOTAL_DOCS, _TOTAL_WORDS = "", " words"


def _tokens(text: str) -> list[str]:
    folded = text.casefold()
    if not folded.isascii():
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return _WORD.findall(folded)


def _key(tenant: str, scope: str) -> str:
    return "s" + hashlib.sha256(f"{tenant}\0{scope}".encode()).hexdigest()[:11]


def _index_text(key: str, words: list[str]) -> str:
    return " ".join(f"{key}a{w}" if w.isascii() else f"{key}u{w.encode('utf-8').hex()}" for w in sorted(set(words)))


def upgrade() -> None:
    bind = op.get_bind()
    postgres = bind.dialect.name == "postgresql"
    scope_terms = op.create_table(
        "scope_terms",
        sa.Column("tenant", sa.String(64), primary_key=True),
        sa.Column("scope", sa.String(256), primary_key=True),
        sa.Column("term", sa.String(128), primary_key=True),
        sa.Column("docs", sa.BigInteger(), nullable=False),
    )
    op.drop_table("term_stats")
    if postgres:
        update = sa.text("UPDATE memories SET content_tsv = to_tsvector('simple', :w) WHERE number = :n")
    else:
        op.execute("DROP TABLE memories_fts")
        # Contentless (memories hold the text), no positions (queries are sets of words), ASCII
        # tokens (search_terms writes letters and digits only).
        op.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(words, content='', detail=none, tokenize='ascii')")
        # Merge segments once two of a level exist (default four): an index grown one Remember at a
        # time then stays nearly as compact as a rebuilt one, which at 100k memories saves ~1.5 ms
        # per query for ~6 % of Remember throughput (measured with bench/scale.py's workload).
        op.execute("INSERT INTO memories_fts(memories_fts, rank) VALUES ('automerge', 2)")
        update = sa.text("INSERT INTO memories_fts(rowid, words) VALUES (:n, :w)")

    memories = sa.table(
        "memories",
        sa.column("number", sa.Integer),
        sa.column("tenant", sa.String),
        sa.column("scope", sa.String),
        sa.column("content", sa.Text),
    )
    counts: dict[tuple[str, str, str], int] = {}
    batch: list[dict] = []
    query = sa.select(memories.c.number, memories.c.tenant, memories.c.scope, memories.c.content).order_by(
        memories.c.number
    )
    for number, tenant, scope, content in bind.execute(query):
        words = _tokens(content)
        for term, n in ((_TOTAL_DOCS, 1), (_TOTAL_WORDS, len(words)), *((w[:128], 1) for w in set(words))):
            counts[(tenant, scope, term)] = counts.get((tenant, scope, term), 0) + n
        batch.append({"n": number, "w": _index_text(_key(tenant, scope), words)})
        if len(batch) >= 1000:
            bind.execute(update, batch)
            batch = []
    if batch:
        bind.execute(update, batch)
    rows = [{"tenant": k[0], "scope": k[1], "term": k[2], "docs": v} for k, v in counts.items()]
    for i in range(0, len(rows), 5000):
        bind.execute(sa.insert(scope_terms), rows[i : i + 5000])


def downgrade() -> None:
    raise NotImplementedError("0006 rewrites the full-text index; restore a backup taken before upgrading")
