"""Changing a column's declared type on SQLite without rebuilding its table.

SQLite never enforces a VARCHAR's length, so widening one changes no stored value; only the schema
text differs from the table definitions (tests/integration/test_schema_drift.py). Rebuilding the
table, as a batch alteration would, cannot work for `retrievals`: cursors and exposures reference
it, and SQLite does not let a migration's transaction switch foreign keys off. The declared type is
text in the schema table, with the same affinity either way, so it is edited in place, by the
procedure SQLite's ALTER TABLE documentation gives for changes that leave the stored rows as they
are (writable_schema, then a new schema_version so that open connections reread the schema).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op


def redeclare_sqlite_column(table: str, column: str, old: str, new: str) -> None:
    """`table.column NOT NULL` declared `new` instead of `old` (types as written, e.g. VARCHAR(256));
    nothing on another database."""
    bind = op.get_bind()
    if bind.dialect.name != "sqlite":
        return
    version = bind.exec_driver_sql("PRAGMA schema_version").scalar_one()
    bind.exec_driver_sql("PRAGMA writable_schema = ON")
    bind.execute(
        sa.text("UPDATE sqlite_master SET sql = replace(sql, :old, :new) WHERE type = 'table' AND name = :table"),
        {"old": f"{column} {old} NOT NULL", "new": f"{column} {new} NOT NULL", "table": table},
    )
    bind.exec_driver_sql(f"PRAGMA schema_version = {version + 1}")
    bind.exec_driver_sql("PRAGMA writable_schema = OFF")
