"""Coverage: partial and complete, implicit rows, the declaration (behaviour §10.3; checklist 36-38)."""

from __future__ import annotations

from slowave.domain.coverage import apply_coverage

M1, M2, M3 = ("memory", "sch_1"), ("memory", "sch_2"), ("memory", "sch_3")
P1 = ("procedure", "proc_sess_0123456789ab")
EXPOSURE = [M1, M2, M3, P1]  # exposure order: memories in rank order, then procedures


def test_partial_leaves_unmentioned_targets_outstanding():
    r = apply_coverage(EXPOSURE, set(), {"sch_2"}, {M2}, "partial")
    assert r.implicit == []
    assert r.outstanding == [M1, M3, P1]
    assert r.declaration_accepted  # the retrieval-level row of a partial call is accepted


def test_partial_then_later_call_covers_the_rest():
    first = apply_coverage(EXPOSURE, set(), {"sch_1"}, {M1}, "partial")
    assert first.outstanding == [M2, M3, P1]
    second = apply_coverage(EXPOSURE, {M1}, {"sch_2", "sch_3", P1[1]}, {M2, M3, P1}, "partial")
    assert second.outstanding == []
    assert second.implicit == []
    assert second.declaration_accepted


def test_complete_implicitly_assesses_every_unmentioned_target_in_exposure_order():
    """Checklist 37: complete mentioning 1 of 3 exposed memories → the other 2 implicit, nothing outstanding."""
    exposure = [M1, M2, M3]
    r = apply_coverage(exposure, set(), {"sch_2"}, {M2}, "complete")
    assert r.implicit == [M1, M3]
    assert r.outstanding == []
    assert r.declaration_accepted


def test_complete_without_entries_covers_everything_implicitly():
    r = apply_coverage(EXPOSURE, set(), set(), set(), "complete")
    assert r.implicit == EXPOSURE
    assert r.outstanding == []
    assert r.declaration_accepted


def test_complete_skips_targets_covered_by_earlier_calls():
    """E − P − M: a target with an accepted row from an earlier call gets no implicit row."""
    r = apply_coverage(EXPOSURE, {M1, P1}, set(), set(), "complete")
    assert r.implicit == [M2, M3]
    assert r.outstanding == []


def test_rejected_explicit_entry_stays_outstanding_and_declaration_is_refused():
    """Checklist 38: a rejected stale entry keeps its memory outstanding; coverage becomes partial;
    every other unmentioned target is still implicitly assessed."""
    r = apply_coverage(EXPOSURE, set(), {"sch_2"}, set(), "complete")
    assert r.implicit == [M1, M3, P1]
    assert r.outstanding == [M2]
    assert not r.declaration_accepted


def test_mentioned_target_with_one_accepted_entry_is_covered():
    """Several entries for one target: it is covered if any of them was accepted."""
    r = apply_coverage([M1, M2], set(), {"sch_1", "sch_2"}, {M1, M2}, "complete")
    assert r.implicit == [] and r.outstanding == [] and r.declaration_accepted


def test_rejected_entry_for_a_target_covered_earlier_does_not_block():
    """M − P only: a failed re-assessment of an already covered target leaves it covered."""
    r = apply_coverage([M1, M2], {M1}, {"sch_1"}, set(), "complete")
    assert r.implicit == [M2]
    assert r.outstanding == []
    assert r.declaration_accepted


def test_mention_in_the_wrong_list_counts_as_mentioned():
    """M is any id named by an entry of either list: a memory id sent in procedure_feedback is
    mentioned (its entry was rejected as target_not_exposed), so it is not implicitly covered."""
    r = apply_coverage([M1, P1], set(), {"sch_1"}, set(), "complete")
    assert r.implicit == [P1]
    assert r.outstanding == [M1]
    assert not r.declaration_accepted


def test_unexposed_mentions_change_nothing():
    r = apply_coverage([M1], set(), {"sch_99"}, set(), "complete")
    assert r.implicit == [M1]
    assert r.outstanding == []
    assert r.declaration_accepted


def test_empty_exposure():
    for requested in ("partial", "complete"):
        r = apply_coverage([], set(), set(), set(), requested)
        assert r.implicit == [] and r.outstanding == [] and r.declaration_accepted


def test_partial_with_rejected_entry_is_still_accepted_declaration():
    r = apply_coverage([M1, M2], set(), {"sch_1"}, set(), "partial")
    assert r.outstanding == [M1, M2]
    assert r.implicit == []
    assert r.declaration_accepted


def test_outstanding_is_over_all_calls_in_exposure_order():
    r = apply_coverage([M3, M1, P1, M2], {M1}, {"sch_2"}, {M2}, "partial")
    assert r.outstanding == [M3, P1]
