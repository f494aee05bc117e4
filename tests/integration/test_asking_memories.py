"""Memories that ask rather than tell, over real gRPC (relevance.asks, ASKING_WEIGHT,
domain.retrieval.CandidateScoring.asking_lowered), on the lexical channel and on the defaults'
hybrid one. The compared claims hold the cue's words, each stored in a session of its own (no session
context, one-claim occasions), the question stored first, so that without the rule it would rank
first (equal relevance is broken by memory number)."""

from __future__ import annotations

import pytest

from slowave.domain.relevance import ADMISSION_THRESHOLD, ASKING_WEIGHT
from tests.support import relevance_by_content, remember_alone


def test_a_memory_that_tells_outranks_one_that_asks_with_the_same_words(any_server, scope):
    asking_claim = "Which retry budget does ledger-worker use for webhook deliveries?"
    telling_claim = "ledger-worker uses a retry budget of 5 for webhook deliveries."
    for content in (asking_claim, telling_claim):  # the question first: it would win the tie
        remember_alone(any_server.stub, scope, content)
    ranked = relevance_by_content(any_server.stub, scope, "retry budget of ledger-worker for webhook deliveries")
    assert next(iter(ranked)) == telling_claim, ranked
    asking, telling = ranked[asking_claim], ranked[telling_claim]
    assert ADMISSION_THRESHOLD <= asking < telling


def test_the_rule_grows_what_an_asking_memory_lacks_by_its_weight(server, scope):
    # Lexical channel, the same terms asked and told: what the asking memory lacks of 1 is what the
    # statement lacks, grown by 1 / (1 - ASKING_WEIGHT) (each one's occasion then fills the same
    # share of either lack, which keeps the ratio), and it stays admitted.
    stub = server.stub
    remember_alone(stub, scope, "Does the nightly export include archived tenants?")
    remember_alone(stub, scope, "The nightly export includes archived tenants.")
    ranked = relevance_by_content(stub, scope, "nightly export of archived tenants")
    telling = ranked["The nightly export includes archived tenants."]
    asking = ranked["Does the nightly export include archived tenants?"]
    assert ADMISSION_THRESHOLD <= asking < telling < 1.0, ranked
    assert (1 - asking) / (1 - telling) == pytest.approx(1 / (1 - ASKING_WEIGHT), rel=1e-4), ranked


def test_a_question_the_cue_contains_verbatim_keeps_full_relevance(server, scope):
    stub = server.stub
    remember_alone(stub, scope, "Should billing-db move to Postgres 16?")
    ranked = relevance_by_content(stub, scope, "Decide: should billing-db move to Postgres 16? Check the notes.")
    assert ranked["Should billing-db move to Postgres 16?"] == 1.0
