"""Learned adjustments (spec 12.1, 12.2, 12.4): constants, units, clamping, rounding."""
from __future__ import annotations

import pytest

from slowave.domain import learning as L
from slowave.domain.procedure_capture import capture, describes_a_method, served_caveats


def test_default_constants():
    assert L.MEMORY_STEP == 0.05
    assert L.MEMORY_BOUND == 0.25
    assert (L.PROCEDURE_HELPED_STEP, L.PROCEDURE_HELPED_CAP) == (0.03, 0.09)
    assert (L.PROCEDURE_HARMED_STEP, L.PROCEDURE_HARMED_CAP) == (0.06, 0.18)
    assert L.PROCEDURE_OUTCOME_TERMS == {("success", "verified"): 0.015, ("success", "partially_verified"): 0.0075}
    assert L.PROCEDURE_FAILURE_TERM == -0.03
    assert isinstance(L.RETRIEVAL_POLICY_VERSION, str) and L.RETRIEVAL_POLICY_VERSION


def test_policy_version_names_the_learning_constants():
    """A change of step or bound must change the label: the label carries them."""
    assert "0.05" in L.RETRIEVAL_POLICY_VERSION and "0.25" in L.RETRIEVAL_POLICY_VERSION


def test_cautionary_caveat_text_is_exact():
    assert L.CAUTIONARY_CAVEAT == (
        "Cautionary evidence: this procedure was recorded from a session whose outcome was failure; "
        "verify each step before relying on it."
    )


# --------------------------------------------------------------------------- memory units


@pytest.mark.parametrize(
    ("assessment", "effect", "unit"),
    [
        ("used", None, 1),
        ("used", "helped", 1),
        ("used", "no_effect", 0),
        ("used", "harmed", -2),
        ("irrelevant", None, -1),
        ("irrelevant", "unknown", -1),
        ("not_used", None, 0),
        ("not_used", "unknown", 0),
        ("unassessable", None, 0),
        ("unassessable", "unknown", 0),
        ("already_known", None, 0),
        ("already_known", "unknown", 0),
    ],
)
def test_memory_unit(assessment, effect, unit):
    assert L.memory_unit(assessment, effect) == unit


@pytest.mark.parametrize(
    ("units", "learned"),
    [
        (0, 0.0),
        (1, 0.05),
        (2, 0.1),
        (3, 0.15),  # 0.05 × 3 is reported as 0.15, not 0.15000000000000002
        (4, 0.2),
        (5, 0.25),
        (6, 0.25),  # clamped at +bound
        (100, 0.25),
        (-1, -0.05),
        (-2, -0.1),  # one used + harmed
        (-3, -0.15),
        (-4, -0.2),
        (-5, -0.25),
        (-6, -0.25),  # clamped at -bound
        (-100, -0.25),
    ],
)
def test_memory_learned_clamped_and_rounded(units, learned):
    assert L.memory_learned(units) == learned
    assert repr(L.memory_learned(units)) == repr(learned)


def test_l1_used_under_k_retrievals():
    for k in range(0, 10):
        units = sum(L.memory_unit("used", None) for _ in range(k))
        assert L.memory_learned(units) == round(min(0.05 * k, 0.25), 6)


def test_l2_irrelevant_and_harmed_sink():
    assert L.memory_learned(L.memory_unit("irrelevant", None) * 2) == -0.1
    assert L.memory_learned(L.memory_unit("used", "harmed") * 2) == -0.2
    assert L.memory_learned(L.memory_unit("used", "harmed") * 3) == -0.25
    # one harmed outweighs one used
    assert L.memory_learned(L.memory_unit("used", "harmed") + L.memory_unit("used", "helped")) < 0


def test_l5_neutral_stays_neutral():
    units = sum(L.memory_unit(a, e) for a, e in
                [("not_used", None), ("unassessable", None), ("already_known", None), ("used", "no_effect")])
    assert L.memory_learned(units) == 0.0


def test_clamp_applies_to_the_sum_not_each_step():
    # six used (+6) and two irrelevant (−2) under eight retrievals: clamp(0.05 × 4) = 0.2
    assert L.memory_learned(6 - 2) == 0.2


def test_precise_rounds_to_six_decimals():
    assert L.precise(0.1 + 0.2) == 0.3
    assert L.precise(0.05 * 3) == 0.15
    assert L.precise(0.123456789) == 0.123457
    assert L.precise(-0.0000001) == 0.0
    assert L.precise(1 / 3) == 0.333333


# --------------------------------------------------------------------------- procedure evidence


def test_evidence_counts_use_and_effect_of_used_rows_only():
    e = L.ProcedureEvidence()
    e.add("used", "helped")
    e.add("used", "no_effect")
    e.add("used", "harmed")
    e.add("used", "unknown")
    e.add("not_used", "helped")  # effect carries no weight on not_used
    e.add("not_used", "no_effect")
    e.add("unassessable", "harmed")
    assert (e.used, e.not_used, e.unassessable) == (4, 2, 1)
    assert (e.helped, e.no_effect, e.harmed, e.unknown) == (1, 1, 1, 1)


def test_not_used_helped_changes_no_effect_counter_or_learned():
    """Checklist 33: not_used + helped / not_used + no_effect leave effect counters and learned unchanged."""
    e = L.ProcedureEvidence()
    before = L.procedure_learned(e, "success", "verified")
    e.add("not_used", "helped")
    e.add("not_used", "no_effect")
    assert (e.helped, e.no_effect, e.harmed, e.unknown) == (0, 0, 0, 0)
    assert L.procedure_learned(e, "success", "verified") == before


# --------------------------------------------------------------------------- procedure learned


def ev(helped: int = 0, harmed: int = 0) -> L.ProcedureEvidence:
    return L.ProcedureEvidence(used=helped + harmed, helped=helped, harmed=harmed)


@pytest.mark.parametrize(
    ("helped", "harmed", "feedback_term"),
    [
        (0, 0, 0.0),
        (1, 0, 0.03),
        (2, 0, 0.06),
        (3, 0, 0.09),
        (4, 0, 0.09),  # helped capped at 0.09
        (10, 0, 0.09),
        (0, 1, -0.06),
        (0, 2, -0.12),
        (0, 3, -0.18),
        (0, 4, -0.18),  # harmed capped at 0.18
        (1, 1, -0.03),  # one harmed outweighs one helped (checklist 55)
        (3, 3, -0.09),
        (10, 10, -0.09),
    ],
)
def test_procedure_feedback_term(helped, harmed, feedback_term):
    assert L.procedure_learned(ev(helped, harmed), "partial", "verified") == feedback_term


@pytest.mark.parametrize(
    ("outcome", "verification", "term"),
    [
        ("success", "verified", 0.015),
        ("success", "partially_verified", 0.0075),
        ("success", "unverified", 0.0),
        ("partial", "verified", 0.0),
        ("partial", "partially_verified", 0.0),
        ("failure", "verified", -0.03),
        ("failure", "partially_verified", -0.03),
        ("failure", "unverified", -0.03),
        ("unknown", None, 0.0),  # reaped session without verification
    ],
)
def test_procedure_outcome_term(outcome, verification, term):
    assert L.procedure_learned(ev(), outcome, verification) == term


def test_procedure_learned_sum_and_rounding():
    assert L.procedure_learned(ev(1), "success", "verified") == 0.045
    assert L.procedure_learned(ev(3), "success", "partially_verified") == 0.0975
    assert L.procedure_learned(ev(0, 3), "failure", "verified") == -0.21
    assert L.procedure_learned(ev(2, 1), "success", "verified") == 0.015


def test_helped_and_harmed_rank_below_unassessed_equal_procedure():
    assert L.procedure_learned(ev(1, 1), "success", "verified") < L.procedure_learned(ev(), "success", "verified")


def test_failure_ranks_below_success():
    assert L.procedure_learned(ev(), "failure", "verified") < L.procedure_learned(ev(), "success", "verified")


# --------------------------------------------------------------------------- applied buckets


def test_applied_bucket():
    assert L.applied_bucket(0.0, 0.05) == "strengthened"
    assert L.applied_bucket(0.05, 0.0) == "weakened"
    assert L.applied_bucket(0.05, 0.05) == "unchanged"
    assert L.applied_bucket(0.25, 0.25) == "unchanged"  # at the bound a further used changes nothing
    assert L.applied_bucket(-0.25, -0.25) == "unchanged"


# --------------------------------------------------------------------------- procedure capture (11.3, 12.4)


def test_failed_procedure_carries_cautionary_caveat_last():
    assert served_caveats(["a", "b"], "failure") == ["a", "b", L.CAUTIONARY_CAVEAT]
    assert served_caveats([], "failure") == [L.CAUTIONARY_CAVEAT]
    for outcome in ("success", "partial", "unknown"):
        assert served_caveats(["a"], outcome) == ["a"]


def test_procedure_needs_a_summary_or_steps():
    assert describes_a_method("summary", [])
    assert describes_a_method(None, ["step"])
    assert not describes_a_method(None, [])


def test_procedure_goal_defaults_to_final_goal():
    p = capture(None, "Deploy auth", "s", {}, ["1"], [])
    assert p.goal == "Deploy auth"
    p = capture("Deploy any service", "Deploy auth", None, {"env": "staging"}, ["1", "2"], ["c"])
    assert (p.goal, p.summary, p.context, p.steps, p.caveats) == ("Deploy any service", "", {"env": "staging"},
                                                                   ["1", "2"], ["c"])
