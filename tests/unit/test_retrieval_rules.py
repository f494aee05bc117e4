"""Retrieval rules of domain.retrieval: the frozen catalog, supersession stand-ins, scoring."""

from __future__ import annotations

import json
from dataclasses import dataclass

import pytest

from slowave.domain.near_duplicates import Relation
from slowave.domain.relevance import TOTAL_DOCS_TERM, TOTAL_WORDS_TERM, Cue
from slowave.domain.retrieval import (
    VERSIONS_COMPARED,
    CandidateScoring,
    Catalog,
    CatalogMemory,
    CatalogProcedure,
    VersionCheck,
    newer_versions_first,
    version_pairs,
)
from slowave.domain.supersession import active_successor, stand_ins


@dataclass
class _Memory:
    number: int
    content: str
    status: str = "active"
    stale_reason: str | None = None
    superseded_by: int | None = None
    type: str = "fact"
    context_terms: str | None = None
    occurred_on: str | None = None
    own_terms: str | None = None  # not stored: scored from the text


def _m(n: int, score: float, relevance: float) -> CatalogMemory:
    return CatalogMemory(
        n=n, type="fact", relevance=relevance, learned=round(score - relevance, 6), score=score, size=10, chars=10
    )


def test_catalog_orders_by_score_relevance_number_and_freezes_at_the_limit():
    memories = [_m(3, 0.5, 0.5), _m(1, 0.5, 0.5), _m(2, 0.5, 0.6), _m(4, 0.9, 0.7)]
    catalog = Catalog.freeze(memories, [], memory_limit=3, procedure_limit=9)
    assert [m.n for m in catalog.memories] == [4, 2, 1]  # score 0.5 with relevance 0.6 (learned −0.1) first
    assert catalog.relevant_total == 3 and catalog.truncated


def test_catalog_round_trips_through_its_stored_json():
    catalog = Catalog.freeze([_m(1, 0.4, 0.4)], [CatalogProcedure("proc_s1", 0.5, 0.0, 0.5, 20, 20, 1.5)], 50, 9)
    assert Catalog.from_json(catalog.to_json()) == catalog


def test_a_superseded_memory_is_represented_by_its_replacement_once():
    memories = {
        1: _Memory(1, "old", "retired", "superseded", 3),
        2: _Memory(2, "older", "retired", "superseded", 3),
        3: _Memory(3, "new"),
    }
    out = stand_ins({1: 0.8, 2: 0.9}, memories, lambda m: memories[m.superseded_by])
    assert [(c.number, c.pathway, c.redirected_from, c.relevance) for c in out] == [(3, "redirect", 2, 0.9)]
    # Admitted on its own too: direct, with the better relevance.
    out = stand_ins({1: 0.8, 3: 0.5}, memories, lambda m: memories[m.superseded_by])
    assert [(c.number, c.pathway, c.relevance) for c in out] == [(3, "direct", 0.8)]


def test_the_supersession_chain_is_followed_to_its_first_active_memory_within_the_hop_limit():
    chain = {n: _Memory(n, f"v{n}", "retired", "superseded", n + 1) for n in range(1, 20)}
    chain[20] = _Memory(20, "v20")
    assert active_successor(chain[12], chain.get).number == 20  # 8 links
    assert active_successor(chain[11], chain.get) is None  # 9 links: past MAX_REDIRECT_HOPS
    assert active_successor(chain[19], {}.get) is None  # a dangling link
    wrong = _Memory(1, "v1", "retired", "wrong", 2)  # retired for another reason: no stand-in
    assert active_successor(wrong, {2: _Memory(2, "v2")}.get) is None
    assert active_successor(_Memory(1, "active"), chain.get) is None


def test_scoring_admits_on_threshold_or_floor_and_prefers_named_dates():
    stats = {TOTAL_DOCS_TERM: 100, TOTAL_WORDS_TERM: 500, "offsit": 2, "porto": 3}
    cue = Cue("What happened at the offsite in Porto in June 2024?")
    scoring = CandidateScoring.for_cue(cue, stats, [], calibration=None)
    june = _Memory(1, "The offsite was in Porto.", occurred_on="2024-06-12")
    july = _Memory(2, "The offsite was in Porto.", occurred_on="2024-07-12")
    lunch, floor = _Memory(3, "Lunch was pizza."), _Memory(4, "june 2024")
    admitted = scoring.admitted({1: june, 2: july, 3: lunch, 4: floor}, contained={4}, cosines={})
    assert admitted[1] > admitted[2] > 0
    assert 3 not in admitted
    assert admitted[4] == 1.0  # the floor


def test_meaning_counts_in_full_only_where_no_candidate_matches_the_cues_words():
    from slowave.domain.relevance import SemanticCalibration

    calibration = SemanticCalibration(0.2, 0.7)
    stats = {TOTAL_DOCS_TERM: 100, TOTAL_WORDS_TERM: 500, "offsit": 2, "porto": 3}
    paraphrase = _Memory(5, "The team retreat took place by the Douro.")
    cue = Cue("Where was the offsite in Porto?")
    words = _Memory(1, "The offsite was in Porto.")
    alone = CandidateScoring.for_cue(cue, stats, [paraphrase], calibration).admitted({5: paraphrase}, set(), {5: 0.6})
    beside = CandidateScoring.for_cue(cue, stats, [paraphrase, words], calibration).admitted(
        {5: paraphrase, 1: words}, set(), {5: 0.6, 1: 0.6}
    )
    assert alone[5] > beside.get(5, 0.0)
    assert beside[1] > beside.get(5, 0.0)


def test_a_catalog_is_stored_as_arrays_and_read_back_in_both_formats():
    catalog = Catalog(
        [
            CatalogMemory(n=3, type="fact", relevance=0.9, learned=0.05, score=0.95, size=12, chars=12),
            CatalogMemory(7, "lesson", 0.5, 0.0, 0.5, 30, 29, "redirect", "sch_2"),
        ],
        [CatalogProcedure("proc_1", 0.6, 0.015, 0.615, 200, 190, 1_700_000_000.0)],
        2,
        False,
    )
    stored = catalog.to_json()
    assert stored["format"] == 2 and stored["memories"][1] == [7, "lesson", 0.5, 0.0, 0.5, 30, 29, "redirect", "sch_2"]
    assert Catalog.from_json(json.loads(json.dumps(stored))) == catalog
    # Catalogs stored before format 2 held one object per item.
    old = {
        "memories": [dict(vars(m)) for m in catalog.memories],
        "procedures": [dict(vars(p)) for p in catalog.procedures],
        "relevant_total": 2,
        "truncated": False,
    }
    assert Catalog.from_json(old) == catalog


def test_only_the_best_candidates_are_rendered_and_the_total_still_counts_them_all():
    from slowave.domain.retrieval import Candidate, top_memories

    candidates = [Candidate(n, r) for n, r in [(1, 0.5), (2, 0.6), (3, 0.5), (4, 0.7), (5, 0.2)]]
    learned = {4: 0.2, 2: -0.1, 5: 0.25}
    best = top_memories(candidates, learned, 3)
    # score 0.9, then 0.5 (relevance 0.6 first, then number 1 before 3)
    assert [(c.number, adj, score) for c, adj, score in best] == [(4, 0.2, 0.9), (2, -0.1, 0.5), (1, 0.0, 0.5)]
    kept = [_m(c.number, score, c.relevance) for c, _, score in best]
    catalog = Catalog.freeze(kept, [], memory_limit=3, procedure_limit=9, memory_total=len(candidates))
    everything = Catalog.freeze(
        [_m(c.number, round(c.relevance + learned.get(c.number, 0.0), 6), c.relevance) for c in candidates], [], 3, 9
    )
    assert catalog == everything and catalog.relevant_total == 3 and catalog.truncated


def test_the_newer_of_two_versions_ranks_above_the_older_and_nothing_else_moves():
    memories = {
        3: _Memory(3, "payments-api uses Postgres 13."),
        5: _Memory(5, "The team prefers Mermaid diagrams in design docs."),
        8: _Memory(8, "payments-api was upgraded on 2024-05-02 and now uses Postgres 16."),
    }
    admitted = {3: 0.9, 5: 0.7, 8: 0.6}
    compared, pairs = version_pairs(admitted, memories)
    assert compared == [3, 5, 8]
    assert [(pair, verdict.resolve(None)) for pair, verdict in pairs] == [((3, 8), Relation.SUPERSEDES)]
    assert newer_versions_first(admitted, [pair for pair, _ in pairs]) == {3: 0.599999, 5: 0.7, 8: 0.6}
    # Already below: unchanged. No pairs: the same mapping.
    assert newer_versions_first({3: 0.5, 8: 0.6}, [(3, 8)]) == {3: 0.5, 8: 0.6}
    assert newer_versions_first(admitted, []) is admitted


def test_a_chain_of_versions_ends_newest_first_and_the_rule_keeps_its_bounds():
    # v1 (number 1) < v2 (4) < v3 (9): settled from the newest, so v1 ends below v2 even when v2 moved.
    ranked = newer_versions_first({1: 0.95, 4: 0.9, 9: 0.5}, [(1, 4), (1, 9), (4, 9)])
    assert ranked == {1: 0.499998, 4: 0.499999, 9: 0.5}
    assert sorted(ranked, key=lambda n: -ranked[n]) == [9, 4, 1]
    # A verbatim match keeps 1; nothing falls below the admission threshold.
    assert newer_versions_first({1: 1.0, 2: 0.6}, [(1, 2)]) == {1: 1.0, 2: 0.6}
    assert newer_versions_first({1: 0.8, 2: 0.35}, [(1, 2)]) == {1: 0.35, 2: 0.35}


def test_versions_are_looked_for_among_the_most_relevant_admitted_memories_only():
    old, new = "billing-db runs on Postgres 12.", "billing-db was upgraded and now runs on Postgres 16."
    topics = ["lunch", "parking", "badges", "laptops", "coffee", "standups", "holidays", "travel", "desks", "plants"]
    fillers = {10 + i: _Memory(10 + i, f"The office wiki explains {t}.") for i, t in enumerate(topics)}
    assert len(fillers) == VERSIONS_COMPARED
    memories = {1: _Memory(1, old), 2: _Memory(2, new), **fillers}
    within = {1: 0.9, 2: 0.8, **{n: 0.5 for n in fillers}}
    assert [pair for pair, _ in version_pairs(within, memories)[1]] == [(1, 2)]
    beyond = {1: 0.9, 2: 0.3, **{n: 0.5 for n in fillers}}  # the newer is not among the best ten
    compared, pairs = version_pairs(beyond, memories)
    assert 2 not in compared and pairs == []


def test_a_retired_memory_is_not_compared_so_its_successor_keeps_its_relevance():
    old = _Memory(1, "billing-db runs on Postgres 12.", status="retired", stale_reason="superseded", superseded_by=2)
    memories = {1: old, 2: _Memory(2, "billing-db was upgraded and now runs on Postgres 16.")}
    admitted = {1: 0.9, 2: 0.6}
    assert version_pairs(admitted, memories) == ([2], [])
    # Supersession then credits the successor with the retired memory's relevance.
    candidates = stand_ins(admitted, memories, lambda row: active_successor(row, memories.get))
    assert [(c.number, c.relevance) for c in candidates] == [(2, 0.9)]


def test_the_version_check_answers_for_the_pages_it_covers_in_the_page_checks_order():
    check = VersionCheck(frozenset({1, 2, 3, 7, 9}), ((3, 9), (1, 2), (2, 9), (1, 7)))
    assert check.covers([9, 1, 2]) and not check.covers([9, 1, 4]) and not check.covers([None])
    assert check.among([9, 1, 2, 3]) == [(1, 2), (2, 9), (3, 9)]
    catalog = Catalog.freeze([_m(1, 0.5, 0.5)], [], 50, 9, versions=check)
    assert catalog.versions is check
    assert Catalog.from_json(json.loads(json.dumps(catalog.to_json()))).versions is None  # never stored


def test_a_released_catalog_serves_no_page():
    """An ended session's catalog is released (storage.retrievals.RELEASED_CATALOG); reading one back
    as a catalog is a mistake of the caller, said plainly rather than as a missing key."""
    with pytest.raises(ValueError, match="released catalog"):
        Catalog.from_json({"released": True})
