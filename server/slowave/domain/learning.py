"""How feedback changes future retrieval (behaviour §12): a deterministic function of the ledger.

Only a (retrieval, target) pair's effective assessment — its first accepted explicit row — counts.
A memory's evidence is kept per cue (the normalised task or query of the retrieval it was given
under): a running sum of units per (memory, cue) and the number of cues whose sum is positive or
negative. Feedback carries to a new cue in proportion to how alike the two cues' terms are, so a
memory marked irrelevant for one question does not sink for another it answers (behaviour §12.1,
revised). Procedures keep effective evidence counters. All of it is updated under a lock on the
target's row, in the transaction of the ledger rows that change it, so the stored state always
equals a replay of the ledger (`slowave-admin learning-replay`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass, replace

from slowave.domain.terms import TERMS_VERSION
from slowave.domain.text import normalize_claim

MEMORY_STEP = 0.05
MEMORY_BOUND = 0.25
CUE_SIMILARITY_THRESHOLD = 0.2  # tau: cues sharing fewer terms than this carry nothing to each other
# B: the part of the evidence that follows the memory to any cue. The contract's default 0.10 lowered the
# questions that got no feedback on the conversational benchmark (docs/learning.md, "Evidence belongs to the cue it was given under"; docs/behaviour.md point 19).
GLOBAL_SHARE = 0.01
GLOBAL_PRIOR_CUES = 5  # k: distinct cues it takes for the global term to approach B
COMPARED_CUES = 64  # the most recently assessed distinct cues of a memory that a new cue is compared with
PROCEDURE_HELPED_STEP, PROCEDURE_HELPED_CAP = 0.03, 0.09
PROCEDURE_HARMED_STEP, PROCEDURE_HARMED_CAP = 0.06, 0.18
PROCEDURE_OUTCOME_TERMS = {
    ("success", "verified"): 0.015,
    ("success", "partially_verified"): 0.0075,
}
PROCEDURE_FAILURE_TERM = -0.03

# A change of any constant above, or of how relevance is computed, must change this label (spec
# 12.1). v3: semantic evidence follows what the cue names (relevance.CueNames). v4: BM25 over
# stemmed terms without stop words (domain.terms), session context, names, dates. learned(cue…):
# evidence per cue, carried by cue similarity (behaviour §12.1 revised 2026-12). v5: occasions.
# v6: what a claim is about (relevance.claim_subject). v7: memories that ask (relevance.asks); B 0.10 -> 0.01.
# v8: a name weighs at least half the cue's average term (relevance.NAME_FLOOR), not all of it.
# v9: the newer of two versions of one fact above the older (retrieval.newer_versions_first).
# v10: irregular forms mapped to their base (terms.IRREGULAR_FORMS).
# v11: a cue's named dates also prefer memories that tell of them ("yesterday", dates.told_of).
# v12: a new version of a named value ("Postgres 14" → "Postgres 15") pairs however often the scope
# mentions the value (near_duplicates.compare's topic check is for a name replaced by another).
RETRIEVAL_POLICY_VERSION = (
    f"v12(bm25,{TERMS_VERSION},context2,occasion(64,0.4),subject(4,0.4),asks(0.3),names(0.5),versions(10))"
    f"+learned(cue,step={MEMORY_STEP},bound={MEMORY_BOUND},tau={CUE_SIMILARITY_THRESHOLD},"
    f"B={GLOBAL_SHARE},k={GLOBAL_PRIOR_CUES},cues={COMPARED_CUES})"
)

CAUTIONARY_CAVEAT = (
    "Cautionary evidence: this procedure was recorded from a session whose outcome was failure; "
    "verify each step before relying on it."
)


def precise(value: float) -> float:
    """Signals are computed as stated and reported (and ranked) rounded to 6 decimal places."""
    return round(value + 0.0, 6)


def memory_unit(assessment: str, effect: str | None) -> int:
    """The contribution of one effective memory assessment."""
    if assessment == "used":
        return {None: 1, "helped": 1, "no_effect": 0, "harmed": -2}[effect]
    if assessment == "irrelevant":
        return -1
    return 0  # not_used, unassessable, already_known (stale retires instead)


def _clamp(value: float, low: float, high: float) -> float:
    return max(low, min(high, value))


def cue_evidence(units: int) -> float:
    """`a_c(m)`: the memory's evidence under one cue, from the sum of its units there."""
    return _clamp(MEMORY_STEP * units, -MEMORY_BOUND, MEMORY_BOUND)


def cue_similarity(a: frozenset[str], b: frozenset[str]) -> float:
    """`K(q, c)`: the Jaccard similarity of two cues' terms, rescaled from the threshold up to 1."""
    union = len(a | b)
    jaccard = len(a & b) / union if union else 0.0
    return _clamp((jaccard - CUE_SIMILARITY_THRESHOLD) / (1 - CUE_SIMILARITY_THRESHOLD), 0.0, 1.0)


@dataclass(frozen=True)
class CueUnits:
    """A memory's summed units under one cue other than the retrieval's, with that cue's terms."""

    units: int
    terms: frozenset[str]


@dataclass(frozen=True)
class MemoryEvidence:
    """What a memory's learned adjustment for one cue q is computed from.

    `own_units`: the sum under q itself. `others`: the sums under the most recently assessed
    other cues (at most COMPARED_CUES). `positive_cues` / `negative_cues`: how many distinct
    cues, q included, have a positive / negative sum — all of them, not only the compared ones.
    """

    own_units: int = 0
    others: tuple[CueUnits, ...] = ()
    positive_cues: int = 0
    negative_cues: int = 0

    def with_own_units(self, units: int) -> MemoryEvidence:
        """The evidence once `units` more are added under q itself (Feedback's `applied`): the other
        cues' sums stay, and so do how many of them are positive or negative; q's own sign may move."""
        if not units:
            return self
        own = self.own_units + units
        return replace(
            self,
            own_units=own,
            positive_cues=self.positive_cues - (self.own_units > 0) + (own > 0),
            negative_cues=self.negative_cues - (self.own_units < 0) + (own < 0),
        )


NO_EVIDENCE = MemoryEvidence()


def learned_for_cue(evidence: MemoryEvidence, cue_terms: frozenset[str]) -> float:
    """`learned(m, q)` of behaviour §12.1: the cue's own evidence, the strongest support and objection
    carried from similar cues, and a small global term over distinct cues."""
    own = cue_evidence(evidence.own_units)
    support = objection = 0.0
    for other in evidence.others:
        if not other.units:
            continue
        carried = cue_similarity(cue_terms, other.terms) * cue_evidence(other.units)
        support, objection = max(support, carried), min(objection, carried)
    positive = evidence.positive_cues - (own > 0)
    negative = evidence.negative_cues - (own < 0)
    total = positive + negative
    global_term = GLOBAL_SHARE * (positive - negative) / (total + GLOBAL_PRIOR_CUES) if total else 0.0
    return precise(_clamp(own + support + objection + global_term, -MEMORY_BOUND, MEMORY_BOUND))


UNKNOWN_CUE_HASH = ""  # evidence from before cues were recorded (migration 0008): no terms


def cue_key_hash(cue_text: str) -> str:
    """The identity of a cue: its key (case folded, white space collapsed) hashed. Retrievals with
    equal keys are one cue."""
    return hashlib.sha256(normalize_claim(cue_text).encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class EffectiveAssessment:
    """An effective memory assessment in the ledger, with the cue of its retrieval."""

    seq: int
    memory: int
    cue: int
    assessment: str
    effect: str | None


def replay_cue_sums(
    rows: Iterable[EffectiveAssessment], retired_seq: dict[int, int]
) -> dict[tuple[int, int], tuple[int, int]]:
    """(memory, cue) -> (sum of units, seq of the latest counted row), recomputed from the ledger:
    what the running sums must equal. Rows at or after a memory's retirement count for nothing;
    neutral assessments carry no unit and leave no trace."""
    sums: dict[tuple[int, int], tuple[int, int]] = {}
    for row in sorted(rows, key=lambda r: r.seq):
        retired = retired_seq.get(row.memory)
        unit = memory_unit(row.assessment, row.effect)
        if not unit or (retired is not None and row.seq >= retired):
            continue
        units, _ = sums.get((row.memory, row.cue), (0, 0))
        sums[(row.memory, row.cue)] = (units + unit, row.seq)
    return sums


def sign_counts(sums: Iterable[int]) -> tuple[int, int]:
    """How many of a memory's per-cue sums are positive and how many negative."""
    values = list(sums)
    return sum(1 for v in values if v > 0), sum(1 for v in values if v < 0)


def cue_counts(sums: dict[tuple[int, int], tuple[int, int]]) -> dict[int, tuple[int, int]]:
    """memory -> (positive, negative) cue counts, from replayed (memory, cue) sums; memories whose
    counts are both zero are left out."""
    by_memory: dict[int, list[int]] = {}
    for (memory, _), (units, _) in sums.items():
        by_memory.setdefault(memory, []).append(units)
    return {m: c for m, c in ((m, sign_counts(u)) for m, u in by_memory.items()) if c != (0, 0)}


@dataclass
class ProcedureEvidence:
    used: int = 0
    not_used: int = 0
    unassessable: int = 0
    helped: int = 0
    no_effect: int = 0
    harmed: int = 0
    unknown: int = 0

    def add(self, use: str, effect: str | None) -> None:
        """Counts one effective assessment."""
        for counter in procedure_counts(use, effect):
            setattr(self, counter, getattr(self, counter) + 1)


# Effects a procedure's evidence counts; the effect of a `not_used` or `unassessable` row carries
# no weight (the procedure did not run).
COUNTED_EFFECTS = ("helped", "no_effect", "harmed", "unknown")


def procedure_counts(use: str, effect: str | None) -> tuple[str, ...]:
    """The evidence counters one effective procedure assessment adds one to: its use, and its
    effect when the procedure was used. Storage keeps them as `ev_<counter>` columns."""
    if use == "used" and effect in COUNTED_EFFECTS:
        return (use, effect)
    return (use,)


def procedure_learned(evidence: ProcedureEvidence, outcome: str, verification_status: str | None) -> float:
    feedback = min(PROCEDURE_HELPED_CAP, PROCEDURE_HELPED_STEP * evidence.helped) - min(
        PROCEDURE_HARMED_CAP, PROCEDURE_HARMED_STEP * evidence.harmed
    )
    if outcome == "failure":
        outcome_term = PROCEDURE_FAILURE_TERM
    else:
        outcome_term = PROCEDURE_OUTCOME_TERMS.get((outcome, verification_status or ""), 0.0)
    return precise(feedback + outcome_term)


def applied_bucket(before: float, after: float) -> str:
    if after > before:
        return "strengthened"
    if after < before:
        return "weakened"
    return "unchanged"
