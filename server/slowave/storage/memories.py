"""Memories: their rows, the claim lookups that find duplicates, and what every new memory writes
with itself (its full-text index entry, its scope's term statistics)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import Integer, String, bindparam, func, or_, select, update

from slowave.domain.claim_identity import claim_hash
from slowave.domain.dates import date_words, occurred_on
from slowave.domain.near_duplicates import SHAPE_RECORD_PREFIX, shape, shape_record
from slowave.domain.relevance import TOTAL_CONTEXT_WORDS_TERM, TOTAL_DOCS_TERM, TOTAL_WORDS_TERM, context_term
from slowave.domain.terms import terms
from slowave.domain.text import normalize_claim
from slowave.storage import full_text
from slowave.storage import tables as t
from slowave.storage.executor import Executor, PerDialect, any_of, upsert, values_of
from slowave.storage.numbering import allocate_numbers
from slowave.storage.occasions import Occasions
from slowave.storage.search_terms import index_text, scope_key
from slowave.storage.tables import CONTENT_KEY_CHARS

TERM_CHARS = 128  # scope_terms.term


@lru_cache(maxsize=4096)
def _date_terms(day: str | None) -> list[str]:
    """The terms of an occurrence date's words (indexed with the memory's own)."""
    return terms(date_words(day)) if day else []


def content_key(normalized: str) -> str | None:
    return normalized[:CONTENT_KEY_CHARS] if len(normalized) >= CONTENT_KEY_CHARS else None


_m, _st = t.memories, t.scope_terms
_in_scope = (_m.c.tenant == bindparam("tenant"), _m.c.scope == bindparam("scope"))
_HAS_ACTIVE = select(_m.c.number).where(*_in_scope, _m.c.status == "active").limit(1)
_SCOPES_WITH_ACTIVE = select(_m.c.scope).where(_m.c.tenant == bindparam("tenant"), _m.c.status == "active").distinct()
_ACTIVE_CLAIM = (
    select(_m)
    .where(*_in_scope, _m.c.type == bindparam("type"), _m.c.content_hash == bindparam("hash"), _m.c.status == "active")
    .order_by(_m.c.number)
    .limit(1)
    .with_for_update()
)
# Naming every type keeps the lookup on the (tenant, scope, type, content_hash) index; on the hash
# alone the planner walks the whole scope.
_ACTIVE_CLAIMS = (
    select(_m.c.type, _m.c.content_hash, func.min(_m.c.number))
    .where(
        *_in_scope,
        _m.c.status == "active",
        any_of(_m.c.type, values_of("types", String())),
        any_of(_m.c.content_hash, values_of("hashes", String())),
    )
    .group_by(_m.c.type, _m.c.content_hash)
)
_BY_NUMBERS = select(_m).where(any_of(_m.c.number, values_of("numbers", Integer())))
_SHAPES = select(_m.c.number, _m.c.claim_shape).where(any_of(_m.c.number, values_of("numbers", Integer())))
# Active memories with no shape record of the running version (claims stored before migration 0016
# or under an earlier parse), oldest first; erased ones are retired, so never among them.
_WITHOUT_SHAPE = (
    select(_m.c.number, _m.c.content)
    .where(
        _m.c.status == "active",
        _m.c.number > bindparam("after"),
        or_(_m.c.claim_shape.is_(None), ~_m.c.claim_shape.startswith(bindparam("version", type_=String))),
    )
    .order_by(_m.c.number)
    .limit(bindparam("limit"))
)
# Only an active memory's: an erasure in between blanked the text the record was parsed from.
_SET_SHAPE = (
    update(_m).where(_m.c.number == bindparam("n"), _m.c.status == "active").values(claim_shape=bindparam("shape"))
)
_RETIRE = (
    update(_m)
    .where(_m.c.number == bindparam("memory"), _m.c.status == "active")
    .values(
        status="retired",
        stale_reason=bindparam("reason"),
        superseded_by=bindparam("replacement"),
        retired_at=bindparam("now"),
        retired_seq=bindparam("seq"),
    )
)
_COUNT_TERMS = upsert(
    lambda insert: (
        stmt := insert(_st).values(
            tenant=bindparam("tenant"), scope=bindparam("scope"), term=bindparam("term"), docs=bindparam("docs")
        )
    ).on_conflict_do_update(
        index_elements=[_st.c.tenant, _st.c.scope, _st.c.term], set_={"docs": _st.c.docs + stmt.excluded.docs}
    )
)
# A transaction-scoped advisory lock; SQLite's transactions already hold the database write lock.
_LOCK_CLAIMS = PerDialect(
    lambda dialect: (
        select(func.pg_advisory_xact_lock(func.hashtextextended(bindparam("key", type_=String), 0)))
        if dialect == "postgresql"
        else None
    )
)


class MemoryStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex
        self.occasions = Occasions(ex)

    def scope_has_active(self, tenant: str, scope: str) -> bool:
        return self.ex.first(_HAS_ACTIVE, {"tenant": tenant, "scope": scope}) is not None

    def scopes_with_active(self, tenant: str) -> list[str]:
        return [r.scope for r in self.ex.rows(_SCOPES_WITH_ACTIVE, {"tenant": tenant})]

    def get(self, tenant: str, number: int, *, lock: bool = False) -> Any | None:
        return self.ex.row_where(_m, lock, number=number, tenant=tenant)

    def get_many(self, numbers: Iterable[int]) -> dict[int, Any]:
        nums = list(set(numbers))
        if not nums:
            return {}
        return {r.number: r for r in self.ex.rows(_BY_NUMBERS, {"numbers": nums})}

    def claim_shapes(self, numbers: Sequence[int]) -> dict[int, str | None]:
        """The stored shape records of these memories (domain.near_duplicates.shape_record)."""
        if not numbers:
            return {}
        return {r.number: r.claim_shape for r in self.ex.rows(_SHAPES, {"numbers": list(numbers)})}

    def without_shape(self, after: int, limit: int) -> list[Any]:
        """Up to `limit` active memories numbered above `after` with no shape record of the
        running version: (number, content), oldest first."""
        return self.ex.rows(_WITHOUT_SHAPE, {"after": after, "limit": limit, "version": SHAPE_RECORD_PREFIX})

    def set_shapes(self, records: dict[int, str]) -> None:
        if records:
            self.ex.run_many(_SET_SHAPE, [{"n": n, "shape": r} for n, r in records.items()])

    def find_active_claim(self, tenant: str, scope: str, type_: str, content: str) -> Any | None:
        """The scope's active memory that is this claim (locked)."""
        params = {"tenant": tenant, "scope": scope, "type": type_, "hash": claim_hash(content)}
        return self.ex.first(_ACTIVE_CLAIM, params)

    def find_active_claims(
        self, tenant: str, scope: str, claims: Sequence[tuple[str, str]]
    ) -> dict[tuple[str, str], int]:
        """Active memories of the scope by (type, claim hash): the MATCHED lookup for a batch."""
        params = {
            "tenant": tenant,
            "scope": scope,
            "types": sorted({ty for ty, _ in claims}),
            "hashes": sorted({h for _, h in claims}),
        }
        return {(ty, h): n for ty, h, n in self.ex.rows(_ACTIVE_CLAIMS, params)}

    def lock_claims_of_scope(self, tenant: str, scope: str) -> None:
        """Serialises claim creation in one scope across replicas."""
        self.ex.run(_LOCK_CLAIMS, {"key": f"claims:{tenant}:{scope}"})

    def insert(
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
        row = dict(
            tenant=tenant,
            scope=scope,
            type=type_,
            content=content,
            source_kind=source_kind,
            source_session_id=source_session_id,
            created_at=now,
            claim_shape=shape_record(shape(content)),
        )
        return self.insert_many([row])[0]

    def insert_many(self, rows: list[dict[str, Any]]) -> list[int]:
        """Creates memories (and their full-text rows) in one round trip; numbers in input order.

        A row may carry `occurred_at` (its date's words are indexed with its own), `context_terms`
        (its session context, relevance.LexicalScorer) and `claim_shape` (its shape record,
        parsed by the caller before it took the write lock; without one the claim is parsed
        when compared, and stored by service.shape_backfill at the next start)."""
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
            row.setdefault("occasion", None)
        content = [terms(row["content"]) for row in rows]
        own = [words + _date_terms(row["occurred_on"]) for row, words in zip(rows, content)]
        numbers = allocate_numbers(self.ex, "memories", len(rows))
        for n, row, words in zip(numbers, rows, own):
            row["number"], row["own_terms"] = n, " ".join(words)
        occasion_counts = self.occasions.join(rows, content)
        self.ex.insert_many(_m, rows)
        context = [row["context_terms"].split() if row["context_terms"] else [] for row in rows]
        self._count_terms(rows, own, context, occasion_counts)
        index = [
            {"n": n, "w": index_text(scope_key(row["tenant"], row["scope"]), w, c)}
            for n, row, w, c in zip(numbers, rows, own, context)
        ]
        self.ex.run_many(full_text.INDEX_WORDS, index)
        return numbers

    def _count_terms(
        self,
        rows: list[dict[str, Any]],
        own: list[list[str]],
        context: list[list[str]],
        counts: dict[tuple[str, str, str], int],
    ) -> None:
        for row, ws, cs in zip(rows, own, context):
            tenant, scope = row["tenant"], row["scope"]
            for term, n in (
                (TOTAL_DOCS_TERM, 1),
                (TOTAL_WORDS_TERM, len(ws)),
                (TOTAL_CONTEXT_WORDS_TERM, len(cs)),
                *((w[:TERM_CHARS], 1) for w in set(ws)),
                *((context_term(w)[:TERM_CHARS], 1) for w in set(cs)),
            ):
                key = (tenant, scope, term)
                counts[key] = counts.get(key, 0) + n
        self.ex.run_many(
            _COUNT_TERMS,
            [{"tenant": k[0], "scope": k[1], "term": k[2], "docs": v} for k, v in sorted(counts.items())],
        )

    def retire(
        self, number: int, *, stale_reason: str, superseded_by: int | None, now: datetime, retired_seq: int
    ) -> None:
        """Ledger rows from `retired_seq` on count for nothing for this memory (behaviour §12.1)."""
        params = {
            "memory": number,
            "reason": stale_reason,
            "replacement": superseded_by,
            "now": now,
            "seq": retired_seq,
        }
        self.ex.run(_RETIRE, params)
