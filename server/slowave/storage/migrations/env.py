"""Alembic environment: runs on the connection the service hands it (see storage.database)."""

from __future__ import annotations

from alembic import context

from slowave.storage.tables import compared, metadata

connection = context.config.attributes.get("connection")
if connection is None:  # the alembic CLI, for authoring migrations
    from sqlalchemy import create_engine

    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
    connection = engine.connect()

context.configure(connection=connection, target_metadata=metadata, render_as_batch=True, include_name=compared)
with context.begin_transaction():
    context.run_migrations()
