"""Memories that ask rather than tell, over real gRPC (relevance.asks, ASKING_WEIGHT,
domain.retrieval.CandidateScoring.asking_lowered), on the lexical channel and on the defaults'
hybrid one. The compared claims hold the cue's words, each stored in a session of its own (no session
context, one-claim occasions), the question stored first, so that without the rule it would rank
first (equal relevance is broken by memory number)."""

from __future__ import annotations

import pytest

from slowave.domain.relevance import ADMISSION_THRESHOLD, ASKING_WEIGHT
from tests.support import activate, pb, res


@pytest.fixture(params=["lexical", "hybrid"])
def any_server(request):
    return request.getfixturevalue("server" if request.param == "lexical" else "hybrid_server")


def _store_alone(stub, scope: str, content: str) -> str:
    """One claim in a session of its own, left open (a commit would consolidate a lesson into the
    scope in the background, moving the term statistics while the test reads them)."""
    a = activate(stub, scope, task="taking notes", initial_goal="notes")
    r = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id, scope=scope, memories=[pb.RememberItem(content=content, type=res.MEMORY_TYPE_FACT)]
        ),
        timeout=30,
    )
    return r.batch.results[0].data.memory_id


def _ranked(stub, scope: str, question: str) -> dict[str, float]:
    return {m.content: m.ranking.relevance for m in activate(stub, scope, task=question, page_size=10).memories}


def test_a_memory_that_tells_outranks_one_that_asks_with_the_same_words(any_server, scope):
    stub = any_server.stub
    _store_alone(stub, scope, "Which retry budget does ledger-worker use for webhook deliveries?")
    _store_alone(stub, scope, "ledger-worker uses a retry budget of 5 for webhook deliveries.")
    ranked = _ranked(stub, scope, "retry budget of ledger-worker for webhook deliveries")
    order = list(ranked)
    assert order[0] == "ledger-worker uses a retry budget of 5 for webhook deliveries.", ranked
    asking = ranked["Which retry budget does ledger-worker use for webhook deliveries?"]
    telling = ranked["ledger-worker uses a retry budget of 5 for webhook deliveries."]
    assert ADMISSION_THRESHOLD <= asking < telling


def test_the_rule_grows_what_an_asking_memory_lacks_by_its_weight(server, scope):
    # Lexical channel, the same terms asked and told: what the asking memory lacks of 1 is what the
    # statement lacks, grown by 1 / (1 - ASKING_WEIGHT) (each one's occasion then fills the same
    # share of either lack, which keeps the ratio), and it stays admitted.
    stub = server.stub
    _store_alone(stub, scope, "Does the nightly export include archived tenants?")
    _store_alone(stub, scope, "The nightly export includes archived tenants.")
    ranked = _ranked(stub, scope, "nightly export of archived tenants")
    telling = ranked["The nightly export includes archived tenants."]
    asking = ranked["Does the nightly export include archived tenants?"]
    assert ADMISSION_THRESHOLD <= asking < telling < 1.0, ranked
    assert (1 - asking) / (1 - telling) == pytest.approx(1 / (1 - ASKING_WEIGHT), rel=1e-4), ranked


def test_a_question_the_cue_contains_verbatim_keeps_full_relevance(server, scope):
    stub = server.stub
    _store_alone(stub, scope, "Should billing-db move to Postgres 16?")
    ranked = _ranked(stub, scope, "Decide: should billing-db move to Postgres 16? Check the notes.")
    assert ranked["Should billing-db move to Postgres 16?"] == 1.0
