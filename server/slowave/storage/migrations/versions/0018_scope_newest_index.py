"""PostgreSQL: an index of each scope's memories by number, for reading a scope's newest memories.

A full-text query of common words only (all of the cue's two or three rarest, each in many
memories) reads the scope's newest memories first and asks the GIN index only when they hold too
few matches (storage.full_text.RECENT_MATCHES): PostgreSQL takes common words to occur together as
often as chance has it, and for two that never do it walked the whole scope (403 ms at 170k
memories, bench/results/history.md 2026-12-07). Without this index the newest memories could only
be the table's: with several scopes written to, those were mostly other scopes', and a query of
two words found together in 24k memories then read every one of them from the GIN index (168 ms).
SQLite's full-text index streams matches newest first and needs no such read; the index is not
made there. It is on the negated number, which the primary key cannot order by: on (tenant, scope,
number), PostgreSQL walked the primary key backwards for a scope it took to be most of the table,
skipping the other scopes' newer memories one by one (113 ms past 45k of them).

Revision ID: 0018
Revises: 0017
"""

from __future__ import annotations

from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.execute("CREATE INDEX ix_memories_scope_newest ON memories (tenant, scope, (-number))")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.drop_index("ix_memories_scope_newest", table_name="memories")
