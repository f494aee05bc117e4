"""Frozen catalogs of ended sessions released.

A retrieval's catalog (its ranked memories and procedures with their signals, ~3.4 KB at 50
memories) only serves the continuation pages of its session, and an ended session refuses them
(SESSION_ENDED). Since this revision Commit and the reaper release the catalogs of the session
they end (storage.retrievals.RELEASED_CATALOG); this migration releases those of the sessions
that ended before. Feedback, the commit gate and learning read the retrievals' other columns and
their exposures, which stay. SQLite reuses the space as later rows are written; the file itself
shrinks only by VACUUM.

Revision ID: 0019
Revises: 0018
"""

from __future__ import annotations

import json

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None

# storage.retrievals.RELEASED_CATALOG, as it was written at this revision.
_RELEASED = json.dumps({"released": True})


def upgrade() -> None:
    bind = op.get_bind()
    catalog = "CAST(:released AS JSON)" if bind.dialect.name == "postgresql" else ":released"
    bind.execute(
        sa.text(
            f"UPDATE retrievals SET catalog = {catalog} "
            "WHERE session_id IN (SELECT id FROM sessions WHERE state <> 'open')"
        ),
        {"released": _RELEASED},
    )


def downgrade() -> None:
    pass  # a released catalog cannot be restored, and an ended session never reads it
