"""The duplicate and conflict rule of Remember (domain.near_duplicates; behaviour §6, §10)."""

from __future__ import annotations

import pytest

from slowave.domain.near_duplicates import (
    AFTER,
    BEFORE,
    HEAD,
    SIDE,
    VALUE,
    Relation,
    compare,
    conflicting_pairs,
    possible_conflicts,
    relation,
    shape,
)

SUPERSEDES, SIMILAR, NONE = Relation.SUPERSEDES, Relation.SIMILAR, Relation.NONE


def test_shape_separates_values_from_wording():
    s = shape("The payments-api cache was upgraded to Redis 7.2 in PAY-1234 on 2024-05-02.")
    assert s.values == {"payments-api", "redis 7.2", "pay-1234", "2024-05-02"}
    assert s.wording == {"cach", "upgrad"}
    redis = next(slot for slot in s.slots if slot[VALUE] == "redis 7.2")
    assert (redis[HEAD], redis[BEFORE], redis[AFTER]) == ("redis", "upgrad", "$")


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
    ("older", "newer", "expected"),
    [
        ("payments-api listens on port 8080 in production.", "In production the payments-api port is 8080.", SIMILAR),
        ("the deploy port is 8080", "THE DEPLOY PORT IS 8080", SIMILAR),
        ("search-indexer uses Postgres 13.", "search-indexer uses Postgres 16.", SUPERSEDES),
        ("The default branch is master.", "The default branch is main.", SUPERSEDES),
    ],
)
def test_the_page_check_asks_only_for_versions(older, newer, expected):
    """`similar=False` (the page check): a SIMILAR pair reads as NONE, a SUPERSEDES pair unchanged."""
    new, old = shape(newer), shape(older)
    assert compare(new, old).relation is expected
    verdict = compare(new, old, similar=False)
    if expected is SUPERSEDES:
        assert verdict == compare(new, old)
    else:
        assert verdict.relation is NONE


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
    # An identifier replaced away from the end of the claim is what it is about: another service.
    older = "Every write to auth-gateway needs an Idempotency-Key header."
    newer = "Every write to geo-lookup needs an Idempotency-Key header."
    assert relation(newer, older) is NONE
    older = "Every write to Stripe needs an Idempotency-Key header."
    newer = "Every write to Adyen needs an Idempotency-Key header."
    assert relation(newer, older) is SUPERSEDES  # alone, the rule cannot tell which name is the topic
    counts = {"stripe": 30, "adyen": 25, "idempotency-key": 3}
    assert relation(newer, older, counts.__getitem__) is NONE  # the providers are what the scope talks about
    counts = {"stripe": 2, "adyen": 1, "idempotency-key": 30}
    assert relation(newer, older, counts.__getitem__) is SUPERSEDES


def test_a_new_version_of_a_named_value_is_one_however_often_the_scope_mentions_it():
    older = "media-transcoder uses Postgres 14."
    newer = "media-transcoder was upgraded on 2023-10-15 and now uses Postgres 15."
    # A scope of many claims about other services' Postgres versions: Postgres is mentioned far
    # more often than the service, yet the service's database changed version, not topic.
    counts = {"postgres 14": 300, "postgres 15": 280, "media-transcoder": 4}
    assert relation(newer, older, counts.__getitem__) is SUPERSEDES
    assert compare(shape(newer), shape(older)).values() == ()
    # A name replaced by another name is still weighed against the scope's counts.
    verdict = compare(
        shape("Every write to Adyen needs an Idempotency-Key header."),
        shape("Every write to Stripe needs an Idempotency-Key header."),
    )
    assert verdict.topic is not None and verdict.topic[0] == "stripe"


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
    older = "Every write to Stripe needs an Idempotency-Key header."
    newer = "Every write to Adyen needs an Idempotency-Key header."
    verdict = compare(shape(newer), shape(older))
    assert verdict.relation is SUPERSEDES
    assert verdict.topic == ("stripe", ("idempotency-key",))
    assert set(verdict.values()) == {"stripe", "idempotency-key"}
    assert verdict.resolve(None) is SUPERSEDES
    assert verdict.resolve({"stripe": 30, "idempotency-key": 3}.__getitem__) is NONE
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


def test_a_sentence_starts_after_an_end_mark_and_white_space():
    # A capitalised word opening a sentence is a name only when a name or a number follows it.
    assert [slot[VALUE] for slot in shape("Deploys happen weekly; Deploys stop in December.").slots] == ["december"]
    assert [slot[VALUE] for slot in shape("Deploys happen weekly, Deploys stop in December.").slots] == [
        "deploys",
        "december",
    ]


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # no name-like subject: the wording is what the claim is about
        ("The release train leaves every 2 weeks.", "The release train leaves every 3 weeks."),
        ("Password minimum length is 8 characters.", "Password minimum length is 12 characters."),
        # a person or a product as the only value
        ("Anna Berg leads the data platform team.", "Jonas Weber leads the data platform team."),
        ("Payments settle through Adyen.", "Payments settle through Stripe."),
        ("The build cache lives on S3.", "The build cache now lives on GCS."),  # a bare value for a name
        # a value written as a plain word, where values stand
        ("The default branch of infra-live is master.", "The default branch of infra-live is main."),
        ("The default branch is master.", "The default branch was renamed to main."),
        ("Standups happen daily.", "Standups happen weekly now."),
        ("The search index is rebuilt nightly.", "The search index is rebuilt hourly."),
    ],
)
def test_values_without_a_kept_name_or_written_as_words_possibly_supersede(older, newer):
    assert relation(newer, older) is SUPERSEDES


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("orders-db runs on PostgreSQL 14.9.", "orders-db now runs on PostgreSQL 16.2 after the March upgrade."),
        (
            "search-api exposes metrics on port 9100.",
            "search-api exposes metrics on port 9464 since the exporter change.",
        ),
        ("Our CDN is Cloudflare.", "Our CDN is Fastly, following the outage in June."),
        ("Release notes are written by Sara Kim.", "Since 2025-03-01, release notes are written by Omar Haddad."),
        ("Java services use Spring Boot 2.7.", "Java services were upgraded to Spring Boot 3.2 last quarter."),
        ("The staging cluster has 6 nodes.", "The staging cluster was scaled to 10 nodes."),  # a change verb
        ("session-cache is hosted in eu-west-1.", "session-cache was migrated to us-east-2 on 2024-05-02."),
        (
            "The gateway certificate expires on 2025-11-30.",
            "The gateway certificate was renewed and expires on 2026-11-30.",
        ),
        ("Max retries for webhooks is 3.", "Max retries for webhooks was raised from 3 to 5."),  # "from X to Y"
        ("The session timeout is 30 minutes.", "The session timeout went 30 -> 15 minutes."),
    ],
)
def test_change_phrases_and_side_clauses_are_not_part_of_the_fact(older, newer):
    assert relation(newer, older) is SUPERSEDES


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        # another attribute or subject beside the changed value
        (
            "The API rate limit for partner accounts is 500 requests per minute.",
            "The API rate limit for free accounts is 60 requests per minute.",
        ),
        ("search-api exposes metrics on port 9100.", "search-api exposes health checks on port 8081."),
        ("The staging cluster has 6 nodes.", "The production cluster has 24 nodes."),
        ("notify-hub listens on port 11910 in staging.", "notify-hub listens on port 25651 in canary."),
        ("We pin numpy to 1.26.4 in the analytics image.", "We pin pandas to 2.2.2 in the analytics image."),
        # an identifier replaced where the claim's subject stands
        ("Backups of billing-db are kept for 14 days.", "Backups of orders-db are kept for 14 days."),
        ("cart-svc calls pricing-svc over gRPC.", "cart-svc calls stock-svc over gRPC."),
        (
            "The pricing-engine HTTP client timeout is 60 seconds.",
            "The shipping-quotes HTTP client timeout is 60 seconds.",
        ),
        # a versioned name for another one, or for a region
        (
            "The mobile app targets iOS 16 as its minimum version.",
            "The mobile app targets Android 12 as its minimum version.",
        ),
        ("search-indexer uses Postgres 12.", "search-indexer was migrated to eu-central-1 on 2024-07-15."),
        # a plain word that is a noun of the claim, or where the fact holds
        ("Tom Berg owns the billing dashboard.", "Tom Berg owns the billing alerts."),
        ("Deploys are frozen in staging.", "Deploys are frozen in production."),
        ("The search index is rebuilt nightly.", "The search cache is flushed nightly."),
        # a whole claim opened by "After …" is the fact, not a side clause
        (
            "After PAY-4677 we learned that image-resizer retries cause thundering herds against docs-portal.",
            "After INC-3349 we learned that search-indexer retries cause thundering herds against image-resizer.",
        ),
        # a side clause of the older claim does not make a new one a version of it
        ("The code freeze starts on 2025-09-15.", "The code freeze ends on 2025-09-22."),
    ],
)
def test_distinct_claims_worded_alike_are_not_flagged(older, newer):
    assert relation(newer, older) is not SUPERSEDES


def test_change_phrases_and_former_values_are_read_apart():
    s = shape("Max retries for webhooks was raised from 3 to 5 after the outage.")
    assert s.values == {"5"}  # the former value is left out
    assert s.core == {"max", "retri", "webhook"}  # change words and the side clause too
    assert s.last == ("w", "webhook")
    assert shape("Since 2024-05-01, Marco Silva is the on-call owner.").slots[0][SIDE]
    assert not shape("After PAY-12 we learned that retries hurt.").slots[0][SIDE]
    word = shape("The default branch is master.")
    assert word.last == ("w", "master") and word.last_is_value
    noun = shape("Tom Berg owns the billing dashboard.")
    assert noun.last == ("w", "dashboard") and not noun.last_is_value


def test_possible_conflicts_hold_claims_with_a_single_value_or_none():
    items = [
        ("sch_1", "Payments settle through Adyen."),
        ("sch_2", "Standups happen daily."),
        ("sch_3", "Payments settle through Stripe."),
        ("sch_4", "Standups happen weekly."),
    ]
    assert [pair for pair, _ in possible_conflicts(items)] == [("sch_1", "sch_3"), ("sch_2", "sch_4")]
