"""The migrations build exactly the schema that storage.tables describes (both backends: the suite
runs again on PostgreSQL): Alembic's autogenerate comparison of a freshly migrated database
against the table definitions finds nothing."""

from __future__ import annotations

import warnings

from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext

from slowave.storage import tables
from slowave.storage.database import Database
from tests.support import new_database_url


def test_migrations_match_the_table_definitions(tmp_path):
    db = Database(new_database_url(tmp_path))
    db.migrate()
    try:
        with db.engine.connect() as conn:
            context = MigrationContext.configure(
                conn, opts={"compare_type": True, "compare_server_default": True, "include_name": tables.compared}
            )
            with warnings.catch_warnings():
                # PostgreSQL keeps a generated column's expression in a form of its own (parentheses,
                # casts) that alembic compares as text; what the expression yields is tested by
                # test_containment_keys on both backends.
                warnings.filterwarnings("ignore", "Computed default on memories.content_tail cannot be modified")
                differences = compare_metadata(context, tables.metadata)
    finally:
        db.dispose()
    assert differences == []
