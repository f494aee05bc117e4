"""Learned adjustments (behaviour §12.1, 12.2, 12.4): constants, units, clamping, rounding."""

from __future__ import annotations

import random

import pytest

from slowave.domain import learning as L
from slowave.domain.assessment_effects import memory_effect
from slowave.domain.feedback_entries import MemoryEntry
from slowave.domain.procedure_capture import capture, describes_a_method, served_caveats
from slowave.domain.terms import terms


def test_default_constants():
    assert L.MEMORY_STEP == 0.05
    assert L.MEMORY_BOUND == 0.25
    assert (L.CUE_SIMILARITY_THRESHOLD, L.GLOBAL_SHARE, L.GLOBAL_PRIOR_CUES, L.COMPARED_CUES) == (0.2, 0.01, 5, 64)
    assert (L.PROCEDURE_HELPED_STEP, L.PROCEDURE_HELPED_CAP) == (0.03, 0.09)
    assert (L.PROCEDURE_HARMED_STEP, L.PROCEDURE_HARMED_CAP) == (0.06, 0.18)
    assert L.PROCEDURE_OUTCOME_TERMS == {("success", "verified"): 0.015, ("success", "partially_verified"): 0.0075}
    assert L.PROCEDURE_FAILURE_TERM == -0.03
    assert isinstance(L.RETRIEVAL_POLICY_VERSION, str) and L.RETRIEVAL_POLICY_VERSION


def test_policy_version_names_the_learning_constants():
    """A change of a learning constant must change the label: the label carries them."""
    for value in ("step=0.05", "bound=0.25", "tau=0.2", "B=0.01", "k=5", "cues=64"):
        assert value in L.RETRIEVAL_POLICY_VERSION


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


def own(units: int) -> float:
    """learned(m, q) of a memory assessed under q only, with `units` there."""
    positive, negative = int(units > 0), int(units < 0)
    return L.learned_for_cue(L.MemoryEvidence(units, (), positive, negative), frozenset({"q"}))


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
def test_learned_under_its_own_cue_clamped_and_rounded(units, learned):
    assert own(units) == learned
    assert repr(own(units)) == repr(learned)


def test_l1_used_under_k_retrievals():
    for k in range(0, 10):
        units = sum(L.memory_unit("used", None) for _ in range(k))
        assert own(units) == round(min(0.05 * k, 0.25), 6)


def test_l2_irrelevant_and_harmed_sink():
    assert own(L.memory_unit("irrelevant", None) * 2) == -0.1
    assert own(L.memory_unit("used", "harmed") * 2) == -0.2
    assert own(L.memory_unit("used", "harmed") * 3) == -0.25
    # one harmed outweighs one used
    assert own(L.memory_unit("used", "harmed") + L.memory_unit("used", "helped")) < 0


def test_l5_neutral_stays_neutral():
    units = sum(
        L.memory_unit(a, e)
        for a, e in [("not_used", None), ("unassessable", None), ("already_known", None), ("used", "no_effect")]
    )
    assert own(units) == 0.0


def test_clamp_applies_to_the_sum_not_each_step():
    # six used (+6) and two irrelevant (−2) under eight retrievals: clamp(0.05 × 4) = 0.2
    assert own(6 - 2) == 0.2


# --------------------------------------------------------------------------- contextual learning (12.1 revised)

Q1 = frozenset(terms("deploy the payments service to staging Zorblat"))
Q2 = frozenset(terms("rotate the billing database password Zorblat"))


def test_cue_similarity_is_rescaled_jaccard():
    assert L.cue_similarity(Q1, Q1) == 1.0
    assert len(Q1 & Q2) == 1 and len(Q1 | Q2) == 9  # scenario 71: Jaccard 1/9 <= tau
    assert L.cue_similarity(Q1, Q2) == 0.0
    a, b = frozenset("abcd"), frozenset("abce")  # Jaccard 3/5
    assert L.cue_similarity(a, b) == pytest.approx((0.6 - 0.2) / 0.8)
    assert L.cue_similarity(frozenset(), frozenset()) == 0.0


def test_scenario_71_irrelevant_under_one_cue_moves_a_dissimilar_cue_only_by_the_global_term():
    under_q1 = L.MemoryEvidence(-3, (), 0, 1)
    assert L.learned_for_cue(under_q1, Q1) == -0.15
    seen_from_q2 = L.MemoryEvidence(0, (L.CueUnits(-3, Q1),), 0, 1)
    assert L.learned_for_cue(seen_from_q2, Q2) == round(-L.GLOBAL_SHARE / 6, 6)  # B × (0 − 1) / (0 + 1 + 5)


def test_scenario_72_used_carries_to_a_similar_cue_by_its_similarity():
    q1_prime = Q1 | {"today"}
    k = L.cue_similarity(q1_prime, Q1)
    assert 0 < k < 1
    evidence = L.MemoryEvidence(0, (L.CueUnits(2, Q1),), 1, 0)
    assert L.learned_for_cue(evidence, q1_prime) == round(k * 0.10 + L.GLOBAL_SHARE * 1 / 6, 6)


def test_support_and_objection_are_the_strongest_not_the_sum():
    many = tuple(L.CueUnits(1, frozenset({"x", "y"})) for _ in range(10))
    assert L.learned_for_cue(L.MemoryEvidence(0, many, 10, 0), frozenset({"x", "y"})) == round(
        0.05 + L.GLOBAL_SHARE * 10 / 15, 6
    )


def test_bounds_hold_for_any_evidence():
    rng = random.Random(7)
    vocabulary = [f"w{i}" for i in range(8)]
    for _ in range(2000):
        q = frozenset(rng.sample(vocabulary, rng.randint(1, 4)))
        others = tuple(
            L.CueUnits(rng.randint(-8, 8), frozenset(rng.sample(vocabulary, rng.randint(1, 4))))
            for _ in range(rng.randint(0, 6))
        )
        own_units = rng.randint(-8, 8)
        sums = [own_units, *(o.units for o in others)]
        value = L.learned_for_cue(L.MemoryEvidence(own_units, others, *L.sign_counts(sums)), q)
        assert -L.MEMORY_BOUND <= value <= L.MEMORY_BOUND
        if own_units == 0 and all(L.cue_similarity(q, o.terms) == 0 for o in others):
            assert abs(value) < L.GLOBAL_SHARE  # K = 0 to every assessed cue: only the global term


def test_l2b_a_used_row_never_lowers_and_an_irrelevant_row_never_raises_for_any_cue():
    """Adds one unit of either sign under a random cue and checks learned(m, q) for every cue q."""
    rng = random.Random(11)
    vocabulary = [f"w{i}" for i in range(6)]
    cues = [frozenset(rng.sample(vocabulary, rng.randint(1, 3))) for _ in range(8)]
    cues = list(dict.fromkeys(cues))

    def learned(sums: dict[int, int], q: int) -> float:
        others = tuple(L.CueUnits(u, cues[c]) for c, u in sums.items() if c != q)
        return L.learned_for_cue(L.MemoryEvidence(sums.get(q, 0), others, *L.sign_counts(sums.values())), cues[q])

    for _ in range(3000):
        sums = {c: rng.randint(-7, 7) for c in rng.sample(range(len(cues)), rng.randint(0, len(cues)))}
        target, unit = rng.randrange(len(cues)), rng.choice([1, -1, -2])
        after = dict(sums)
        after[target] = after.get(target, 0) + unit
        for q in range(len(cues)):
            if unit > 0:
                assert learned(after, q) >= learned(sums, q)
            else:
                assert learned(after, q) <= learned(sums, q)


def test_replay_counts_effective_units_per_cue_until_retirement():
    rows = [
        L.EffectiveAssessment(1, memory=10, cue=1, assessment="used", effect=None),
        L.EffectiveAssessment(2, memory=10, cue=1, assessment="used", effect="harmed"),
        L.EffectiveAssessment(3, memory=10, cue=2, assessment="irrelevant", effect=None),
        L.EffectiveAssessment(4, memory=10, cue=2, assessment="not_used", effect=None),  # neutral: no trace
        L.EffectiveAssessment(6, memory=10, cue=3, assessment="used", effect=None),  # after retirement
        L.EffectiveAssessment(5, memory=11, cue=1, assessment="used", effect=None),
    ]
    assert L.replay_cue_sums(rows, {10: 5}) == {(10, 1): (-1, 2), (10, 2): (-1, 3), (11, 1): (1, 5)}
    assert L.sign_counts([-1, -1, 0, 2]) == (1, 2)


def test_cue_key_is_the_normalised_cue():
    assert L.cue_key_hash("Deploy  the\nService ") == L.cue_key_hash("deploy the service")
    assert L.cue_key_hash("deploy the service") != L.cue_key_hash("deploy the services")


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
    assert (p.goal, p.summary, p.context, p.steps, p.caveats) == (
        "Deploy any service",
        "",
        {"env": "staging"},
        ["1", "2"],
        ["c"],
    )


def test_every_policy_label_fits_the_column_that_stores_it():

    from slowave.config import RetrievalLimits
    from slowave.embedding import MiniLMEncoder, SemanticChannel, StaticEncoder
    from slowave.service.retrieval import policy_version
    from slowave.storage.tables import retrievals

    width = retrievals.c.policy_version.type.length
    channels = [SemanticChannel(e) for e in (StaticEncoder, MiniLMEncoder)]  # ids only: no model is loaded
    limits = RetrievalLimits()
    labels = [policy_version(None, limits)] + [policy_version(c, limits) for c in channels]
    assert all(len(label) <= width for label in labels), [(len(x), x) for x in labels]


def test_cue_counts_come_from_the_replayed_sums():
    sums = {(10, 1): (2, 5), (10, 2): (-1, 6), (10, 3): (0, 7), (11, 1): (0, 8), (12, 4): (-3, 9)}
    assert L.cue_counts(sums) == {10: (1, 1), 12: (0, 1)}


# --------------------------------------------------------------------------- applying assessments


def _entry(assessment: str, **kw: str) -> MemoryEntry:
    return MemoryEntry("sch_1", assessment, **kw)


def test_only_the_effective_row_of_an_active_memory_with_a_cue_adds_learning_evidence():
    assert memory_effect(_entry("used"), effective=True, active=True, has_cue=True).learning_units == 1
    assert memory_effect(_entry("irrelevant"), effective=True, active=True, has_cue=True).learning_units == -1
    assert (
        memory_effect(_entry("used", effect="harmed"), effective=True, active=True, has_cue=True).learning_units == -2
    )
    for flags in (
        {"effective": False, "active": True, "has_cue": True},
        {"effective": True, "active": False, "has_cue": True},
        {"effective": True, "active": True, "has_cue": False},
    ):
        assert memory_effect(_entry("used"), **flags).learning_units == 0, flags


def test_the_first_stale_row_retires_an_active_memory_even_when_it_is_not_effective():
    effect = memory_effect(
        _entry("stale", stale_reason="superseded", replacement_memory_id="sch_2"),
        effective=False,
        active=True,
        has_cue=True,
    )
    assert effect.retirement is not None and effect.retirement.supersedes
    assert effect.learning_units == 0
    wrong = memory_effect(_entry("stale", stale_reason="wrong"), effective=True, active=True, has_cue=True)
    assert wrong.retirement is not None and not wrong.retirement.supersedes
    assert (
        memory_effect(_entry("stale", stale_reason="wrong"), effective=True, active=False, has_cue=True).retirement
        is None
    )
