"""Initial schema: sessions, memories, the feedback ledger, procedures, retrievals.

Revision ID: 0001
Revises:
Create Date: 2026-11-29 20:57:28.451482
"""

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:

    op.create_table(
        "consolidation_queue",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("enqueued_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("consolidation_queue", schema=None) as batch_op:
        batch_op.create_index("ix_consolidation_pending", ["done_at", "id"], unique=False)

    op.create_table(
        "continuity_tokens",
        sa.Column("id", sa.String(length=128), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_table(
        "episodes",
        sa.Column("number", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("event_number", sa.Integer(), nullable=False),
        sa.Column("previous_event_number", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("number"),
    )
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.create_index("ix_episodes_event", ["event_number"], unique=False)
        batch_op.create_index("ix_episodes_previous", ["previous_event_number"], unique=False)

    op.create_table(
        "feedback_rows",
        sa.Column("seq", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("event_id", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("retrieval_id", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("target_kind", sa.String(length=16), nullable=False),
        sa.Column("target_id", sa.String(length=256), nullable=False),
        sa.Column("accepted", sa.Boolean(), nullable=False),
        sa.Column("implicit", sa.Boolean(), nullable=False),
        sa.Column("effective", sa.Boolean(), nullable=False),
        sa.Column("service_authored", sa.Boolean(), nullable=False),
        sa.Column("rejection_reason", sa.String(length=64), nullable=True),
        sa.Column("rejection_field", sa.String(length=64), nullable=True),
        sa.Column("assessment", sa.String(length=32), nullable=True),
        sa.Column("stale_reason", sa.String(length=32), nullable=True),
        sa.Column("replacement_memory_id", sa.String(length=256), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("relevance", sa.String(length=32), nullable=True),
        sa.Column("effect", sa.String(length=32), nullable=True),
        sa.Column("use", sa.String(length=32), nullable=True),
        sa.Column("contribution", sa.Text(), nullable=True),
        sa.Column("requested_coverage", sa.String(length=16), nullable=True),
        sa.Column("retrieval_quality", sa.Text(), nullable=True),
        sa.Column("missing", sa.JSON(), nullable=True),
        sa.Column("previous_accepted_seq", sa.Integer(), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("seq"),
        sa.UniqueConstraint("event_id"),
    )
    with op.batch_alter_table("feedback_rows", schema=None) as batch_op:
        batch_op.create_index("ix_feedback_rows_pair", ["retrieval_id", "target_kind", "target_id"], unique=False)
        batch_op.create_index("ix_feedback_rows_target", ["target_kind", "target_id", "effective"], unique=False)

    op.create_table(
        "knowledge_gaps",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("text_hash", sa.String(length=64), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("occurrences", sa.Integer(), nullable=False),
        sa.Column("open", sa.Boolean(), nullable=False),
        sa.Column("first_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("tenant", "scope", "text_hash", name="uq_gap_text"),
    )
    op.create_table(
        "memories",
        sa.Column("number", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("type", sa.String(length=32), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("content_norm", sa.Text(), nullable=False),
        sa.Column("content_hash", sa.String(length=64), nullable=False),
        sa.Column("content_key", sa.String(length=32), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("stale_reason", sa.String(length=32), nullable=True),
        sa.Column("superseded_by", sa.Integer(), nullable=True),
        sa.Column("retired_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("learned_units", sa.Integer(), nullable=False),
        sa.Column("source_kind", sa.String(length=32), nullable=False),
        sa.Column("source_event", sa.Integer(), nullable=True),
        sa.Column("source_session_id", sa.String(length=64), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("number"),
    )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.create_index("ix_memories_claim", ["tenant", "scope", "type", "content_hash"], unique=False)
        batch_op.create_index("ix_memories_scope_status", ["tenant", "scope", "status"], unique=False)
        batch_op.create_index("ix_memories_content_key", ["tenant", "scope", "content_key"], unique=False)

    op.create_table(
        "procedures",
        sa.Column("id", sa.String(length=80), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("goal", sa.Text(), nullable=False),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("context", sa.JSON(), nullable=False),
        sa.Column("steps", sa.JSON(), nullable=False),
        sa.Column("caveats", sa.JSON(), nullable=False),
        sa.Column("applicability_text", sa.Text(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ev_used", sa.Integer(), nullable=False),
        sa.Column("ev_not_used", sa.Integer(), nullable=False),
        sa.Column("ev_unassessable", sa.Integer(), nullable=False),
        sa.Column("ev_helped", sa.Integer(), nullable=False),
        sa.Column("ev_no_effect", sa.Integer(), nullable=False),
        sa.Column("ev_harmed", sa.Integer(), nullable=False),
        sa.Column("ev_unknown", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("procedures", schema=None) as batch_op:
        batch_op.create_index("ix_procedures_scope", ["tenant", "scope"], unique=False)

    op.create_table(
        "retrievals",
        sa.Column("number", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("page_size", sa.Integer(), nullable=False),
        sa.Column("policy_version", sa.String(length=128), nullable=False),
        sa.Column("relevant_total", sa.Integer(), nullable=False),
        sa.Column("catalog_truncated", sa.Boolean(), nullable=False),
        sa.Column("catalog", sa.JSON(), nullable=False),
        sa.PrimaryKeyConstraint("number"),
        sa.UniqueConstraint("id"),
    )
    with op.batch_alter_table("retrievals", schema=None) as batch_op:
        batch_op.create_index("ix_retrievals_session", ["session_id", "number"], unique=False)

    op.create_table(
        "session_memory_links",
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("memory_number", sa.Integer(), nullable=False),
        sa.Column("created_by_session", sa.Boolean(), nullable=False),
        sa.Column("summary_hash", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "memory_number"),
    )
    op.create_table(
        "sessions",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("scope", sa.String(length=256), nullable=False),
        sa.Column("task", sa.Text(), nullable=False),
        sa.Column("initial_goal", sa.Text(), nullable=False),
        sa.Column("task_context", sa.JSON(), nullable=False),
        sa.Column("continuity_id", sa.String(length=128), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("feedback_status", sa.String(length=16), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_activity_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("final_goal", sa.Text(), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=True),
        sa.Column("outcome_summary", sa.Text(), nullable=True),
        sa.Column("verification", sa.JSON(), nullable=True),
        sa.Column("recall_calls", sa.Integer(), nullable=False),
        sa.Column("session_events", sa.Integer(), nullable=False),
        sa.Column("completion_recorded", sa.Boolean(), nullable=False),
        sa.Column("trajectory_stored", sa.Integer(), nullable=True),
        sa.Column("procedure_id", sa.String(length=80), nullable=True),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.create_index("ix_sessions_state_activity", ["state", "last_activity_at"], unique=False)
        batch_op.create_index("ix_sessions_tenant_scope", ["tenant", "scope"], unique=False)

    op.create_table(
        "source_events",
        sa.Column("number", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("tenant", sa.String(length=64), nullable=False),
        sa.Column("session_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("memory_number", sa.Integer(), nullable=True),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("occurred_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("recorded_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("position", sa.Integer(), nullable=True),
        sa.Column("entry_kind", sa.String(length=16), nullable=True),
        sa.Column("entry_status", sa.String(length=16), nullable=True),
        sa.PrimaryKeyConstraint("number"),
    )
    with op.batch_alter_table("source_events", schema=None) as batch_op:
        batch_op.create_index("ix_source_events_memory", ["memory_number"], unique=False)
        batch_op.create_index("ix_source_events_session", ["session_id", "number"], unique=False)

    op.create_table(
        "cursors",
        sa.Column("id", sa.String(length=64), nullable=False),
        sa.Column("retrieval_id", sa.String(length=64), nullable=False),
        sa.Column("memory_offset", sa.Integer(), nullable=False),
        sa.Column("procedure_offset", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["retrieval_id"],
            ["retrievals.id"],
        ),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("retrieval_id", "memory_offset", "procedure_offset", name="uq_cursor_position"),
    )
    op.create_table(
        "exposures",
        sa.Column("retrieval_id", sa.String(length=64), nullable=False),
        sa.Column("target_kind", sa.String(length=16), nullable=False),
        sa.Column("target_id", sa.String(length=80), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("covered", sa.Boolean(), nullable=False),
        sa.Column("effective_seq", sa.Integer(), nullable=True),
        sa.ForeignKeyConstraint(
            ["retrieval_id"],
            ["retrievals.id"],
        ),
        sa.PrimaryKeyConstraint("retrieval_id", "target_kind", "target_id"),
    )

    # SQLite's own full-text index over memory content (FTS5, bm25); rowid = memory number.
    # PostgreSQL gets its tsvector + GIN index in its own migration.
    if op.get_bind().dialect.name == "sqlite":
        op.execute("CREATE VIRTUAL TABLE memories_fts USING fts5(content, tokenize = 'unicode61 remove_diacritics 2')")


def downgrade() -> None:
    if op.get_bind().dialect.name == "sqlite":
        op.execute("DROP TABLE memories_fts")

    op.drop_table("exposures")
    op.drop_table("cursors")
    with op.batch_alter_table("source_events", schema=None) as batch_op:
        batch_op.drop_index("ix_source_events_session")
        batch_op.drop_index("ix_source_events_memory")

    op.drop_table("source_events")
    with op.batch_alter_table("sessions", schema=None) as batch_op:
        batch_op.drop_index("ix_sessions_tenant_scope")
        batch_op.drop_index("ix_sessions_state_activity")

    op.drop_table("sessions")
    op.drop_table("session_memory_links")
    with op.batch_alter_table("retrievals", schema=None) as batch_op:
        batch_op.drop_index("ix_retrievals_session")

    op.drop_table("retrievals")
    with op.batch_alter_table("procedures", schema=None) as batch_op:
        batch_op.drop_index("ix_procedures_scope")

    op.drop_table("procedures")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index("ix_memories_scope_status")
        batch_op.drop_index("ix_memories_claim")

    op.drop_table("memories")
    op.drop_table("knowledge_gaps")
    with op.batch_alter_table("feedback_rows", schema=None) as batch_op:
        batch_op.drop_index("ix_feedback_rows_target")
        batch_op.drop_index("ix_feedback_rows_pair")

    op.drop_table("feedback_rows")
    with op.batch_alter_table("episodes", schema=None) as batch_op:
        batch_op.drop_index("ix_episodes_previous")
        batch_op.drop_index("ix_episodes_event")

    op.drop_table("episodes")
    op.drop_table("continuity_tokens")
    with op.batch_alter_table("consolidation_queue", schema=None) as batch_op:
        batch_op.drop_index("ix_consolidation_pending")

    op.drop_table("consolidation_queue")
