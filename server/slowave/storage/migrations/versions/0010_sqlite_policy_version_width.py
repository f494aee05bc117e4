"""retrievals.policy_version declared VARCHAR(256) on SQLite too (0008 widened PostgreSQL's only).

SQLite never enforced the length, so no value changes; but the declared schema differed from the
table definitions. How it is changed in place: slowave.storage.migrations.declared_types.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

from slowave.storage.migrations.declared_types import redeclare_sqlite_column

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    redeclare_sqlite_column("retrievals", "policy_version", "VARCHAR(128)", "VARCHAR(256)")


def downgrade() -> None:
    redeclare_sqlite_column("retrievals", "policy_version", "VARCHAR(256)", "VARCHAR(128)")
