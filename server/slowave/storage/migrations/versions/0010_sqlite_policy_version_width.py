"""retrievals.policy_version declared VARCHAR(256) on SQLite too (0008 widened PostgreSQL's only).

SQLite never enforced the length, so no value changes; but the declared schema differed from the
table definitions (tests/integration/test_schema_drift.py). Rebuilding the table, as a batch
alteration would, cannot work here: cursors and exposures reference it, and SQLite does not let a
migration's transaction switch foreign keys off. The declared type is only text in the schema
table, with the same affinity either way, so it is edited in place, by the procedure SQLite's
ALTER TABLE documentation gives for changes that leave the stored rows as they are
(writable_schema, then a new schema_version so that open connections reread the schema).

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def _declare(old: str, new: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    bind.execute(
        sa.text("UPDATE sqlite_master SET sql = replace(sql, :old, :new) WHERE type = 'table' AND name = 'retrievals'"),
        {"old": f"policy_version {old} NOT NULL", "new": f"policy_version {new} NOT NULL"},
    )
    bind.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")


def upgrade() -> None:
    _declare("VARCHAR(128)", "VARCHAR(256)")


def downgrade() -> None:
    _declare("VARCHAR(256)", "VARCHAR(128)")
