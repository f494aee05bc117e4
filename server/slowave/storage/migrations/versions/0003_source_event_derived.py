"""A memory's source event is derived from source_events (its first one), not stored twice.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("source_event")


def downgrade() -> None:
    import sqlalchemy as sa

    with op.batch_alter_table("memories") as batch:
        batch.add_column(sa.Column("source_event", sa.Integer(), nullable=True))
    op.execute(
        "UPDATE memories SET source_event = "
        "(SELECT min(e.number) FROM source_events e WHERE e.memory_number = memories.number)"
    )
