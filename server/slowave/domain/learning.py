"""How feedback changes future retrieval (spec 12): a deterministic function of the ledger.

Only a (retrieval, target) pair's effective assessment — its first accepted explicit row — counts.
Memories keep a running sum of units; procedures keep effective evidence counters. Both are
updated under a lock on the row, so the stored state always equals a replay of the ledger.
"""
from __future__ import annotations

from dataclasses import dataclass

MEMORY_STEP = 0.05
MEMORY_BOUND = 0.25
PROCEDURE_HELPED_STEP, PROCEDURE_HELPED_CAP = 0.03, 0.09
PROCEDURE_HARMED_STEP, PROCEDURE_HARMED_CAP = 0.06, 0.18
PROCEDURE_OUTCOME_TERMS = {
    ("success", "verified"): 0.015,
    ("success", "partially_verified"): 0.0075,
}
PROCEDURE_FAILURE_TERM = -0.03

# A change of any constant above, or of how relevance is computed, must change this label (spec
# 12.1). v3: semantic evidence follows what the cue names (relevance.CueNames). v4: BM25 over
# stemmed terms without stop words (domain.terms), session context, names, dates.
RETRIEVAL_POLICY_VERSION = "v4(bm25,snowball-en+stop-v1,context2)+learned(step=0.05,bound=0.25)"

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


def memory_learned(units: int) -> float:
    return precise(max(-MEMORY_BOUND, min(MEMORY_BOUND, MEMORY_STEP * units)))


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
        """Counts one effective assessment; an effect carries weight only on a `used` row."""
        setattr(self, use, getattr(self, use) + 1)
        if use == "used" and effect in ("helped", "no_effect", "harmed", "unknown"):
            setattr(self, effect, getattr(self, effect) + 1)


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
