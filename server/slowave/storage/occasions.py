"""Occasions: the claims one session remembered about one day, whose terms together say what the
occasion was about (relevance.OccasionScorer's evidence, domain.retrieval.CandidateScoring.in_occasions).

Every memory created by Remember joins the newest occasion of its session and day that holds fewer
than OCCASION_CLAIMS claims, or opens one; the occasion's terms grow by the claim's content terms,
and the scope's term statistics count occasions and their terms (BM25's average length).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from typing import Any

from sqlalchemy import Engine, Integer, bindparam, select, update

from slowave.domain.relevance import (
    OCCASION_CLAIMS,
    TOTAL_OCCASION_WORDS_TERM,
    TOTAL_OCCASIONS_TERM,
    TermProfile,
    term_profile,
)
from slowave.storage import tables as t
from slowave.storage.executor import Executor, any_of, values_of

_o = t.occasions
_OPEN = (
    select(_o.c.number, _o.c.claims, _o.c.terms)
    .where(
        _o.c.tenant == bindparam("tenant"),
        _o.c.scope == bindparam("scope"),
        _o.c.session_id == bindparam("session"),
        _o.c.day == bindparam("day"),
    )
    .order_by(_o.c.number.desc())
    .limit(1)
    .with_for_update()
)
_GROW = (
    update(_o)
    .where(_o.c.number == bindparam("n"))
    .values(claims=bindparam("claims"), terms=bindparam("terms"), revision=_o.c.revision + 1)
)
_REVISIONS = select(_o.c.number, _o.c.revision).where(any_of(_o.c.number, values_of("numbers", Integer())))
_TERMS = select(_o.c.number, _o.c.revision, _o.c.terms).where(any_of(_o.c.number, values_of("numbers", Integer())))

# Term profiles of occasions, by (number, revision): every change of an occasion's terms (a claim
# joining, an erasure stripping terms) bumps its revision, so the key names one version of them,
# whichever process made the change. Retrieval reads the keys and fetches terms only for what it
# lacks. One cache per engine: occasion numbers are those of one database, and a process may hold
# several (the tests' servers, the copy command).
_PROFILE_CACHES: weakref.WeakKeyDictionary[Engine, dict[tuple[int, int], TermProfile]] = weakref.WeakKeyDictionary()
_PROFILE_CACHE_SIZE = 16_384


class Occasions:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    def join(self, rows: list[dict[str, Any]], content_terms: list[list[str]]) -> dict[tuple[str, str, str], int]:
        """Sets `occasion` on each row remembered in a session (its `source_session_id`) and grows
        the occasions' terms; returns what the scope's statistics gain, by (tenant, scope, term)."""
        counts: dict[tuple[str, str, str], int] = {}
        open_: dict[tuple[str, str, str, str], list] = {}  # key -> [number, claims, terms]
        grown: dict[int, list] = {}  # the same lists, by occasion number
        for row, words in zip(rows, content_terms):
            session = row.get("source_session_id")
            if not session or row.get("source_kind") != "explicit_remember":
                continue
            key = (row["tenant"], row["scope"], session, row.get("occurred_on") or "")
            current = open_.get(key)
            if current is None:
                found = self.ex.first(_OPEN, {"tenant": key[0], "scope": key[1], "session": key[2], "day": key[3]})
                current = [found.number, found.claims, found.terms] if found is not None else None
            if current is None or current[1] >= OCCASION_CLAIMS:
                number = self.ex.insert(
                    _o,
                    dict(tenant=key[0], scope=key[1], session_id=key[2], day=key[3], claims=0, terms="", revision=0),
                )
                current = [number, 0, ""]
                stat = (key[0], key[1], TOTAL_OCCASIONS_TERM)
                counts[stat] = counts.get(stat, 0) + 1
            current[1] += 1
            current[2] = " ".join(filter(None, (current[2], " ".join(words))))
            open_[key] = grown[current[0]] = current
            row["occasion"] = current[0]
            stat = (key[0], key[1], TOTAL_OCCASION_WORDS_TERM)
            counts[stat] = counts.get(stat, 0) + len(words)
        self.ex.run_many(_GROW, [{"n": n, "claims": c, "terms": w} for n, c, w in grown.values()])
        return counts

    def profiles(self, numbers: Iterable[int]) -> dict[int, TermProfile]:
        """The term profiles of the given occasions, by occasion number."""
        nums = sorted(set(numbers))
        if not nums:
            return {}
        engine = self.ex.connection.engine
        cache = _PROFILE_CACHES.get(engine)
        if cache is None:
            cache = _PROFILE_CACHES.setdefault(engine, {})
        out, missing = {}, {}
        for n, revision in self.ex.rows(_REVISIONS, {"numbers": nums}):
            key = (n, revision)
            hit = cache.get(key)
            if hit is None:
                missing[n] = key
            else:
                out[n] = hit
        if missing:
            if len(cache) + len(missing) > _PROFILE_CACHE_SIZE:
                cache.clear()
            for n, revision, terms in self.ex.rows(_TERMS, {"numbers": sorted(missing)}):
                profile = term_profile(terms)
                out[n] = profile
                if (n, revision) == missing[n]:  # unchanged between the two reads
                    cache[missing[n]] = profile
        return out
