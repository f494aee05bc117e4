"""The repository: every SQL statement of the service, behind named methods.

One Repository wraps one open transaction (see Database.transaction). Row-lock requests
(`lock=True`) become SELECT … FOR UPDATE where the backend has row locks; SQLite's transactions
already hold the database write lock from their first statement.
"""

from __future__ import annotations

import json
from collections import namedtuple
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Connection, Row, and_, bindparam, func, insert, or_, select, text, update

from slowave.domain.claim_identity import claim_hash
from slowave.domain.dates import date_words, occurred_on
from slowave.domain.relevance import TOTAL_CONTEXT_WORDS_TERM, TOTAL_DOCS_TERM, TOTAL_WORDS_TERM, context_term
from slowave.domain.session_state import SessionState
from slowave.domain.terms import terms
from slowave.domain.text import normalize_claim
from slowave.storage import driver_path
from slowave.storage import tables as t
from slowave.storage.cue_evidence import CueEvidenceStore, dialect_insert
from slowave.storage.search_terms import index_text, index_token, scope_key

CONTENT_KEY_CHARS = 16


def content_key(normalized: str) -> str | None:
    return normalized[:CONTENT_KEY_CHARS] if len(normalized) >= CONTENT_KEY_CHARS else None


def cue_keys(normalized_cues: Sequence[str]) -> list[str]:
    """Every key a memory contained in one of the cues can have: each substring of key length."""
    return sorted(
        {c[i : i + CONTENT_KEY_CHARS] for c in normalized_cues for i in range(len(c) - CONTENT_KEY_CHARS + 1)}
    )


# What retrieval reads of a memory (not the index columns, which would only cost time per row).
_MEMORY_VIEW = (
    "number",
    "type",
    "content",
    "status",
    "stale_reason",
    "superseded_by",
    "positive_cues",
    "negative_cues",
    "source_kind",
    "source_session_id",
    "context_terms",
    "occurred_on",
    "own_terms",
)
MemoryView = namedtuple("MemoryView", _MEMORY_VIEW)
"""A memory as retrieval reads it (plain values, no type conversion needed)."""


# Statements on every Activate/Recall, built once: building a statement per call costs more than
# running it.
_p, _s, _m, _g, _e = t.procedures, t.sessions, t.memories, t.knowledge_gaps, t.source_events
_HAS_ACTIVE = (
    select(_m.c.number)
    .where(_m.c.tenant == bindparam("tenant"), _m.c.scope == bindparam("scope"), _m.c.status == "active")
    .limit(1)
)
_PROCEDURES_IN_SCOPE = (
    select(_p, _s.c.outcome, _s.c.outcome_summary, _s.c.verification, _s.c.task.label("session_task"))
    .join(_s, _s.c.id == _p.c.session_id)
    .where(_p.c.tenant == bindparam("tenant"), _p.c.scope == bindparam("scope"))
)
_OPEN_GAPS = (
    select(_g)
    .where(_g.c.tenant == bindparam("tenant"), _g.c.scope == bindparam("scope"), _g.c.open.is_(True))
    .order_by(_g.c.last_seen_at.desc(), _g.c.id.desc())
)
_st = t.scope_terms
_TERM_DOCS = select(_st.c.term, _st.c.docs).where(
    _st.c.tenant == bindparam("tenant"),
    _st.c.scope == bindparam("scope"),
    _st.c.term.in_(bindparam("terms", expanding=True)),
)
_FIRST_EVENTS = (
    select(_e.c.memory_number, func.min(_e.c.number))
    .where(_e.c.memory_number.in_(bindparam("numbers", expanding=True)))
    .group_by(_e.c.memory_number)
)

_INSERTS = {name: insert(table) for name, table in t.metadata.tables.items()}

# The same reads in SQLite's own SQL, run through the driver (storage.driver_path).
_SQLITE_HAS_ACTIVE = "SELECT 1 FROM memories WHERE tenant = ? AND scope = ? AND status = 'active' LIMIT 1"
_SQLITE_TERM_DOCS = (
    "SELECT term, docs FROM scope_terms WHERE tenant = ? AND scope = ? AND term IN (SELECT value FROM json_each(?))"
)
_SQLITE_LATEST_VECTOR = "SELECT max(number) FROM memory_vectors WHERE tenant = ? AND scope = ? AND encoder_id = ?"
_SQLITE_FIRST_EVENTS = (
    "SELECT memory_number, min(number) FROM source_events WHERE memory_number IN (SELECT value FROM json_each(?)) "
    "GROUP BY memory_number"
)
_PROCEDURE_COLUMNS = [*_p.c, _s.c.outcome, _s.c.outcome_summary, _s.c.verification, ("session_task", None)]
_SQLITE_PROCEDURES_IN_SCOPE = (
    f"SELECT {', '.join('p.' + c.name for c in _p.c)}, s.outcome, s.outcome_summary, s.verification, s.task "
    "FROM procedures p JOIN sessions s ON s.id = p.session_id WHERE p.tenant = ? AND p.scope = ?"
)
_SQLITE_EXPOSURES = (
    f"SELECT {', '.join(c.name for c in t.exposures.c)} FROM exposures "
    "WHERE retrieval_id IN (SELECT value FROM json_each(?)) ORDER BY retrieval_id, position"
)
_SQLITE_OPEN_GAPS = (
    f"SELECT {', '.join(c.name for c in _g.c)} FROM knowledge_gaps WHERE tenant = ? AND scope = ? AND open = 1 "
    "ORDER BY last_seen_at DESC, id DESC"
)


class Repository(CueEvidenceStore):
    def __init__(self, connection: Connection, dialect: str) -> None:
        self.conn = connection
        self.dialect = dialect

    def _row_where(self, table, lock: bool = False, **equals: Any) -> Row | None:
        """The row whose columns equal the given values (a unique key)."""
        if self.dialect == "sqlite":
            return driver_path.row_where(self.conn, table, equals)
        return self._one(select(table).where(*(table.c[k] == v for k, v in equals.items())), lock)

    def _update_where(self, table, equals: dict[str, Any], values: dict[str, Any]) -> None:
        """Sets plain values (no SQL expressions) on the rows matching `equals`."""
        if self.dialect == "sqlite":
            driver_path.update_where(self.conn, table, equals, values)
        else:
            self.conn.execute(update(table).where(*(table.c[k] == v for k, v in equals.items())).values(**values))

    def _one(self, stmt, lock: bool = False) -> Row | None:
        if lock and self.dialect != "sqlite":
            stmt = stmt.with_for_update()
        return self.conn.execute(stmt).first()

    def _insert(self, table, **values: Any) -> Any:
        if self.dialect == "sqlite":
            return driver_path.insert(self.conn, table, values)
        # Values as parameters (not .values()): the statement is built once and its compiled form cached.
        result = self.conn.execute(_INSERTS[table.name], values)
        return result.inserted_primary_key[0]

    def _insert_many(self, table, rows: list[dict[str, Any]]) -> None:
        """Rows in list order, one statement."""
        if not rows:
            return
        if self.dialect == "sqlite":
            driver_path.insert_many(self.conn, table, rows)
        else:
            self.conn.execute(_INSERTS[table.name], rows)

    # ---------------------------------------------------------------- sessions

    def insert_session(self, **values: Any) -> None:
        self._insert(t.sessions, **values)

    def get_session(self, tenant: str, session_id: str, *, lock: bool = False) -> Row | None:
        return self._row_where(t.sessions, lock, id=session_id, tenant=tenant)

    def get_session_any(self, session_id: str) -> Row | None:
        """A session by id whatever its tenant (provenance of memories the caller already sees)."""
        return self._row_where(t.sessions, id=session_id)

    def update_session(self, session_id: str, **values: Any) -> None:
        self._update_where(t.sessions, {"id": session_id}, values)

    def touch_session(self, session_id: str, now: datetime, *, recall: bool = False) -> None:
        """Activity of an open session (spec 2.3); a Recall also counts as a recall call."""
        s = t.sessions
        if not recall:
            self._update_where(s, {"id": session_id, "state": SessionState.OPEN}, {"last_activity_at": now})
            return
        self.conn.execute(
            update(s)
            .where(s.c.id == session_id, s.c.state == SessionState.OPEN)
            .values(last_activity_at=now, recall_calls=s.c.recall_calls + 1)
        )

    def add_session_events(self, session_id: str, count: int) -> None:
        s = t.sessions
        self.conn.execute(update(s).where(s.c.id == session_id).values(session_events=s.c.session_events + count))

    def list_sessions(self, tenant: str | None, state: str | None, limit: int) -> list[Row]:
        s = t.sessions
        stmt = select(s).order_by(s.c.started_at.desc()).limit(limit)
        if tenant:
            stmt = stmt.where(s.c.tenant == tenant)
        if state:
            stmt = stmt.where(s.c.state == state)
        return list(self.conn.execute(stmt))

    def idle_open_sessions(self, cutoff: datetime, limit: int) -> list[Row]:
        """Open sessions idle since before `cutoff`, locked so each is reaped by one replica only."""
        s = t.sessions
        stmt = (
            select(s)
            .where(s.c.state == SessionState.OPEN, s.c.last_activity_at < cutoff)
            .order_by(s.c.last_activity_at)
            .limit(limit)
        )
        if self.dialect != "sqlite":
            stmt = stmt.with_for_update(skip_locked=True)
        return list(self.conn.execute(stmt))

    def count_open_sessions(self) -> int:
        s = t.sessions
        return self.conn.execute(select(func.count()).select_from(s).where(s.c.state == SessionState.OPEN)).scalar_one()

    def unassessed_exposure_counts(self, session_ids: Sequence[str]) -> dict[str, int]:
        """Exposed targets with no accepted feedback row, over all retrievals of these sessions, by kind."""
        if not session_ids:
            return {}
        r, x = t.retrievals, t.exposures
        stmt = (
            select(x.c.target_kind, func.count())
            .join(r, r.c.id == x.c.retrieval_id)
            .where(r.c.session_id.in_(list(session_ids)), x.c.covered.is_(False))
            .group_by(x.c.target_kind)
        )
        return {kind: n for kind, n in self.conn.execute(stmt)}

    # ---------------------------------------------------------------- continuity

    def get_continuity(self, tenant: str, token: str) -> Row | None:
        return self._row_where(t.continuity_tokens, id=token, tenant=tenant)

    def insert_continuity(self, **values: Any) -> None:
        self._insert(t.continuity_tokens, **values)

    def touch_continuity(self, token: str, now: datetime) -> None:
        c = t.continuity_tokens
        self.conn.execute(update(c).where(c.c.id == token).values(last_seen_at=now))

    # ---------------------------------------------------------------- memories

    def scope_has_active_memory(self, tenant: str, scope: str) -> bool:
        if self.dialect == "sqlite":
            return bool(driver_path.raw(self.conn, _SQLITE_HAS_ACTIVE, (tenant, scope)).fetchall())
        return self.conn.execute(_HAS_ACTIVE, {"tenant": tenant, "scope": scope}).first() is not None

    def scopes_with_active_memories(self, tenant: str) -> list[str]:
        m = t.memories
        stmt = select(m.c.scope).where(m.c.tenant == tenant, m.c.status == "active").distinct()
        return [r.scope for r in self.conn.execute(stmt)]

    def find_active_claim(self, tenant: str, scope: str, type_: str, content: str) -> Row | None:
        m = t.memories
        stmt = (
            select(m)
            .where(
                m.c.tenant == tenant,
                m.c.scope == scope,
                m.c.type == type_,
                m.c.content_hash == claim_hash(content),
                m.c.status == "active",
            )
            .order_by(m.c.number)
            .limit(1)
        )
        return self._one(stmt, lock=True)

    def insert_memory(
        self,
        *,
        tenant: str,
        scope: str,
        type_: str,
        content: str,
        source_kind: str,
        source_session_id: str | None,
        now: datetime,
    ) -> int:
        return self.insert_memories(
            [
                dict(
                    tenant=tenant,
                    scope=scope,
                    type=type_,
                    content=content,
                    source_kind=source_kind,
                    source_session_id=source_session_id,
                    created_at=now,
                )
            ]
        )[0]

    def first_source_events(self, numbers: Sequence[int]) -> dict[int, int]:
        """Each memory's first source event (the claim that created it)."""
        if not numbers:
            return {}
        if self.dialect == "sqlite":
            return dict(driver_path.raw(self.conn, _SQLITE_FIRST_EVENTS, (json.dumps(list(numbers)),)))
        return {m: n for m, n in self.conn.execute(_FIRST_EVENTS, {"numbers": list(numbers)})}

    def find_active_claims(
        self, tenant: str, scope: str, claims: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], int]:
        """Active memories of the scope by (type, content hash): the MATCHED lookup for a batch."""
        m = t.memories
        # Naming every type keeps the lookup on the (tenant, scope, type, content_hash) index; on the
        # hash alone the planner walks the whole scope.
        stmt = (
            select(m.c.type, m.c.content_hash, func.min(m.c.number))
            .where(
                m.c.tenant == tenant,
                m.c.scope == scope,
                m.c.status == "active",
                m.c.type.in_(sorted({ty for ty, _ in claims})),
                m.c.content_hash.in_(sorted({h for _, h in claims})),
            )
            .group_by(m.c.type, m.c.content_hash)
        )
        return {(ty, h): n for ty, h, n in self.conn.execute(stmt)}

    def insert_memories(self, rows: list[dict[str, Any]]) -> list[int]:
        """Creates memories (and their full-text rows) in one round trip; numbers in input order.

        A row may carry `occurred_at` (its date's words are indexed with its own) and
        `context_terms` (its session context, relevance.LexicalScorer)."""
        for row in rows:
            norm = normalize_claim(row["content"])
            row.update(
                content_norm=norm,
                content_hash=claim_hash(row["content"]),
                content_key=content_key(norm),
                status="active",
                positive_cues=0,
                negative_cues=0,
                occurred_on=occurred_on(row.get("occurred_at")),
            )
            row.setdefault("occurred_at", None)
            row.setdefault("context_terms", None)
        own = [terms(f"{row['content']} {date_words(row['occurred_on'])}") for row in rows]
        numbers = self._allocate_numbers("memories", len(rows))
        for n, row, words in zip(numbers, rows, own):
            row["number"], row["own_terms"] = n, " ".join(words)
        self._insert_many(t.memories, rows)
        context = [row["context_terms"].split() if row["context_terms"] else [] for row in rows]
        self._count_terms(rows, own, context)
        index = [
            {"n": n, "w": index_text(scope_key(row["tenant"], row["scope"]), w, c)}
            for n, row, w, c in zip(numbers, rows, own, context)
        ]
        if self.dialect == "sqlite":
            driver_path.raw_many(self.conn, "INSERT INTO memories_fts(rowid, words) VALUES (:n, :w)", index)
        else:
            self.conn.execute(
                text("UPDATE memories SET content_tsv = to_tsvector('simple', :w) WHERE number = :n"), index
            )
        return numbers

    def recent_claims(self, session_id: str, limit: int) -> list[str]:
        """The contents of the session's last `limit` claims, oldest first (session context)."""
        e = t.source_events
        stmt = (
            select(e.c.content)
            .where(e.c.session_id == session_id, e.c.kind == "claim")
            .order_by(e.c.number.desc())
            .limit(limit)
        )
        return [c for (c,) in self.conn.execute(stmt)][::-1]

    def lock_claims_of_scope(self, tenant: str, scope: str) -> None:
        """Serialises claim creation in one scope across replicas (transaction-scoped advisory lock);
        SQLite transactions already hold the database write lock."""
        if self.dialect == "postgresql":
            self.conn.execute(
                text("SELECT pg_advisory_xact_lock(hashtextextended(:k, 0))"), {"k": f"claims:{tenant}:{scope}"}
            )

    def _count_terms(self, rows: list[dict[str, Any]], own: list[list[str]], context: list[list[str]]) -> None:
        counts: dict[tuple[str, str, str], int] = {}
        for row, ws, cs in zip(rows, own, context):
            tenant, scope = row["tenant"], row["scope"]
            for term, n in (
                (TOTAL_DOCS_TERM, 1),
                (TOTAL_WORDS_TERM, len(ws)),
                (TOTAL_CONTEXT_WORDS_TERM, len(cs)),
                *((w[:128], 1) for w in set(ws)),
                *((context_term(w)[:128], 1) for w in set(cs)),
            ):
                key = (tenant, scope, term)
                counts[key] = counts.get(key, 0) + n
        if counts and self.dialect == "sqlite":
            driver_path.raw_many(
                self.conn,
                "INSERT INTO scope_terms (tenant, scope, term, docs) VALUES (?, ?, ?, ?) "
                "ON CONFLICT (tenant, scope, term) DO UPDATE SET docs = docs + excluded.docs",
                [(*k, v) for k, v in sorted(counts.items())],
            )
        elif counts:
            st = t.scope_terms
            upsert = dialect_insert(self.dialect)(st).values(
                tenant=bindparam("tenant"), scope=bindparam("scope"), term=bindparam("term"), docs=bindparam("docs")
            )
            upsert = upsert.on_conflict_do_update(
                index_elements=[st.c.tenant, st.c.scope, st.c.term], set_={"docs": st.c.docs + upsert.excluded.docs}
            )
            self.conn.execute(
                upsert, [{"tenant": k[0], "scope": k[1], "term": k[2], "docs": v} for k, v in sorted(counts.items())]
            )

    def insert_source_events(self, rows: list[dict[str, Any]]) -> list[int]:
        numbers = self._allocate_numbers("source_events", len(rows))
        if numbers:
            self._insert_many(t.source_events, [dict(row, number=n) for n, row in zip(numbers, rows)])
        return numbers

    def _allocate_numbers(self, table: str, count: int) -> list[int]:
        """The next `count` row numbers of a table, ascending, so a batch is one multi-row INSERT
        (INSERT … RETURNING in parameter order runs row by row). SQLite: the transaction holds the
        write lock, so nobody else takes numbers meanwhile; PostgreSQL: from the column's sequence."""
        if count == 0:
            return []
        if self.dialect == "postgresql":
            return sorted(
                n
                for (n,) in self.conn.execute(
                    text("SELECT nextval(pg_get_serial_sequence(:t, 'number')) FROM generate_series(1, :k)"),
                    {"t": table, "k": count},
                )
            )
        top = self.conn.execute(text(f"SELECT coalesce(max(number), 0) FROM {table}")).scalar_one()
        return list(range(top + 1, top + 1 + count))

    def insert_vectors(self, rows: list[dict[str, Any]]) -> None:
        self._insert_many(t.memory_vectors, rows)

    def get_memory(self, tenant: str, number: int, *, lock: bool = False) -> Row | None:
        return self._row_where(t.memories, lock, number=number, tenant=tenant)

    def get_memories(self, numbers: Iterable[int]) -> dict[int, Row]:
        m = t.memories
        nums = list(set(numbers))
        if not nums:
            return {}
        return {r.number: r for r in self.conn.execute(select(m).where(m.c.number.in_(nums)))}

    def retire_memory(
        self, number: int, *, stale_reason: str, superseded_by: int | None, now: datetime, retired_seq: int
    ) -> None:
        """Ledger rows from `retired_seq` on count for nothing for this memory (spec 12.1)."""
        m = t.memories
        self.conn.execute(
            update(m)
            .where(m.c.number == number, m.c.status == "active")
            .values(
                status="retired",
                stale_reason=stale_reason,
                superseded_by=superseded_by,
                retired_at=now,
                retired_seq=retired_seq,
            )
        )

    def term_statistics(self, tenant: str, scope: str, terms: Sequence[str]) -> dict[str, int]:
        """Memories of the scope containing each term (term specificity, query planning)."""
        if not terms:
            return {}
        wanted = sorted({w[:128] for w in terms})
        if self.dialect == "sqlite":
            return dict(driver_path.raw(self.conn, _SQLITE_TERM_DOCS, (tenant, scope, json.dumps(wanted))))
        params = {"tenant": tenant, "scope": scope, "terms": wanted}
        return {r.term: r.docs for r in self.conn.execute(_TERM_DOCS, params)}

    def lexical_matches(
        self, tenant: str, scope: str, terms: Sequence[str], limit: int, require_all: bool = False
    ) -> list[Row]:
        """Memories of the scope containing any (or, with `require_all`, all) of the terms.

        Active memories, plus memories retired as superseded (their replacements stand in). The
        index only proposes candidates; the caller scores them. Any-of queries are planned over
        rare words, so all their matches come back (at most `limit`); all-of queries are over
        common words, where every match would cost, so they stream the newest matches and stop at
        `limit`. The index is partitioned by scope (storage.search_terms), so postings hold only
        this scope's memories; tokens are letters and digits, so nothing is read as query syntax.
        """
        columns = ", ".join(f"m.{c}" for c in _MEMORY_VIEW)
        where = "m.tenant = :tenant AND m.scope = :scope AND (m.status = 'active' OR m.stale_reason = 'superseded')"
        key = scope_key(tenant, scope)
        indexed = [index_token(key, w) for w in terms]
        if not require_all:  # any of the terms, in the memory's own words or its session context
            indexed += [index_token(key, w, context=True) for w in terms]
        if self.dialect == "postgresql":
            stmt = (
                f"SELECT {columns} FROM memories m WHERE m.content_tsv @@ to_tsquery('simple', :q) AND {where} "
                f"ORDER BY m.number DESC LIMIT :limit"
            )
            match = (" & " if require_all else " | ").join(indexed)
        else:
            # CROSS JOIN keeps the full-text index as the outer loop (the planner could otherwise
            # walk the whole scope and probe the index per row).
            stmt = (
                f"SELECT {columns} FROM memories_fts CROSS JOIN memories m ON m.number = memories_fts.rowid "
                f"WHERE memories_fts MATCH :q AND {where} ORDER BY memories_fts.rowid DESC LIMIT :limit"
            )
            match = (" AND " if require_all else " OR ").join(indexed)
        return self._memory_views(stmt, {"q": match, "tenant": tenant, "scope": scope, "limit": limit})

    def memory_views(self, tenant: str, scope: str, numbers: Iterable[int]) -> list[MemoryView]:
        """The given memories of the scope as retrieval reads them (active, or retired as superseded)."""
        nums = sorted(set(numbers))
        if not nums:
            return []
        columns = ", ".join(f"m.{c}" for c in _MEMORY_VIEW)
        where = "m.tenant = :tenant AND m.scope = :scope AND (m.status = 'active' OR m.stale_reason = 'superseded')"
        if self.dialect == "postgresql":
            stmt = f"SELECT {columns} FROM memories m WHERE m.number = ANY(:numbers) AND {where}"
        else:
            # CROSS JOIN makes the numbers the outer loop, each a primary-key lookup: with `IN`, SQLite
            # walked the scope's (tenant, scope, status) index instead (24 ms at 100k memories, 0.2 ms so).
            stmt = (
                f"SELECT {columns} FROM json_each(:numbers) AS wanted CROSS JOIN memories m "
                f"ON m.number = wanted.value WHERE {where}"
            )
        return self._memory_views(
            stmt,
            {"numbers": nums if self.dialect == "postgresql" else json.dumps(nums), "tenant": tenant, "scope": scope},
        )

    def _memory_views(self, sql: str, params: dict[str, Any]) -> list[MemoryView]:
        """The retrieval read path. On SQLite it goes straight through the driver (same `:name`
        placeholders, same connection and transaction): SQLAlchemy's per-row processing cost more
        than the query itself, and these columns need no type conversion."""
        if self.dialect == "sqlite":
            return [MemoryView._make(r) for r in driver_path.raw(self.conn, sql, params)]
        return [MemoryView._make(r) for r in self.conn.execute(text(sql), params)]

    def contained_matches(self, tenant: str, scope: str, cues: Sequence[str]) -> list[Row]:
        """Memories whose normalised content occurs in one of the normalised cues (admission floor).

        `cues` are already normalised. Index-driven: a contained memory's key (its first
        characters) is a substring of the cue, so only memories whose key is among the cue's
        substrings — or whose text is shorter than a key — are compared.
        """
        position = "strpos" if self.dialect == "postgresql" else "instr"
        contained = " OR ".join(f"{position}(:cue{i}, m.content_norm) > 0" for i in range(len(cues)))
        keys = "= ANY(:keys)" if self.dialect == "postgresql" else "IN (SELECT value FROM json_each(:keys))"
        columns = ", ".join(f"m.{c}" for c in _MEMORY_VIEW)
        where = "m.tenant = :tenant AND m.scope = :scope AND (m.status = 'active' OR m.stale_reason = 'superseded')"
        stmt = (
            f"SELECT {columns} FROM memories m WHERE {where} AND m.content_key IS NULL AND ({contained}) "
            f"UNION ALL "
            f"SELECT {columns} FROM memories m WHERE {where} AND m.content_key {keys} AND ({contained})"
        )
        key_list = cue_keys(cues)
        params: dict[str, Any] = {
            "tenant": tenant,
            "scope": scope,
            "keys": key_list if self.dialect == "postgresql" else json.dumps(key_list),
        }
        params.update({f"cue{i}": c for i, c in enumerate(cues)})
        return self._memory_views(stmt, params)

    # ---------------------------------------------------------------- memory vectors (semantic channel)

    def insert_vector(self, number: int, tenant: str, scope: str, encoder_id: str, vector: bytes) -> None:
        self._insert(t.memory_vectors, number=number, tenant=tenant, scope=scope, encoder_id=encoder_id, vector=vector)

    def memories_without_vector(self, encoder_id: str, limit: int) -> list[Row]:
        m, v = t.memories, t.memory_vectors
        has = select(v.c.number).where(v.c.number == m.c.number, v.c.encoder_id == encoder_id).exists()
        stmt = select(m.c.number, m.c.tenant, m.c.scope, m.c.content).where(~has).order_by(m.c.number).limit(limit)
        return list(self.conn.execute(stmt))

    def latest_vector_number(self, tenant: str, scope: str, encoder_id: str) -> int:
        """Read before every dense search (the replica's cache is validated against it)."""
        if self.dialect == "sqlite":
            return driver_path.raw(self.conn, _SQLITE_LATEST_VECTOR, (tenant, scope, encoder_id)).fetchone()[0] or 0
        v = t.memory_vectors
        stmt = select(func.max(v.c.number)).where(
            v.c.tenant == tenant, v.c.scope == scope, v.c.encoder_id == encoder_id
        )
        return self.conn.execute(stmt).scalar_one() or 0

    def vectors_after(self, tenant: str, scope: str, encoder_id: str, after: int) -> list[Row]:
        v = t.memory_vectors
        stmt = (
            select(v.c.number, v.c.vector)
            .where(v.c.tenant == tenant, v.c.scope == scope, v.c.encoder_id == encoder_id, v.c.number > after)
            .order_by(v.c.number)
        )
        return list(self.conn.execute(stmt))

    # ---------------------------------------------------------------- source events and episodes

    def insert_source_event(self, **values: Any) -> int:
        return self._insert(t.source_events, **values)

    def session_source_events(self, session_id: str, kind: str | None = None) -> list[Row]:
        e = t.source_events
        stmt = select(e).where(e.c.session_id == session_id).order_by(e.c.number)
        if kind:
            stmt = stmt.where(e.c.kind == kind)
        return list(self.conn.execute(stmt))

    def events_of_memories(self, numbers: Sequence[int]) -> list[Row]:
        e = t.source_events
        if not numbers:
            return []
        return list(self.conn.execute(select(e).where(e.c.memory_number.in_(list(numbers))).order_by(e.c.number)))

    def get_events(self, numbers: Iterable[int]) -> dict[int, Row]:
        e = t.source_events
        nums = [n for n in set(numbers) if n is not None]
        if not nums:
            return {}
        return {r.number: r for r in self.conn.execute(select(e).where(e.c.number.in_(nums)))}

    def insert_episode(self, **values: Any) -> int:
        return self._insert(t.episodes, **values)

    def episodes_of_events(self, numbers: Sequence[int]) -> list[Row]:
        ep = t.episodes
        if not numbers:
            return []
        nums = list(numbers)
        stmt = (
            select(ep)
            .where(or_(ep.c.event_number.in_(nums), ep.c.previous_event_number.in_(nums)))
            .order_by(ep.c.number)
        )
        return list(self.conn.execute(stmt))

    # ---------------------------------------------------------------- procedures

    def get_procedure(self, tenant: str, procedure_id: str, *, lock: bool = False) -> Row | None:
        return self._row_where(t.procedures, lock, id=procedure_id, tenant=tenant)

    def insert_procedure(self, **values: Any) -> None:
        self._insert(t.procedures, **values)

    def update_procedure(self, procedure_id: str, **values: Any) -> None:
        self._update_where(t.procedures, {"id": procedure_id}, values)

    def procedures_with_sessions(
        self, tenant: str, scope: str | None = None, ids: Sequence[str] | None = None
    ) -> list[Row]:
        """Procedures joined with their source session's current outcome metadata."""
        if ids is None and scope is not None:
            if self.dialect == "sqlite":
                return driver_path.select(self.conn, _SQLITE_PROCEDURES_IN_SCOPE, (tenant, scope), _PROCEDURE_COLUMNS)
            return list(self.conn.execute(_PROCEDURES_IN_SCOPE, {"tenant": tenant, "scope": scope}))
        p, s = t.procedures, t.sessions
        stmt = (
            select(p, s.c.outcome, s.c.outcome_summary, s.c.verification, s.c.task.label("session_task"))
            .join(s, s.c.id == p.c.session_id)
            .where(p.c.tenant == tenant)
        )
        if scope is not None:
            stmt = stmt.where(p.c.scope == scope)
        if ids is not None:
            stmt = stmt.where(p.c.id.in_(list(ids)))
        return list(self.conn.execute(stmt))

    def procedure_contributions(self, procedure_id: str, limit: int = 3) -> list[Row]:
        f, s = t.feedback_rows, t.sessions
        stmt = (
            select(f.c.effect, f.c.contribution, f.c.recorded_at, s.c.state, s.c.outcome)
            .join(s, s.c.id == f.c.session_id)
            .where(
                f.c.target_kind == "procedure",
                f.c.target_id == procedure_id,
                f.c.effective.is_(True),
                f.c.use == "used",
            )
            .order_by(f.c.seq.desc())
            .limit(limit)
        )
        return list(self.conn.execute(stmt))

    # ---------------------------------------------------------------- retrievals, exposures, cursors

    def insert_retrieval(self, **values: Any) -> None:
        self._insert(t.retrievals, **values)

    def get_retrieval(self, tenant: str, retrieval_id: str, *, lock: bool = False) -> Row | None:
        return self._row_where(t.retrievals, lock, id=retrieval_id, tenant=tenant)

    def session_retrievals(self, session_id: str) -> list[Row]:
        r = t.retrievals
        stmt = select(r.c.id, r.c.number).where(r.c.session_id == session_id).order_by(r.c.number)
        return list(self.conn.execute(stmt))

    def insert_exposures(self, retrieval_id: str, targets: Sequence[tuple[str, str]], start: int) -> None:
        self._insert_many(
            t.exposures,
            [
                {
                    "retrieval_id": retrieval_id,
                    "target_kind": k,
                    "target_id": i,
                    "position": start + n,
                    "covered": False,
                }
                for n, (k, i) in enumerate(targets)
            ],
        )

    def exposures(self, retrieval_ids: Sequence[str]) -> list[Row]:
        x = t.exposures
        if not retrieval_ids:
            return []
        if self.dialect == "sqlite":
            return driver_path.select(self.conn, _SQLITE_EXPOSURES, (json.dumps(list(retrieval_ids)),), list(x.c))
        stmt = select(x).where(x.c.retrieval_id.in_(list(retrieval_ids))).order_by(x.c.retrieval_id, x.c.position)
        return list(self.conn.execute(stmt))

    def mark_exposure(self, retrieval_id: str, kind: str, target_id: str, **values: Any) -> None:
        x = t.exposures
        self.conn.execute(
            update(x)
            .where(x.c.retrieval_id == retrieval_id, x.c.target_kind == kind, x.c.target_id == target_id)
            .values(**values)
        )

    def mark_exposures(self, retrieval_id: str, targets: Sequence[tuple[str, str]], **values: Any) -> None:
        if not targets:
            return
        x = t.exposures
        stmt = (
            update(x)
            .where(
                x.c.retrieval_id == bindparam("r"), x.c.target_kind == bindparam("k"), x.c.target_id == bindparam("i")
            )
            .values(**values)
        )
        self.conn.execute(stmt, [{"r": retrieval_id, "k": k, "i": i} for k, i in targets])

    def get_cursor(self, cursor_id: str) -> Row | None:
        return self._row_where(t.cursors, id=cursor_id)

    def cursor_at(self, retrieval_id: str, memory_offset: int, procedure_offset: int) -> Row | None:
        return self._row_where(
            t.cursors, retrieval_id=retrieval_id, memory_offset=memory_offset, procedure_offset=procedure_offset
        )

    def insert_cursor(self, **values: Any) -> None:
        self._insert(t.cursors, **values)

    # ---------------------------------------------------------------- the feedback ledger

    def append_feedback_row(self, **values: Any) -> int:
        return self._insert(t.feedback_rows, **values)

    def append_feedback_rows(self, rows: list[dict[str, Any]]) -> None:
        """Appends rows in list order (one statement; their seq follows the order)."""
        self._insert_many(t.feedback_rows, rows)

    def last_accepted_seqs(self, retrieval_id: str) -> dict[tuple[str, str], int]:
        """The latest accepted row of each target of a retrieval."""
        f = t.feedback_rows
        stmt = (
            select(f.c.target_kind, f.c.target_id, func.max(f.c.seq))
            .where(f.c.retrieval_id == retrieval_id, f.c.accepted.is_(True))
            .group_by(f.c.target_kind, f.c.target_id)
        )
        return {(k, i): seq for k, i, seq in self.conn.execute(stmt)}

    def last_accepted_seq(self, retrieval_id: str, kind: str, target_id: str) -> int | None:
        f = t.feedback_rows
        stmt = select(func.max(f.c.seq)).where(
            f.c.retrieval_id == retrieval_id,
            f.c.target_kind == kind,
            f.c.target_id == target_id,
            f.c.accepted.is_(True),
        )
        return self.conn.execute(stmt).scalar_one()

    def ledger_rows(self, retrieval_id: str | None = None) -> list[Row]:
        f = t.feedback_rows
        stmt = select(f).order_by(f.c.seq)
        if retrieval_id:
            stmt = stmt.where(f.c.retrieval_id == retrieval_id)
        return list(self.conn.execute(stmt))

    # ---------------------------------------------------------------- knowledge gaps

    def record_gap(self, tenant: str, scope: str, text_: str, now: datetime) -> None:
        g = t.knowledge_gaps
        h = claim_hash(text_)
        row = self._one(select(g).where(g.c.tenant == tenant, g.c.scope == scope, g.c.text_hash == h), lock=True)
        if row is None:
            self._insert(
                g,
                tenant=tenant,
                scope=scope,
                text_hash=h,
                text=text_,
                occurrences=1,
                open=True,
                first_seen_at=now,
                last_seen_at=now,
            )
        else:
            self.conn.execute(
                update(g)
                .where(g.c.id == row.id)
                .values(occurrences=g.c.occurrences + 1, open=True, last_seen_at=now, text=text_)
            )

    def open_gaps(self, tenant: str, scope: str) -> list[Row]:
        if self.dialect == "sqlite":
            return driver_path.select(self.conn, _SQLITE_OPEN_GAPS, (tenant, scope), list(t.knowledge_gaps.c))
        return list(self.conn.execute(_OPEN_GAPS, {"tenant": tenant, "scope": scope}))

    def close_gaps(self, ids: Sequence[int]) -> None:
        g = t.knowledge_gaps
        if ids:
            self.conn.execute(update(g).where(g.c.id.in_(list(ids))).values(open=False))

    def list_gaps(self, tenant: str | None, scope: str | None, include_closed: bool = False) -> list[Row]:
        g = t.knowledge_gaps
        stmt = select(g).order_by(g.c.last_seen_at.desc(), g.c.id.desc())
        if tenant:
            stmt = stmt.where(g.c.tenant == tenant)
        if scope:
            stmt = stmt.where(g.c.scope == scope)
        if not include_closed:
            stmt = stmt.where(g.c.open.is_(True))
        return list(self.conn.execute(stmt))

    # ---------------------------------------------------------------- consolidation

    def enqueue_consolidation(self, tenant: str, session_id: str, now: datetime) -> None:
        self._insert(t.consolidation_queue, tenant=tenant, session_id=session_id, enqueued_at=now)

    def next_consolidation(self) -> Row | None:
        q = t.consolidation_queue
        stmt = select(q).where(q.c.done_at.is_(None)).order_by(q.c.id).limit(1)
        if self.dialect != "sqlite":
            stmt = stmt.with_for_update(skip_locked=True)
        return self.conn.execute(stmt).first()

    def finish_consolidation(self, entry_id: int, now: datetime) -> None:
        q = t.consolidation_queue
        self.conn.execute(update(q).where(q.c.id == entry_id).values(done_at=now))

    def session_links(self, session_id: str) -> list[Row]:
        lk = t.session_memory_links
        return list(self.conn.execute(select(lk).where(lk.c.session_id == session_id)))

    def link_session_memory(self, session_id: str, memory_number: int, *, created: bool, summary_hash: str) -> None:
        lk = t.session_memory_links
        existing = self._one(select(lk).where(lk.c.session_id == session_id, lk.c.memory_number == memory_number))
        if existing is None:
            self._insert(
                lk,
                session_id=session_id,
                memory_number=memory_number,
                created_by_session=created,
                summary_hash=summary_hash,
            )

    def unlink_session_memory(self, session_id: str, memory_number: int) -> None:
        lk = t.session_memory_links
        self.conn.execute(lk.delete().where(and_(lk.c.session_id == session_id, lk.c.memory_number == memory_number)))

    def memory_link_count(self, memory_number: int) -> int:
        lk = t.session_memory_links
        return self.conn.execute(
            select(func.count()).select_from(lk).where(lk.c.memory_number == memory_number)
        ).scalar_one()

    def memory_has_remembered_source(self, memory_number: int) -> bool:
        e = t.source_events
        stmt = select(e.c.number).where(e.c.memory_number == memory_number, e.c.kind == "claim").limit(1)
        return self.conn.execute(stmt).first() is not None

    # ---------------------------------------------------------------- observation (admin, tests)

    def table_counts(self) -> dict[str, int]:
        return {
            name: self.conn.execute(select(func.count()).select_from(table)).scalar_one()
            for name, table in t.metadata.tables.items()
        }
