"""Retrieval's reads of memories: term statistics, full-text matches, memories contained in the cue,
memories by number. Every row comes back as a memory view (full_text.MEMORY_VIEW)."""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Integer, String, bindparam, func, literal_column, or_, select, true, union_all
from sqlalchemy.dialects.postgresql import ARRAY

from slowave.storage import full_text
from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, not_indexed, occurs_in, values_of
from slowave.storage.full_text import VIEW_COLUMNS, retrievable
from slowave.storage.memories import TERM_CHARS
from slowave.storage.search_terms import index_token, scope_key
from slowave.storage.tables import CONTENT_KEY_CHARS

_m, _st = t.memories, t.scope_terms
_TERM_DOCS = select(_st.c.term, _st.c.docs).where(
    _st.c.tenant == bindparam("tenant"),
    _st.c.scope == bindparam("scope"),
    any_of(_st.c.term, values_of("terms", String())),
)
# The numbers drive: each is a primary-key lookup (SQLite walked the scope's index otherwise: 24 ms
# at 100k memories, 0.2 ms so).
_BY_NUMBERS = select(*VIEW_COLUMNS).where(
    any_of(_m.c.number, values_of("numbers", Integer())), *retrievable(driven=True)
)


def cue_keys(normalized_cues: Sequence[str]) -> list[str]:
    """Every key a memory contained in one of the cues can have: each substring of key length."""
    return sorted(
        {c[i : i + CONTENT_KEY_CHARS] for c in normalized_cues for i in range(len(c) - CONTENT_KEY_CHARS + 1)}
    )


@functools.lru_cache(maxsize=64)
def _contained(cues: int, dialect: str):
    """Retrievable memories whose normalised text occurs in one of `cues` cues (cue0, cue1, …): those
    shorter than a key, and those whose last key-length characters are among the cues' substrings
    (keys), sought in the index, and on SQLite their first ones too, which the index holds: only
    those are read and searched for in the cues.

    Sought by memories' beginnings alone, a 4 KiB cue quoting a few of bench/scale.py's 100k claims
    found 52k memories that merely began like part of it ("preference: the ") and searched the
    whole cue for each: 280 ms. SQLite seeks the index once per key; the first characters are not
    sought (`+`): sought by both, SQLite tried every pair of keys. PostgreSQL, left to plan a list
    of keys, read the whole scope once a cue had a few dozen of them (a sentence; 7.5 ms at 20k
    memories against 0.3): a lateral lookup per key (`OFFSET 0` keeps it one) leaves it no choice,
    and the text is then searched for in the cue without testing its first characters, which
    against a list parameter compare with each key in turn (a 20k scope and an 8 KiB cue quoting
    it: 25 ms against 55)."""
    inside = or_(*(occurs_in(_m.c.content_norm, bindparam(f"cue{i}", type_=String())) for i in range(cues)))
    short = select(*VIEW_COLUMNS).where(*retrievable(), _m.c.content_tail.is_(None), inside)
    if dialect == "sqlite":
        keys = values_of("keys", String())
        return union_all(
            short,
            select(*VIEW_COLUMNS).where(
                *retrievable(), any_of(_m.c.content_tail, keys), any_of(not_indexed(_m.c.content_key), keys), inside
            ),
        )
    keys = bindparam("keys", type_=ARRAY(String()))
    grams = func.unnest(keys).table_valued("gram").render_derived(name="grams")
    found = (
        select(*VIEW_COLUMNS)
        .where(*retrievable(), _m.c.content_tail == grams.c.gram, inside)
        .offset(literal_column("0"))
        .lateral("found")
    )
    return union_all(short, select(*found.c).select_from(grams).join(found, true()))


class MemorySearch:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def term_statistics(self, tenant: str, scope: str, terms: Sequence[str]) -> dict[str, int]:
        """Memories of the scope containing each term (term specificity, query planning)."""
        if not terms:
            return {}
        params = {"tenant": tenant, "scope": scope, "terms": sorted({w[:TERM_CHARS] for w in terms})}
        return {term: docs for term, docs in self.ex.rows(_TERM_DOCS, params)}

    def lexical_matches(
        self, tenant: str, scope: str, terms: Sequence[str], limit: int, require_all: bool = False
    ) -> list[Any]:
        """Memories of the scope containing any (or, with `require_all`, all) of the terms.

        Active memories, plus memories retired as superseded (their replacements stand in). The
        index only proposes candidates; the caller scores them. Any-of queries are planned over
        rare words, so all their matches come back (at most `limit`); all-of queries are over
        common words, where every match would cost, so they stream the newest matches and stop at
        `limit` (on PostgreSQL: among the newest memories first, full_text.RECENT_MATCHES). The index
        is partitioned by scope (storage.search_terms), so postings hold only this scope's memories.
        """
        key = scope_key(tenant, scope)
        indexed = [index_token(key, w) for w in terms]
        if not require_all:  # any of the terms, in the memory's own words or its session context
            indexed += [index_token(key, w, context=True) for w in terms]
        q = full_text.query(self.ex.dialect, indexed, require_all)
        params = {"q": q, "tenant": tenant, "scope": scope, "limit": limit}
        if not require_all:
            return self.ex.rows(full_text.MATCHES, params)
        if self.ex.dialect == "sqlite":
            return self.ex.rows(full_text.NEWEST_MATCHES, params)
        recent = self.ex.rows(full_text.RECENT_MATCHES, {**params, "window": full_text.RECENT_WINDOW})
        return recent if len(recent) >= limit else self.ex.rows(full_text.MATCHES, params)

    def lexical_matches_each(
        self, tenant: str, scope: str, queries: Sequence[tuple[Sequence[str], bool]], limit: int
    ) -> list[list[Any]]:
        """Remember's flags' candidates: for each (terms, require_all) query, the memories of the
        scope holding any (or all) of the terms *in their own words* (number, status, content,
        own_terms), newest first, at most `limit` each; one statement for the batch instead of one
        per query.

        Own words only, unlike retrieval's `lexical_matches`: a flag compares what two claims say
        themselves, so a memory that only its session context matches has none of the query's words
        to share with the new claim (measured on 100k templated memories: a quarter of the rows such
        a query read, and no flag among them).

        On SQLite one index query joins them all, with room for `limit` rows per query; each row is
        given to the queries it matches, read from the words it is indexed with (the own_terms the
        index holds). When that query filled its room, a query with fewer than `limit` rows may
        have older matches beyond it: that query alone runs again. PostgreSQL looks each query up
        apart, in one statement (full_text.FLAG_MATCHES_EACH)."""
        if not queries:
            return []
        key = scope_key(tenant, scope)
        if self.ex.dialect != "sqlite":
            return self._flag_matches_on_postgresql(tenant, scope, queries, limit)
        indexed = [[index_token(key, w) for w in terms] for terms, _ in queries]
        room = limit * len(queries)
        q = full_text.any_query(self.ex.dialect, [(tokens, a) for tokens, (_, a) in zip(indexed, queries)])
        params = {"q": q, "tenant": tenant, "scope": scope, "limit": room}
        rows = self.ex.rows(full_text.FLAG_MATCHES, params)
        known = all(r.own_terms is not None for r in rows)
        # Postings of the rows read: term -> positions (newest first) holding it in their own words.
        asked = {w for terms, _ in queries for w in terms}
        own: dict[str, list[int]] = {}
        for i, r in enumerate(rows):
            for w in asked.intersection((r.own_terms or "").split()):
                own.setdefault(w, []).append(i)
        out = []
        for terms, require_all in queries:
            if require_all:
                held = [set(own.get(w, ())) for w in terms]
                at = set.intersection(*held) if held else set()
            else:
                at = {i for w in terms for i in own.get(w, ())}
            found = [rows[i] for i in sorted(at)]
            if not known or (len(rows) >= room and len(found) < limit):
                found = self.flag_matches(tenant, scope, terms, require_all, limit)
            out.append(found[:limit])
        return out

    def _flag_matches_on_postgresql(
        self, tenant: str, scope: str, queries: Sequence[tuple[Sequence[str], bool]], limit: int
    ) -> list[list[Any]]:
        """`lexical_matches_each` on PostgreSQL. A tsquery ORing a batch's hundreds of terms was
        estimated to match most of the scope, and PostgreSQL tested every memory against it (1.5 s
        for a batch of 100 claims at 100k memories): each query is looked up apart, all in one
        statement (full_text.FLAG_MATCHES_EACH), from the GIN index. An all-of query (common words)
        is first answered from the newest memories, read once for the batch, as retrieval's is
        (full_text.RECENT_MATCHES): from the index, a claim of common words only read every memory
        holding its three rarest together (85–99 ms a claim at 170k memories)."""
        answered: dict[int, list[Any]] = {}
        if any(require_all for _, require_all in queries):
            params = {"tenant": tenant, "scope": scope, "window": full_text.RECENT_WINDOW}
            recent = self.ex.rows(full_text.RECENT_FLAG_ROWS, params)
            if all(r.own_terms is not None for r in recent):
                words = [frozenset(r.own_terms.split()) for r in recent]
                for i, (terms, require_all) in enumerate(queries):
                    found = [r for r, w in zip(recent, words) if w.issuperset(terms)] if require_all else []
                    if len(found) >= limit:  # the newest matches of the whole scope
                        answered[i] = found[:limit]
        asked = [i for i in range(len(queries)) if i not in answered]
        if asked:
            key = scope_key(tenant, scope)
            texts = [
                full_text.query(self.ex.dialect, [index_token(key, w) for w in queries[i][0]], queries[i][1])
                for i in asked
            ]
            answered.update((i, []) for i in asked)
            params = {"queries": texts, "tenant": tenant, "scope": scope, "limit": limit}
            for row in self.ex.rows(full_text.FLAG_MATCHES_EACH, params):
                answered[asked[row.i - 1]].append(row)
        return [answered[i] for i in range(len(queries))]

    def flag_matches(self, tenant: str, scope: str, terms: Sequence[str], require_all: bool, limit: int) -> list[Any]:
        """One query of `lexical_matches_each` alone: the memories holding any (or all) of the terms
        in their own words, newest first, at most `limit`."""
        key = scope_key(tenant, scope)
        q = full_text.query(self.ex.dialect, [index_token(key, w) for w in terms], require_all)
        return self.ex.rows(full_text.FLAG_MATCHES, {"q": q, "tenant": tenant, "scope": scope, "limit": limit})

    def memory_views(self, tenant: str, scope: str, numbers: Iterable[int]) -> list[Any]:
        """The given memories of the scope as retrieval reads them (active, or retired as superseded)."""
        nums = sorted(set(numbers))
        if not nums:
            return []
        return self.ex.rows(_BY_NUMBERS, {"numbers": nums, "tenant": tenant, "scope": scope})

    def contained_matches(self, tenant: str, scope: str, cues: Sequence[str]) -> list[Any]:
        """Memories whose normalised content occurs in one of the normalised cues (admission floor).

        Index-driven: a contained memory's keys (its last and first characters) are substrings of
        the cue, so only memories whose keys are among the cue's substrings — or whose text is
        shorter than a key — are compared.
        """
        params: dict[str, Any] = {"tenant": tenant, "scope": scope, "keys": cue_keys(cues)}
        params.update({f"cue{i}": c for i, c in enumerate(cues)})
        return self.ex.rows(_contained(len(cues), self.ex.dialect), params)
