"""occasions.revision: a counter bumped by every change of an occasion's terms.

Retrieval keeps occasions' term profiles in a per-process cache and asked the store, on every
Activate and Recall, for each candidate occasion's claim count and the length of its terms to
tell whether its copy was current. Computing those lengths read every occasion's whole terms text
(≈ 4 KB each at 100k memories): 0.4-0.5 ms of each retrieval. The revision names one version of
the terms without reading them; existing occasions start at 0, which names what they hold now.

A cached (number, revision) must never name another occasion: erasing a scope deletes its
occasions, and SQLite gives a new row the number after the largest left, so the next occasion
could take an erased one's number and, claim by claim, its revision. On SQLite the table is
rebuilt with AUTOINCREMENT, which never hands out a number twice; PostgreSQL's sequence never did.

Revision ID: 0013
Revises: 0012
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def _revision() -> sa.Column:
    return sa.Column("revision", sa.Integer(), nullable=False, server_default=sa.text("0"))


def upgrade() -> None:
    if op.get_bind().dialect.name != "sqlite":
        op.add_column("occasions", _revision())
        return
    with op.batch_alter_table(
        "occasions", recreate="always", table_kwargs={"sqlite_autoincrement": True}
    ) as batch:  # copies the rows, numbers kept; sqlite_sequence starts at the largest
        batch.add_column(_revision())


def downgrade() -> None:
    op.drop_column("occasions", "revision")
