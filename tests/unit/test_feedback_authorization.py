"""Per-target rules of the feedback authorization model (behaviour §10.2), in table order.

Each row's case breaks that row's rule *and* (where possible) later rules too, so the test also
proves that only the first failing rule in table order is reported.
"""

from __future__ import annotations

import pytest

from slowave.domain.feedback_authorization import (
    ReplacementState,
    incomplete_coverage,
    memory_entry_rejection,
    procedure_entry_rejection,
)
from slowave.domain.feedback_entries import UNSPECIFIED, MemoryEntry, ProcedureEntry

SCOPE = "project:alpha"
STORE = {
    "sch_7": ReplacementState(scope=SCOPE, active=True),
    "sch_8": ReplacementState(scope="project:beta", active=True),
    "sch_9": ReplacementState(scope=SCOPE, active=False),
    "sch_10": ReplacementState(scope="project:beta", active=False),
}


def lookup(memory_id: str) -> ReplacementState | None:
    return STORE.get(memory_id)


def mem(assessment: str, **kw) -> MemoryEntry:
    return MemoryEntry(memory_id=kw.pop("memory_id", "sch_1"), assessment=assessment, **kw)


def check_memory(entry: MemoryEntry, *, exposed: bool = True):
    return memory_entry_rejection(entry, exposed=exposed, retrieval_scope=SCOPE, lookup_replacement=lookup)


# (rule number, entry, exposed, expected code, expected field)
MEMORY_ROWS = [
    # 1 target_not_exposed — beats every other problem of the entry
    (
        1,
        mem(UNSPECIFIED, relevance=UNSPECIFIED, effect="harmed", stale_reason="superseded"),
        False,
        "target_not_exposed",
        "memory_id",
    ),
    (1, mem("used"), False, "target_not_exposed", "memory_id"),
    # 2 assessment UNSPECIFIED
    (
        2,
        mem(UNSPECIFIED, relevance=UNSPECIFIED, effect="helped", stale_reason="outdated"),
        True,
        "invalid_memory_assessment",
        "assessment",
    ),
    (2, mem(UNSPECIFIED), True, "invalid_memory_assessment", "assessment"),
    # 3 relevance present and UNSPECIFIED
    (
        3,
        mem("used", relevance=UNSPECIFIED, effect="unknown", stale_reason="outdated"),
        True,
        "invalid_relevance",
        "relevance",
    ),
    (3, mem("stale", relevance=UNSPECIFIED), True, "invalid_relevance", "relevance"),
    # 4 USED with an effect other than HELPED / NO_EFFECT / HARMED
    (
        4,
        mem("used", effect="unknown", stale_reason="outdated", replacement_memory_id="sch_7"),
        True,
        "used_requires_helped_no_effect_or_harmed_effect",
        "effect",
    ),
    (4, mem("used", effect=UNSPECIFIED), True, "used_requires_helped_no_effect_or_harmed_effect", "effect"),
    # 5 NOT_USED / UNASSESSABLE with an effect other than UNKNOWN
    (
        5,
        mem("not_used", effect="helped", stale_reason="outdated"),
        True,
        "neutral_requires_unknown_or_absent_effect",
        "effect",
    ),
    (
        5,
        mem("unassessable", effect="harmed"),
        True,  # also lacks its reason (rule 6)
        "neutral_requires_unknown_or_absent_effect",
        "effect",
    ),
    (5, mem("not_used", effect=UNSPECIFIED), True, "neutral_requires_unknown_or_absent_effect", "effect"),
    # 6 UNASSESSABLE without reason
    (
        6,
        mem("unassessable", replacement_memory_id="sch_7", stale_reason="withdrawn"),
        True,
        "unassessable_requires_reason",
        "reason",
    ),
    (6, mem("unassessable", effect="unknown"), True, "unassessable_requires_reason", "reason"),
    # 7 ALREADY_KNOWN with an effect other than UNKNOWN
    (
        7,
        mem("already_known", effect="helped", replacement_memory_id="sch_7", stale_reason="outdated"),
        True,
        "already_known_requires_unknown_or_absent_effect",
        "effect",
    ),
    (7, mem("already_known", effect=UNSPECIFIED), True, "already_known_requires_unknown_or_absent_effect", "effect"),
    # 8 ALREADY_KNOWN with replacement_memory_id
    (
        8,
        mem("already_known", effect="unknown", replacement_memory_id="sch_7", stale_reason="outdated"),
        True,
        "already_known_requires_no_replacement",
        "replacement_memory_id",
    ),
    # 9 IRRELEVANT with an effect other than UNKNOWN
    (
        9,
        mem("irrelevant", effect="harmed", stale_reason="outdated", replacement_memory_id="sch_7"),
        True,
        "irrelevant_requires_unknown_or_absent_effect",
        "effect",
    ),
    (9, mem("irrelevant", effect=UNSPECIFIED), True, "irrelevant_requires_unknown_or_absent_effect", "effect"),
    # 10 STALE with an effect other than UNKNOWN (also lacks stale_reason and reason)
    (10, mem("stale", effect="helped"), True, "stale_requires_unknown_or_absent_effect", "effect"),
    (
        10,
        mem("stale", effect=UNSPECIFIED, stale_reason="outdated", reason="r"),
        True,
        "stale_requires_unknown_or_absent_effect",
        "effect",
    ),
    # 11 STALE without a valid stale_reason (also lacks reason, bad replacement)
    (11, mem("stale", replacement_memory_id="42"), True, "stale_requires_valid_stale_reason", "stale_reason"),
    (
        11,
        mem("stale", stale_reason=UNSPECIFIED, effect="unknown"),
        True,
        "stale_requires_valid_stale_reason",
        "stale_reason",
    ),
    # 12 STALE without reason (also a malformed replacement)
    (12, mem("stale", stale_reason="outdated", replacement_memory_id="42"), True, "stale_requires_reason", "reason"),
    (12, mem("stale", stale_reason="superseded"), True, "stale_requires_reason", "reason"),  # also no replacement
    # 13 STALE + SUPERSEDED without replacement
    (
        13,
        mem("stale", stale_reason="superseded", reason="a newer claim replaces it"),
        True,
        "superseded_requires_replacement_memory_id",
        "replacement_memory_id",
    ),
    # 14 stale_reason present, assessment not STALE (also a replacement: rule 15)
    (
        14,
        mem("used", stale_reason="outdated", replacement_memory_id="sch_7"),
        True,
        "stale_reason_requires_stale_assessment",
        "stale_reason",
    ),
    (14, mem("not_used", stale_reason=UNSPECIFIED), True, "stale_reason_requires_stale_assessment", "stale_reason"),
    (
        14,
        mem("irrelevant", stale_reason="contradicted"),
        True,
        "stale_reason_requires_stale_assessment",
        "stale_reason",
    ),
    (
        14,
        mem("unassessable", reason="r", stale_reason="withdrawn"),
        True,
        "stale_reason_requires_stale_assessment",
        "stale_reason",
    ),
    # 15 replacement present, assessment not STALE
    (
        15,
        mem("used", replacement_memory_id="42"),
        True,
        "replacement_requires_stale_assessment",
        "replacement_memory_id",
    ),
    (
        15,
        mem("irrelevant", replacement_memory_id="sch_7"),
        True,
        "replacement_requires_stale_assessment",
        "replacement_memory_id",
    ),
    # 16 replacement equals memory_id (checked before its format or existence)
    (
        16,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_1"),
        True,
        "replacement_matches_retired_memory",
        "replacement_memory_id",
    ),
    (
        16,
        mem("stale", memory_id="sch_999", stale_reason="outdated", reason="r", replacement_memory_id="sch_999"),
        True,
        "replacement_matches_retired_memory",
        "replacement_memory_id",
    ),
    # 17 replacement not canonical
    (
        17,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="42"),
        True,
        "invalid_replacement_memory_id",
        "replacement_memory_id",
    ),
    (
        17,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_042"),
        True,
        "invalid_replacement_memory_id",
        "replacement_memory_id",
    ),
    (
        17,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_0"),
        True,
        "invalid_replacement_memory_id",
        "replacement_memory_id",
    ),
    (
        17,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="SCH_7"),
        True,
        "invalid_replacement_memory_id",
        "replacement_memory_id",
    ),
    (
        17,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_7x"),
        True,
        "invalid_replacement_memory_id",
        "replacement_memory_id",
    ),
    # 18 replacement does not exist
    (
        18,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_999999"),
        True,
        "replacement_not_found",
        "replacement_memory_id",
    ),
    # 19 replacement in another scope (also retired: rule 20)
    (
        19,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_8"),
        True,
        "replacement_scope_mismatch",
        "replacement_memory_id",
    ),
    (
        19,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_10"),
        True,
        "replacement_scope_mismatch",
        "replacement_memory_id",
    ),
    # 20 replacement retired
    (
        20,
        mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_9"),
        True,
        "replacement_not_current",
        "replacement_memory_id",
    ),
]


@pytest.mark.parametrize(
    ("rule", "entry", "exposed", "code", "field"),
    MEMORY_ROWS,
    ids=[f"rule{r[0]}-{i}" for i, r in enumerate(MEMORY_ROWS)],
)
def test_memory_rules_in_table_order(rule, entry, exposed, code, field):
    rejection = check_memory(entry, exposed=exposed)
    assert rejection is not None, f"rule {rule} should reject {entry}"
    assert (rejection.reason, rejection.field) == (code, field)
    assert rejection.hint  # recovery advice is present (its wording is unstable)


def test_memory_table_covers_every_code_in_order():
    codes = []
    for rule, _entry, _exposed, code, _field in MEMORY_ROWS:
        if code not in codes:
            codes.append(code)
            assert len(codes) == rule
    assert codes == [
        "target_not_exposed",
        "invalid_memory_assessment",
        "invalid_relevance",
        "used_requires_helped_no_effect_or_harmed_effect",
        "neutral_requires_unknown_or_absent_effect",
        "unassessable_requires_reason",
        "already_known_requires_unknown_or_absent_effect",
        "already_known_requires_no_replacement",
        "irrelevant_requires_unknown_or_absent_effect",
        "stale_requires_unknown_or_absent_effect",
        "stale_requires_valid_stale_reason",
        "stale_requires_reason",
        "superseded_requires_replacement_memory_id",
        "stale_reason_requires_stale_assessment",
        "replacement_requires_stale_assessment",
        "replacement_matches_retired_memory",
        "invalid_replacement_memory_id",
        "replacement_not_found",
        "replacement_scope_mismatch",
        "replacement_not_current",
    ]


ACCEPTED_MEMORY = [
    mem("used"),
    mem("used", effect="helped"),
    mem("used", effect="no_effect"),
    mem("used", effect="harmed", relevance="irrelevant"),
    mem("used", relevance="relevant", reason="shaped the fix"),
    mem("irrelevant"),
    mem("irrelevant", effect="unknown", relevance="irrelevant"),
    mem("not_used"),
    mem("not_used", effect="unknown", relevance="uncertain"),
    mem("unassessable", reason="the run log is gone"),
    mem("unassessable", reason="the run log is gone", effect="unknown"),
    mem("already_known"),
    mem("already_known", effect="unknown"),
    mem("stale", stale_reason="contradicted", reason="the port is now 9090"),
    mem("stale", stale_reason="outdated", reason="r", effect="unknown"),
    mem("stale", stale_reason="unsupported", reason="r"),
    mem("stale", stale_reason="withdrawn", reason="r"),
    mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_7"),
    # a replacement is allowed (and validated) with any stale reason
    mem("stale", stale_reason="outdated", reason="r", replacement_memory_id="sch_7"),
]


@pytest.mark.parametrize("entry", ACCEPTED_MEMORY)
def test_valid_memory_entries_are_accepted(entry):
    assert check_memory(entry) is None


@pytest.mark.parametrize("reason", ["contradicted", "outdated", "unsupported", "withdrawn"])
def test_replacement_is_validated_whatever_the_stale_reason(reason):
    entry = mem("stale", stale_reason=reason, reason="r", replacement_memory_id="sch_999999")
    assert check_memory(entry).reason == "replacement_not_found"
    entry = mem("stale", stale_reason=reason, reason="r", replacement_memory_id="sch_9")
    assert check_memory(entry).reason == "replacement_not_current"


def test_replacement_need_not_be_exposed():
    """The lookup is by tenant store, not by exposure: an active same-scope memory is fine."""
    assert check_memory(mem("stale", stale_reason="superseded", reason="r", replacement_memory_id="sch_7")) is None


def test_exposure_is_checked_first_even_for_a_valid_entry():
    assert check_memory(mem("used"), exposed=False).reason == "target_not_exposed"


# --------------------------------------------------------------------------- procedure table


def proc(use: str, **kw) -> ProcedureEntry:
    return ProcedureEntry(procedure_id=kw.pop("procedure_id", "proc_sess_0123456789ab"), use=use, **kw)


PROCEDURE_ROWS = [
    (1, proc(UNSPECIFIED), False, "target_not_exposed", "procedure_id"),
    (1, proc("used", effect="helped", contribution="c"), False, "target_not_exposed", "procedure_id"),
    (2, proc(UNSPECIFIED), True, "invalid_procedure_use", "use"),
    (2, proc(UNSPECIFIED, effect="helped"), True, "invalid_procedure_use", "use"),
    (3, proc("used"), True, "invalid_procedure_effect", "effect"),  # also no contribution
    (3, proc("used", effect=UNSPECIFIED), True, "invalid_procedure_effect", "effect"),
    (3, proc("not_used"), True, "invalid_procedure_effect", "effect"),
    (3, proc("unassessable"), True, "invalid_procedure_effect", "effect"),  # also no reason
    (4, proc("used", effect="helped"), True, "used_procedure_requires_contribution", "contribution"),
    (4, proc("used", effect="unknown", reason="r"), True, "used_procedure_requires_contribution", "contribution"),
    (5, proc("unassessable", effect="unknown"), True, "unassessable_requires_reason", "reason"),
    (5, proc("unassessable", effect="helped", contribution="c"), True, "unassessable_requires_reason", "reason"),
]


@pytest.mark.parametrize(
    ("rule", "entry", "exposed", "code", "field"),
    PROCEDURE_ROWS,
    ids=[f"rule{r[0]}-{i}" for i, r in enumerate(PROCEDURE_ROWS)],
)
def test_procedure_rules_in_table_order(rule, entry, exposed, code, field):
    rejection = procedure_entry_rejection(entry, exposed=exposed)
    assert rejection is not None, f"rule {rule} should reject {entry}"
    assert (rejection.reason, rejection.field) == (code, field)
    assert rejection.hint


@pytest.mark.parametrize(
    "entry",
    [
        proc("used", effect="helped", contribution="followed every step"),
        proc("used", effect="no_effect", contribution="c"),
        proc("used", effect="harmed", contribution="c", reason="step 3 broke staging"),
        proc("used", effect="unknown", contribution="c"),
        # seed: usage and effect are separate signals; any effect with any use
        proc("not_used", effect="helped"),
        proc("not_used", effect="no_effect"),
        proc("not_used", effect="harmed", contribution="stored without effect"),
        proc("not_used", effect="unknown"),
        proc("unassessable", effect="unknown", reason="cannot tell"),
        proc("unassessable", effect="harmed", reason="cannot tell"),
    ],
)
def test_valid_procedure_entries_are_accepted(entry):
    assert procedure_entry_rejection(entry, exposed=True) is None


def test_incomplete_coverage_rejection():
    r = incomplete_coverage()
    assert (r.reason, r.field) == ("incomplete_coverage", "coverage")
    assert r.hint
