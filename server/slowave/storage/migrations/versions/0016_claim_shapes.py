"""Each memory's claim shape stored with it (memories.claim_shape).

Remember's flags (`similar`, `possibly_supersedes`) and Activate's check for two versions of one
fact compare a claim with older ones by their shapes (domain.near_duplicates: wording terms and
value slots). Parsing a claim costs ≈ 50 µs and every flag compares about ten older claims, so each
process kept the shape of every claim it had compared: ≈ 190 MB at 100k memories, and a process
that had just started parsed them all again. The shape is now parsed once, at Remember, and stored
as a compact record whose first field names the parse's version; a claim without a record of the
running version is parsed as before. The column starts empty: a starting server fills it for the
active memories (service.shape_backfill), so this migration takes no time.

Revision ID: 0016
Revises: 0015
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("memories", sa.Column("claim_shape", sa.Text()))


def downgrade() -> None:
    op.drop_column("memories", "claim_shape")
