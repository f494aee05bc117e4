"""The lifecycle filter of commit trajectories (behaviour §11.2; checklist 46, 66)."""

from __future__ import annotations

import pytest

from slowave.domain.trajectory_filter import filter_lifecycle, is_lifecycle_entry, normalized

# --------------------------------------------------------------------------- the spec's own examples

SPEC_DROPPED = [
    "Activated the Slowave session",
    "Committed the session.",
    "Called slowave_recall",
    "Called slowave_feedback on ctx_a1b2c3d4e5f6",
    "Ran slowave_commit with outcome success",
    "slowave_feedback: assessed 3 memories",
]
SPEC_KEPT = [
    "Fixed the slowave session resolver",
    "Called slowave_recall to find the deploy port, then edited config.yaml",
]


@pytest.mark.parametrize("summary", SPEC_DROPPED)
def test_spec_examples_dropped(summary):
    assert is_lifecycle_entry(summary)


@pytest.mark.parametrize("summary", SPEC_KEPT)
def test_spec_examples_kept(summary):
    assert not is_lifecycle_entry(summary)


def test_scenario_46():
    summaries = [
        "Activated the Slowave session",
        "Called slowave_recall",
        "slowave_commit: done",
        "Committed the session.",
        "Fixed the slowave session resolver",
    ]
    kept, dropped = filter_lifecycle(summaries)
    assert dropped == 4
    assert kept == [4]
    assert [summaries[i] for i in kept] == ["Fixed the slowave session resolver"]


def test_scenario_66():
    summaries = [
        "Called slowave_feedback on ctx_a1b2c3d4e5f6",
        "Ran slowave_commit with outcome success",
        "Ran slowave_commit with outcome success after fixing CI",
    ]
    kept, dropped = filter_lifecycle(summaries)
    assert dropped == 2
    assert kept == [2]


def test_nothing_filtered_reports_zero_and_keeps_order():
    summaries = ["Reviewed the nightly build log for the past 7 days.", "Opened PR #1042 to restore SERVICE_TOKEN."]
    assert filter_lifecycle(summaries) == ([0, 1], 0)


def test_empty_trajectory():
    assert filter_lifecycle([]) == ([], 0)


def test_seed_trajectory_example_is_kept_whole():
    """Seed commit example "With trajectory": none of its five entries is lifecycle narration."""
    summaries = [
        "Reviewed the nightly build log for the past 7 days.",
        "Failures started on 2026-08-20, correlating with a config change PR.",
        "Diffed the config change PR against the prior working config.",
        "Found that SERVICE_TOKEN was removed from the CI environment variable list.",
        "Opened PR #1042 to restore SERVICE_TOKEN in the CI config.",
    ]
    assert filter_lifecycle(summaries) == ([0, 1, 2, 3, 4], 0)


# --------------------------------------------------------------------------- rule 1: prefixes


@pytest.mark.parametrize("tool", ["activate", "remember", "recall", "feedback", "commit"])
def test_prefix_rule_each_tool(tool):
    assert is_lifecycle_entry(f"slowave_{tool}: anything at all, even a real step")
    assert is_lifecycle_entry(f"  SLOWAVE_{tool.upper()}:x  ")  # trimmed and lowercased


@pytest.mark.parametrize(
    "summary",
    [
        "slowave_commit done",  # no colon
        "slowave_commit : done",  # not the exact prefix
        "slowave_consolidate: done",  # not one of the five tools
        "ran: slowave_commit:",  # prefix not at the start
    ],
)
def test_prefix_rule_is_exact(summary):
    assert not is_lifecycle_entry(summary)


# --------------------------------------------------------------------------- rule 2: phrases

PHRASES = [
    "activated the slowave session",
    "committed the slowave session",
    "committed the session",
    "the slowave session was activated",
    "the slowave session was committed",
    "submitted complete retrieval feedback",
    "submitted retrieval feedback",
    "completed retrieval feedback",
    "completed lifecycle feedback",
]


@pytest.mark.parametrize("phrase", PHRASES)
def test_each_phrase_dropped(phrase):
    assert is_lifecycle_entry(phrase)
    assert is_lifecycle_entry(phrase.upper())
    assert is_lifecycle_entry(f"  {phrase.title()}.!? ")
    assert is_lifecycle_entry(phrase.replace(" ", " \t\n  "))


@pytest.mark.parametrize("phrase", PHRASES)
def test_phrase_must_be_whole(phrase):
    assert not is_lifecycle_entry(f"{phrase} after fixing the bug")
    assert not is_lifecycle_entry(f"then {phrase}")


def test_normalised_form():
    assert normalized("  Committed\t the   SESSION.  ") == "committed the session"
    # punctuation and white space stripped repeatedly from both ends
    assert normalized(".,;: ! ?Committed the session ?! .;") == "committed the session"
    # inner punctuation is kept
    assert normalized("a, b") == "a, b"


# --------------------------------------------------------------------------- rule 3: tool calls


@pytest.mark.parametrize("verb", ["called", "invoked", "ran", "used"])
@pytest.mark.parametrize("tool", ["activate", "remember", "recall", "feedback", "commit"])
def test_tool_call_verbs_and_tools(verb, tool):
    assert is_lifecycle_entry(f"{verb.capitalize()} slowave_{tool}")
    assert is_lifecycle_entry(f"{verb} the slowave_{tool} tool")


@pytest.mark.parametrize(
    "summary",
    [
        "Called the slowave_activate tool",
        "Invoked slowave_remember tool.",
        "Used slowave_feedback for sch_42",
        "Called slowave_feedback on ctx_a1b2c3d4e5f6 and rec_0123456789ab",
        "Called slowave_feedback on ctx_a, rec_b and sch_1",
        "Called slowave_feedback on ctx_a, rec_b, and sch_1",
    ],
)
def test_tool_call_with_ids(summary):
    assert is_lifecycle_entry(summary)


@pytest.mark.parametrize("prefix", ["sess", "ctx", "rec", "sch", "proc", "cur", "cont", "fbe", "evt", "ep"])
def test_every_id_kind_is_an_argument(prefix):
    assert is_lifecycle_entry(f"Called slowave_feedback on {prefix}_AbC-1_2")


@pytest.mark.parametrize("outcome", ["success", "partial", "failure"])
def test_outcome_argument(outcome):
    assert is_lifecycle_entry(f"Ran slowave_commit with outcome {outcome}")
    assert is_lifecycle_entry(f"Ran slowave_commit with outcome {outcome}.")


@pytest.mark.parametrize(
    "summary",
    [
        "Ran slowave_commit with outcome success after fixing CI",
        "Ran slowave_commit with outcome unknown",
        "Called slowave_feedback on the memories",
        "Called slowave_feedback on job_42",  # not a Slowave id kind
        "Called slowave_consolidate",
        "Called slowave_recall to find the deploy port",
        "Called slowave_recall twice",
        "Called slowave_feedback on ctx_a and",
        "Called slowave_feedback on ctx_a or rec_b",
        "Then called slowave_recall",
        "Called slowave_recallx",
        "Calledslowave_recall",
        "Called the the slowave_recall",
        # only `, `, ` and `, `, and ` separate arguments: a second preposition is not allowed
        "Called slowave_commit for sess_0123456789ab with outcome success",
    ],
)
def test_tool_call_must_fully_match(summary):
    assert not is_lifecycle_entry(summary)


def test_ids_on_either_side_of_commas_and_and():
    assert is_lifecycle_entry("Invoked slowave_feedback with ctx_1, ctx_2, ctx_3 and outcome failure")
