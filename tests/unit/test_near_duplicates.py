"""The duplicate and conflict rule of Remember (domain.near_duplicates; behaviour §6, §10)."""

from __future__ import annotations

import pytest

from slowave.domain.near_duplicates import (
    Relation,
    compare,
    conflicting_pairs,
    may_hold_two_values,
    possible_conflicts,
    relation,
    shape,
)

SUPERSEDES, SIMILAR, NONE = Relation.SUPERSEDES, Relation.SIMILAR, Relation.NONE


def test_shape_separates_values_from_wording():
    s = shape("The payments-api cache was upgraded to Redis 7.2 in PAY-1234 on 2024-05-02.")
    assert s.values == {"payments-api", "redis 7.2", "pay-1234", "2024-05-02"}
    assert s.wording == {"cach", "upgrad"}
    redis = next(slot for slot in s.slots if slot.value == "redis 7.2")
    assert (redis.head, redis.before, redis.after) == ("redis", "upgrad", "$")


@pytest.mark.parametrize(
    ("text", "values"),
    [
        ("Priya Raman is the on-call owner of billing.", {"priya raman"}),  # a name at the start; on-call is a word
        ("Deploys use v2.4.1 of the chart.", {"2.4.1"}),  # versions compare without their v
        ("Python 3.11 is the runtime, not Python 3.12.", {"python 3.11", "python 3.12"}),
        ("The read-only replica lags.", set()),  # hyphenated words are not identifiers
        ("Configs live in deploy/values.yaml.", {"deploy/values.yaml"}),
        ("We chose MySQL over MongoDB.", {"mysql", "mongodb"}),  # a stop word between values splits them
    ],
)
def test_values(text, values):
    assert shape(text).values == values


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("payments-api listens on port 8080.", "payments-api listens on port 9090."),  # a port
        ("The search-indexer runs Python 3.11.", "The search-indexer runs Python 3.12."),  # a version
        ("Deploys of checkout-web use chart v2.4.1.", "Deploys of checkout-web use chart v2.5.0."),
        ("Priya Raman is the on-call owner of billing-cron.", "Marco Silva is the on-call owner of billing-cron."),
        ("billing-cron is built and deployed by Jenkins.", "billing-cron is built and deployed by GitHub Actions."),
        (
            "The ledger-worker HTTP client timeout is 30 seconds.",
            "The ledger-worker HTTP client timeout was changed to 45 seconds in OPS-12.",  # reworded, a ticket added
        ),
        ("The freeze of notify-hub starts on 2024-12-20.", "The freeze of notify-hub starts on 2025-01-06."),  # a date
    ],
)
def test_a_changed_value_possibly_supersedes(older, newer):
    assert relation(newer, older) is SUPERSEDES


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("payments-api listens on port 8080 in production.", "In production the payments-api port is 8080."),
        ("docs-portal logs are kept 90 days in eu-west-1.", "Retention for docs-portal logs: 90 days (eu-west-1)."),
        ("The image-resizer memory limit is 1536 MiB.", "image-resizer memory limit: 1536 MiB."),
        ("The nightly build is slow on Mondays.", "On Mondays the nightly build is slow."),
        ("the nightly build fails when the cache is cold", "when the cache is cold the nightly build fails"),
        ("the deploy port is 8080", "THE DEPLOY PORT IS 8080"),  # the same text (another type; the same is MATCHED)
    ],
)
def test_the_same_values_in_other_words_are_similar(older, newer):
    assert relation(newer, older) is SIMILAR


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # another service: the same statement about another thing, not a new version
        ("search-indexer uses Postgres 13.", "payments-api uses Postgres 16."),
        ("The ledger-worker timeout is 60 seconds.", "The billing-cron timeout is 60 seconds."),
        # the kept values swapped places
        (
            "docs-portal must never call image-resizer; use image.jobs.",
            "image-resizer must never call docs-portal; use docs.jobs.",
        ),
        # two versioned products, not two versions of one
        ("auth-gateway is built and run on Node.js 18.19.", "The auth-gateway cache runs Redis 6.2."),
        # only a number in common: nothing says what the claim is about
        ("Retries back off for 30 seconds.", "Uploads time out after 90 seconds."),
        # unrelated
        ("payments-api listens on port 8080.", "The team prefers Mermaid diagrams in design docs."),
        ("The nightly build is slow on Mondays.", "Release notes go to the #releases channel."),
        ("the nightly build is slow", "the nightly build is slow after a release"),  # no values, other words
    ],
)
def test_unrelated_or_distinct_claims_are_not_flagged(older, newer):
    assert relation(newer, older) is NONE


def test_a_change_of_the_topic_is_not_a_new_version_when_the_scope_says_what_the_topic_is():
    older = "The ledger-worker container must stay under 1024 MiB or the node evicts it."
    newer = "The checkout-web container must stay under 1024 MiB or the node evicts it."
    # Only a number in common: never flagged, whatever the scope holds.
    assert relation(newer, older) is NONE
    older = "Every write to auth-gateway needs an Idempotency-Key header."
    newer = "Every write to geo-lookup needs an Idempotency-Key header."
    assert relation(newer, older) is SUPERSEDES  # alone, the rule cannot tell which name is the topic
    counts = {"auth-gateway": 30, "geo-lookup": 25, "idempotency-key": 3}
    assert relation(newer, older, counts.__getitem__) is NONE  # the services are what the scope talks about
    counts = {"auth-gateway": 2, "geo-lookup": 1, "idempotency-key": 30}
    assert relation(newer, older, counts.__getitem__) is SUPERSEDES


def test_conflicting_pairs_are_ordered_older_then_newer():
    items = [
        ("sch_1", "payments-api listens on port 8080."),
        ("sch_2", "The team prefers Mermaid diagrams."),
        ("sch_3", "payments-api listens on port 9090."),
        ("sch_4", "payments-api listens on port 7070."),
    ]
    assert conflicting_pairs(items) == [("sch_1", "sch_3"), ("sch_1", "sch_4"), ("sch_3", "sch_4")]
    assert conflicting_pairs(items[:2]) == []


def test_compare_leaves_only_the_topic_check_to_the_scopes_counts():
    older = "Every write to auth-gateway needs an Idempotency-Key header."
    newer = "Every write to geo-lookup needs an Idempotency-Key header."
    verdict = compare(shape(newer), shape(older))
    assert verdict.relation is SUPERSEDES
    assert verdict.topic == ("auth-gateway", ("idempotency-key",))
    assert set(verdict.values()) == {"auth-gateway", "idempotency-key"}
    assert verdict.resolve(None) is SUPERSEDES
    assert verdict.resolve({"auth-gateway": 30, "idempotency-key": 3}.__getitem__) is NONE
    # A replaced number asks nothing of the scope.
    plain = compare(shape("payments-api listens on port 9090."), shape("payments-api listens on port 8080."))
    assert plain.relation is SUPERSEDES and plain.values() == ()


MIXED = [
    "payments-api listens on port 8080.",
    "payments-api listens on port 9090.",
    "The team prefers Mermaid diagrams.",
    "the team prefers mermaid diagrams.",
    "Priya Raman is the on-call owner of billing-cron.",
    "Elena Petrova is the on-call owner of billing-cron.",
    "billing-cron runs Redis 6.2 in eu-west-1; see OPS-12.",
    "billing-cron runs Redis 7.2 in eu-west-1.",
    "Caroline: I went to the park. Melanie said Paris was lovely",
    "Caroline: I went to the beach. Melanie said London was lovely",
    "deploys are frozen on Fridays",
    "Deploys are frozen on Fridays!",
    "v2.4.1 ships Node.js 18 and Redis 6",
]


@pytest.mark.parametrize("newer", MIXED)
@pytest.mark.parametrize("older", MIXED)
def test_compare_resolved_is_relation(newer, older):
    counts = {"payments-api": 9, "billing-cron": 5, "priya raman": 1, "elena petrova": 1, "caroline": 40}

    def mentions(value):
        return counts.get(value, 2)

    assert compare(shape(newer), shape(older)).resolve(mentions) is relation(newer, older, mentions)


def test_possible_conflicts_are_every_pair_relation_flags():
    items = [(f"sch_{i}", text) for i, text in enumerate(MIXED)]
    expected = [
        (old_id, new_id)
        for j, (new_id, new) in enumerate(items)
        for old_id, old in items[:j]
        if relation(new, old) is SUPERSEDES
    ]
    assert [pair for pair, _ in possible_conflicts(items)] == expected
    assert expected  # the list holds versions of a fact


@pytest.mark.parametrize(
    "text, two",
    [
        ("deploys are frozen on fridays", False),
        ("Deploys are frozen on Fridays", True),  # a bound only: two capitals, though one slot
        ("payments-api listens on port 8080.", True),
        ("I think so. I do.", False),  # stop words, capitalised or not, are never values
        ("Caroline: Melanie called", True),
    ],
)
def test_may_hold_two_values_is_a_bound_of_the_slots(text, two):
    assert may_hold_two_values(text) is two
    if not two:
        assert len(shape(text).slots) < 2


def test_a_sentence_starts_after_an_end_mark_and_white_space():
    # A capitalised word opening a sentence is a name only when a name or a number follows it.
    assert [slot.value for slot in shape("Deploys happen weekly; Deploys stop in December.").slots] == ["december"]
    assert [slot.value for slot in shape("Deploys happen weekly, Deploys stop in December.").slots] == [
        "deploys",
        "december",
    ]
