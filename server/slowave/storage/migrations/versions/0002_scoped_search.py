"""Scoped full-text search, longer containment keys, memory vectors for the semantic channel.

Revision ID: 0002
Revises: 0001
"""
from __future__ import annotations

import hashlib

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None

_KEY_CHARS = 16


def _scope_token(tenant: str, scope: str) -> str:
    # Kept identical to slowave.storage.repository.scope_token (a migration must not import app code
    # that may change later).
    return "scope" + hashlib.sha256(f"{tenant}\x1f{scope}".encode()).hexdigest()[:20]


def upgrade() -> None:
    bind = op.get_bind()
    memories = sa.table("memories", sa.column("number", sa.Integer), sa.column("tenant", sa.String),
                        sa.column("scope", sa.String), sa.column("content", sa.Text),
                        sa.column("content_norm", sa.Text), sa.column("content_key", sa.String))
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

    if bind.dialect.name == "sqlite":
        # The index now carries a per-scope token, so a query is restricted to its scope inside FTS5.
        op.execute("DROP TABLE memories_fts")
        op.execute(
            "CREATE VIRTUAL TABLE memories_fts USING fts5(content, scope_key, tokenize = 'unicode61 remove_diacritics 2')"
        )
        op.execute("CREATE VIRTUAL TABLE memories_vocab USING fts5vocab(memories_fts, 'row')")
        insert = sa.text("INSERT INTO memories_fts(rowid, content, scope_key) VALUES (:n, :c, :k)")
        for row in bind.execute(sa.select(memories.c.number, memories.c.tenant, memories.c.scope, memories.c.content)).all():
            bind.execute(insert, {"n": row.number, "c": row.content, "k": _scope_token(row.tenant, row.scope)})


def downgrade() -> None:
    op.drop_index("ix_memory_vectors_scope", table_name="memory_vectors")
    op.drop_table("memory_vectors")
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE memories_vocab")
        op.execute("DROP TABLE memories_fts")
        op.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(content, tokenize = 'unicode61 remove_diacritics 2')")
        op.execute("INSERT INTO memories_fts(rowid, content) SELECT number, content FROM memories")
