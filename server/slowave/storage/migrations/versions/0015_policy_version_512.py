"""retrievals.policy_version widened to VARCHAR(512).

The label names every constant that shapes ranking, and it reached 255 of its 256 characters; the
static encoder that leaves number tokens out of its mean (`…:mean-words-nonum`) made it 261. A
wider column costs nothing (PostgreSQL stores a VARCHAR by its length; SQLite never enforced one).

Revision ID: 0015
Revises: 0014
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

from slowave.storage.migrations.declared_types import redeclare_sqlite_column

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "retrievals", "policy_version", type_=sa.String(512), existing_type=sa.String(256), existing_nullable=False
        )
    redeclare_sqlite_column("retrievals", "policy_version", "VARCHAR(256)", "VARCHAR(512)")


def downgrade() -> None:
    if op.get_bind().dialect.name == "postgresql":
        op.alter_column(
            "retrievals", "policy_version", type_=sa.String(256), existing_type=sa.String(512), existing_nullable=False
        )
    redeclare_sqlite_column("retrievals", "policy_version", "VARCHAR(512)", "VARCHAR(256)")
