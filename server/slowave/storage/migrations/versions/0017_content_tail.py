"""Each memory's last characters beside its first (memories.content_tail), and the containment index
sought by them.

The admission floor (behaviour §12.1) finds the memories whose whole text occurs in a cue through
the index on their first 16 characters: every 16 characters of the cue are looked up. In a scope of
claims that begin alike ("The on-call owner for …") a long cue that quotes a few of them found
thousands of memories by their beginning alone, each then searched for in the whole cue: an
Activate whose 4 KiB task pasted store-like notes took 280 ms on 100k memories (bench/results/
history.md, 2026-12-06 22:00). A contained memory's last 16 characters occur in the cue too, and they are
far less alike than the first: sharing one's end with another memory, on average, 1.4 memories
against 7.0 sharing one's beginning among LoCoMo's turns, about the same in bench/corpus.py's agent
scopes (26.7 and 21.4). The index is now sought by the last characters and holds the first, so the
floor's query drops a memory whose beginning the cue lacks without reading its row.

Revision ID: 0017
Revises: 0016
"""

from __future__ import annotations

from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None

# storage.tables.CONTENT_TAIL as written when this migration was (migrations never import app code).
_TAIL = "CASE WHEN length(content_norm) >= 16 THEN substr(content_norm, length(content_norm) - 15) END"


def upgrade() -> None:
    # Generated from the text by the database: STORED on PostgreSQL (all it has before 18); SQLite
    # adds only VIRTUAL columns to a table, and its index keeps the values.
    stored = " STORED" if op.get_bind().dialect.name == "postgresql" else ""
    op.execute(f"ALTER TABLE memories ADD COLUMN content_tail VARCHAR(32) GENERATED ALWAYS AS ({_TAIL}){stored}")
    op.drop_index("ix_memories_content_key", table_name="memories")
    op.create_index("ix_memories_content_tail", "memories", ["tenant", "scope", "content_tail", "content_key"])


def downgrade() -> None:
    op.drop_index("ix_memories_content_tail", table_name="memories")
    op.create_index("ix_memories_content_key", "memories", ["tenant", "scope", "content_key"])
    op.drop_column("memories", "content_tail")
