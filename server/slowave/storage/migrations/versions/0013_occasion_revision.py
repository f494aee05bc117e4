"""occasions.revision: a counter bumped by every change of an occasion's terms.

Retrieval keeps occasions' term profiles in a per-process cache and asked the store, on every
Activate and Recall, for each candidate occasion's claim count and the length of its terms to
tell whether its copy was current. Computing those lengths read every occasion's whole terms text
(≈ 4 KB each at 100k memories): 0.4-0.5 ms of each retrieval. The revision names one version of
the terms without reading them; existing occasions start at 0, which names what they hold now.

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


def upgrade() -> None:
    op.add_column("occasions", sa.Column("revision", sa.Integer(), nullable=False, server_default=sa.text("0")))


def downgrade() -> None:
    op.drop_column("occasions", "revision")
