"""Erasure's audit record: when, who, what was named, how many rows of each table changed.

`slowave-admin erase` removes content everywhere it lives (service.erasure); this table keeps the
trace an operator needs to show that it happened, and no erased text.

Revision ID: 0011
Revises: 0010
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "erasures",
        sa.Column("id", sa.Integer(), primary_key=True, autoincrement=True),
        sa.Column("erased_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("command", sa.String(256), nullable=False),
        sa.Column("actor", sa.String(256), nullable=False),
        sa.Column("tenant", sa.String(64), nullable=False),
        sa.Column("scope", sa.String(256)),
        sa.Column("memory_ids", sa.JSON()),
        sa.Column("reason", sa.Text()),
        sa.Column("counts", sa.JSON(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("erasures")
