"""The schema, as SQLAlchemy Core tables. Alembic migrations (storage/migrations) create it.

Memories and the feedback ledger are the truth; per-cue learned evidence and procedure evidence
counters are projections of the ledger kept under row locks; the full-text index is a projection of
memories.
"""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Computed,
    DateTime,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    false,
    text,
)
from sqlalchemy.types import TypeDecorator

CONTENT_KEY_CHARS = 16
"""Characters of a memory's text at each end that the containment index holds (content_key, content_tail)."""
CONTENT_TAIL = (
    f"CASE WHEN length(content_norm) >= {CONTENT_KEY_CHARS} "
    f"THEN substr(content_norm, length(content_norm) - {CONTENT_KEY_CHARS - 1}) END"
)
"""memories.content_tail: the text's last CONTENT_KEY_CHARS characters (both backends count characters)."""


class UtcDateTime(TypeDecorator):
    """Timezone-aware UTC datetimes on every backend (SQLite stores them naive)."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect):
        if value is None:
            return None
        return value.astimezone(UTC) if dialect.name != "sqlite" else value.astimezone(UTC).replace(tzinfo=None)

    def process_result_value(self, value: datetime | None, dialect):
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


metadata = MetaData()

sessions = Table(
    "sessions",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("task", Text, nullable=False),
    Column("initial_goal", Text, nullable=False),
    Column("task_context", JSON, nullable=False),
    Column("continuity_id", String(128)),
    Column("state", String(16), nullable=False),  # open | closed | reaped
    Column("feedback_status", String(16), nullable=False),  # pending | complete | incomplete
    Column("started_at", UtcDateTime, nullable=False),
    Column("last_activity_at", UtcDateTime, nullable=False),
    Column("ended_at", UtcDateTime),
    Column("final_goal", Text),
    Column("outcome", String(16)),
    Column("outcome_summary", Text),
    Column("verification", JSON),
    Column("recall_calls", Integer, nullable=False, default=0),
    Column("session_events", Integer, nullable=False, default=0),
    Column("completion_recorded", Boolean, nullable=False, default=False),
    Column("trajectory_stored", Integer),  # number of stored entries; NULL = no trajectory stored
    Column("procedure_id", String(80)),
    Index("ix_sessions_state_activity", "state", "last_activity_at"),
    Index("ix_sessions_tenant_scope", "tenant", "scope"),
)

continuity_tokens = Table(
    "continuity_tokens",
    metadata,
    Column("id", String(128), primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("last_seen_at", UtcDateTime, nullable=False),
)

# A memory's occasion (migration 0012): the claims one session remembered about one day (their
# `occurred_at` date, or none), at most OCCASION_CLAIMS of them, whose terms together say what the
# occasion was about (relevance.OccasionScorer). `terms` holds their content terms separated by
# spaces, in the order they were remembered; scope_terms counts the scope's occasions and their terms.
occasions = Table(
    "occasions",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("day", String(10), nullable=False),  # occurred_on of its claims, "" when they have none
    Column("claims", Integer, nullable=False),
    Column("terms", Text, nullable=False),
    # Bumped by every change of `terms`: names one version of them (storage.occasions' profile cache).
    Column("revision", Integer, nullable=False, default=0, server_default=text("0")),
    Index("ix_occasions_session_day", "tenant", "scope", "session_id", "day"),
    # Numbers never reused after a scope's erasure deletes its occasions (SQLite's AUTOINCREMENT;
    # PostgreSQL's sequence): a cached (number, revision) names one occasion's terms for good.
    sqlite_autoincrement=True,
)

memories = Table(
    "memories",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("type", String(32), nullable=False),
    Column("content", Text, nullable=False),
    Column("content_norm", Text, nullable=False),  # normalised as in behaviour §6 (admission floor)
    Column("content_hash", String(64), nullable=False),  # sha256 of content_norm (duplicate claims)
    # First CONTENT_KEY_CHARS characters of content_norm (NULL when shorter): finds the memories
    # whose whole text occurs inside a cue through an index, whatever the script or word breaks.
    Column("content_key", String(32)),
    # Its last CONTENT_KEY_CHARS (NULL when shorter), which such a cue holds too; the index is sought by
    # them, as memories end less alike than they begin (migration 0017). Generated by the database
    # from content_norm, so every writer (and the erasure's blanking) keeps it exact.
    Column("content_tail", String(32), Computed(CONTENT_TAIL)),
    Column("status", String(16), nullable=False),  # active | retired
    Column("stale_reason", String(32)),
    Column("superseded_by", Integer),
    Column("retired_at", UtcDateTime),
    # Ledger rows from this seq on count for nothing (behaviour §12.1: recorded after retirement).
    Column("retired_seq", Integer),
    # Distinct cues under which the memory's evidence sum is positive / negative (migration 0008).
    Column("positive_cues", Integer, nullable=False, default=0, server_default=text("0")),
    Column("negative_cues", Integer, nullable=False, default=0, server_default=text("0")),
    Column("source_kind", String(32), nullable=False),  # explicit_remember | consolidated
    Column("source_session_id", String(64)),
    Column("created_at", UtcDateTime, nullable=False),
    # When what the claim describes happened (the creating claim's occurred_at), and its UTC
    # calendar date, which retrieval reads as plain text (domain.dates).
    Column("occurred_at", UtcDateTime),
    Column("occurred_on", String(10)),
    # The session context indexed with the memory: the terms of the claims stored just before it in
    # the same session, fixed at Remember (relevance.LexicalScorer), separated by spaces.
    Column("context_terms", Text),
    # Its own terms (content and occurrence date's words) in order, as indexed (migration 0009).
    Column("own_terms", Text),
    # Its occasion (occasions.number), for memories remembered in a session (migration 0012).
    Column("occasion", Integer),
    # Its claim's shape as the near-duplicate rules read it (domain.near_duplicates.shape_record),
    # parsed once at Remember; NULL or of another version: parsed when compared (migration 0016).
    Column("claim_shape", Text),
    Index("ix_memories_claim", "tenant", "scope", "type", "content_hash"),
    Index("ix_memories_scope_status", "tenant", "scope", "status"),
    Index("ix_memories_content_tail", "tenant", "scope", "content_tail", "content_key"),
    Index(
        "uq_memories_active_claim",
        "tenant",
        "scope",
        "type",
        "content_hash",
        unique=True,
        sqlite_where=text("status = 'active'"),
        postgresql_where=text("status = 'active'"),
    ),
    # The full-text index (migration 0006; words written by storage.search_terms): SQLite, the
    # contentless FTS5 table memories_fts; PostgreSQL, content_tsv tsvector + GIN index.
)

# The full-text index's objects, which only the migrations describe (an FTS5 virtual table and its
# shadow tables; a tsvector column and its GIN index): SQLAlchemy has no construct for the first
# and the second exists on one backend only. Schema comparisons leave them out.
FULL_TEXT_INDEX = frozenset(
    {
        "memories_fts",
        "memories_fts_config",
        "memories_fts_data",
        "memories_fts_docsize",
        "memories_fts_idx",
        "content_tsv",
        "ix_memories_content_tsv",
        "ix_memories_scope_newest",  # PostgreSQL only (migration 0018): full_text.RECENT_MATCHES
    }
)


def compared(name: str | None, type_: str, parents: dict) -> bool:
    """Alembic's `include_name` filter: everything but the full-text index."""
    return name not in FULL_TEXT_INDEX


memory_vectors = Table(
    "memory_vectors",
    metadata,
    Column("number", Integer, primary_key=True),
    Column("encoder_id", String(128), primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("vector", LargeBinary, nullable=False),  # float32, L2-normalised
    Index("ix_memory_vectors_scope", "tenant", "scope", "encoder_id", "number"),
)

scope_terms = Table(
    # Per-scope term statistics (relevance and query planning read only the caller's own scope, so
    # no tenant's words influence another's results). Counts every memory ever indexed in the scope,
    # as the full-text index does; the pseudo-terms "" and " words" hold the number of memories and
    # their total term count (relevance.TOTAL_DOCS_TERM, TOTAL_WORDS_TERM); rows of the session
    # context field are "\t" + term, with "\t words" their total (relevance.CONTEXT_PREFIX); " occasions"
    # and " occasion words" count the scope's occasions and their terms (relevance.OccasionScorer).
    "scope_terms",
    metadata,
    Column("tenant", String(64), primary_key=True),
    Column("scope", String(256), primary_key=True),
    Column("term", String(128), primary_key=True),
    Column("docs", BigInteger, nullable=False),
)

source_events = Table(
    "source_events",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("kind", String(16), nullable=False),  # claim | trajectory
    Column("memory_number", Integer),
    Column("content", Text, nullable=False),
    Column("occurred_at", UtcDateTime),
    Column("recorded_at", UtcDateTime, nullable=False),
    Column("position", Integer),  # trajectory entries: 0-based position in the stored trajectory
    Column("entry_kind", String(16)),
    Column("entry_status", String(16)),
    Index("ix_source_events_session", "session_id", "number"),
    Index("ix_source_events_memory", "memory_number"),
)

episodes = Table(
    "episodes",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("event_number", Integer, nullable=False),
    Column("previous_event_number", Integer),
    Column("created_at", UtcDateTime, nullable=False),
    Index("ix_episodes_event", "event_number"),
    Index("ix_episodes_previous", "previous_event_number"),
)

session_memory_links = Table(
    "session_memory_links",
    metadata,
    Column("session_id", String(64), primary_key=True),
    Column("memory_number", Integer, primary_key=True),
    Column("created_by_session", Boolean, nullable=False, default=False),
    Column("summary_hash", String(64), nullable=False),
)

procedures = Table(
    "procedures",
    metadata,
    Column("id", String(80), primary_key=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("goal", Text, nullable=False),
    Column("summary", Text, nullable=False),
    Column("context", JSON, nullable=False),
    Column("steps", JSON, nullable=False),
    Column("caveats", JSON, nullable=False),
    Column("applicability_text", Text, nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
    *(
        Column(f"ev_{name}", Integer, nullable=False, default=0)
        for name in ("used", "not_used", "unassessable", "helped", "no_effect", "harmed", "unknown")
    ),
    Index("ix_procedures_scope", "tenant", "scope"),
)

retrievals = Table(
    "retrievals",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),  # creation order
    Column("id", String(64), nullable=False, unique=True),
    Column("tenant", String(64), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("kind", String(16), nullable=False),  # activation | recall
    Column("scope", String(256), nullable=False),
    Column("created_at", UtcDateTime, nullable=False),
    Column("page_size", Integer, nullable=False),
    Column("policy_version", String(512), nullable=False),  # 128 before 0008 (0010 on SQLite), 256 before 0015
    Column("cue_number", Integer),  # the cue the catalog was ranked for (cues.number)
    Column("relevant_total", Integer, nullable=False),
    Column("catalog_truncated", Boolean, nullable=False),
    Column("catalog", JSON, nullable=False),
    Index("ix_retrievals_session", "session_id", "number"),
)

# A retrieval's cue (its normalised task or query plus semantic context), stored once per tenant:
# learned evidence is kept per cue and carried to other cues by the similarity of their terms.
cues = Table(
    "cues",
    metadata,
    Column("number", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("key_hash", String(64), nullable=False),  # sha256 of the cue key; "" for an unknown cue
    Column("terms", Text, nullable=False),  # the cue's distinct terms, sorted, space-separated
    UniqueConstraint("tenant", "key_hash", name="uq_cues_key"),
)

# Per (memory, cue): the sum of the units of the memory's effective assessments under retrievals of
# that cue (behaviour §12.1), and the ledger seq of the latest one (recency bounds the compared cues).
memory_cue_evidence = Table(
    "memory_cue_evidence",
    metadata,
    Column("memory_number", Integer, primary_key=True),
    Column("cue_number", Integer, primary_key=True),
    Column("units", Integer, nullable=False),
    Column("last_seq", Integer, nullable=False),
    Index("ix_memory_cue_evidence_recent", "memory_number", "last_seq"),
)

cursors = Table(
    "cursors",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("retrieval_id", String(64), ForeignKey("retrievals.id"), nullable=False),
    Column("memory_offset", Integer, nullable=False),
    Column("procedure_offset", Integer, nullable=False),
    UniqueConstraint("retrieval_id", "memory_offset", "procedure_offset", name="uq_cursor_position"),
)

exposures = Table(
    "exposures",
    metadata,
    Column("retrieval_id", String(64), ForeignKey("retrievals.id"), primary_key=True),
    Column("target_kind", String(16), primary_key=True),  # memory | procedure
    Column("target_id", String(80), primary_key=True),
    Column("position", Integer, nullable=False),  # exposure order within the retrieval
    Column("covered", Boolean, nullable=False, default=False),  # has an accepted row
    Column("effective_seq", Integer),  # ledger seq of the pair's first accepted explicit row
)

feedback_rows = Table(
    "feedback_rows",
    metadata,
    Column("seq", Integer, primary_key=True, autoincrement=True),  # ledger order
    Column("event_id", String(64), nullable=False, unique=True),
    Column("tenant", String(64), nullable=False),
    Column("retrieval_id", String(64), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("target_kind", String(16), nullable=False),  # memory | procedure | retrieval
    Column("target_id", String(256), nullable=False),
    Column("accepted", Boolean, nullable=False),
    Column("implicit", Boolean, nullable=False, default=False),
    Column("effective", Boolean, nullable=False, default=False),
    Column("service_authored", Boolean, nullable=False, default=False),
    Column("rejection_reason", String(64)),
    Column("rejection_field", String(64)),
    Column("assessment", String(32)),
    Column("stale_reason", String(32)),
    Column("replacement_memory_id", String(256)),
    Column("reason", Text),
    Column("relevance", String(32)),
    Column("effect", String(32)),
    Column("use", String(32)),
    Column("contribution", Text),
    Column("requested_coverage", String(16)),
    Column("retrieval_quality", Text),
    Column("missing", JSON),
    Column("previous_accepted_seq", Integer),
    Column("recorded_at", UtcDateTime, nullable=False),
    Index("ix_feedback_rows_pair", "retrieval_id", "target_kind", "target_id"),
    Index("ix_feedback_rows_target", "target_kind", "target_id", "effective"),
)

knowledge_gaps = Table(
    "knowledge_gaps",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256), nullable=False),
    Column("text_hash", String(64), nullable=False),
    Column("text", Text, nullable=False),
    Column("occurrences", Integer, nullable=False),
    Column("open", Boolean, nullable=False),
    Column("first_seen_at", UtcDateTime, nullable=False),
    Column("last_seen_at", UtcDateTime, nullable=False),
    UniqueConstraint("tenant", "scope", "text_hash", name="uq_gap_text"),
)

consolidation_queue = Table(
    "consolidation_queue",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("tenant", String(64), nullable=False),
    Column("session_id", String(64), nullable=False),
    Column("enqueued_at", UtcDateTime, nullable=False),
    Column("done_at", UtcDateTime),
    Index("ix_consolidation_pending", "done_at", "id"),
)


# Tenancy (migration 0005). A tenant without a row is enabled; keys are stored as hashes only.
tenants = Table(
    "tenants",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("disabled", Boolean, nullable=False, default=False, server_default=false()),
    Column("created_at", UtcDateTime, nullable=False),
    Column("updated_at", UtcDateTime, nullable=False),
)

api_keys = Table(
    "api_keys",
    metadata,
    Column("key_hash", String(80), primary_key=True),  # "sha256:<64 hex>"
    Column("tenant", String(64), nullable=False),
    Column("source", String(16), nullable=False),  # config | admin
    Column("label", String(128)),
    Column("created_at", UtcDateTime, nullable=False),
    Column("revoked_at", UtcDateTime),  # revocation is permanent
    Index("ix_api_keys_tenant", "tenant"),
)

# Erasure's audit record (migration 0011): what `slowave-admin erase` removed, never the content.
erasures = Table(
    "erasures",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("erased_at", UtcDateTime, nullable=False),
    Column("command", String(256), nullable=False),  # the command line's options, without --reason
    Column("actor", String(256), nullable=False),  # operating-system user and host that ran it
    Column("tenant", String(64), nullable=False),
    Column("scope", String(256)),  # --scope; NULL for --memory and --all
    Column("memory_ids", JSON),  # --memory: the sch_N ids named
    Column("reason", Text),  # the operator's --reason (a ticket, a request id), never the content
    Column("counts", JSON, nullable=False),  # rows changed per table and kind of change
)
