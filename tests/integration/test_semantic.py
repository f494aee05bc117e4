"""The semantic channel, on by default (behaviour §12.1 relevance model; issue: hybrid candidate generation).

Every test server runs the default channel: static embeddings distilled from all-MiniLM-L6-v2,
shipped inside the package, no torch. The lexical baseline is a server with SLOWAVE_SEMANTIC=off.
Runs on both backends (SLOWAVE_TEST_BACKEND=postgresql).
"""

from __future__ import annotations

import numpy as np
import pytest
from sqlalchemy import text

from slowave.embedding import StaticEncoder
from slowave.storage.database import Database
from slowave.v1 import resources_pb2 as res
from tests.support import activate, assess_all, commit, new_scope, pb, remember, start_test_server

CLAIM = "The payments service keeps its ledger in PostgreSQL 16."
PARAPHRASE = "Which database engine does our billing system use to store transactions?"
DISTRACTORS = [
    "The marketing site is deployed every Friday afternoon.",
    "Office plants are watered by the facilities team on Mondays.",
]


@pytest.fixture
def server(hybrid_server):
    """This module runs against the defaults' semantic channel (`make serve`)."""
    return hybrid_server


@pytest.fixture(scope="module")
def lexical_server(tmp_path_factory):
    srv = start_test_server(tmp_path_factory.mktemp("lexical"), semantic="off")
    yield srv
    srv.stop()


def _store(stub, scope, texts=(CLAIM, *DISTRACTORS)):
    a = activate(stub, scope, task="seed")
    ids = [remember(stub, a.session_id, scope, text).memory_id for text in texts]
    assess_all(stub, a)
    commit(stub, a.session_id)
    return ids


def _remember_facts(stub, scope, texts) -> list[str]:
    """Stores the texts as facts through one session, 100 per batch Remember; their ids in order."""
    seed = activate(stub, scope, task="seeding memories", initial_goal="seed")
    ids = []
    for start in range(0, len(texts), 100):
        items = [pb.RememberItem(content=t, type=res.MEMORY_TYPE_FACT) for t in texts[start : start + 100]]
        batch = stub.Remember(pb.RememberRequest(session_id=seed.session_id, scope=scope, memories=items), timeout=60)
        ids += [r.data.memory_id for r in batch.batch.results]
    return ids


def _words(text: str) -> set[str]:
    return {w.strip(".,?!").casefold() for w in text.split()}


def test_the_default_server_is_hybrid_and_finds_a_paraphrase_that_shares_no_word(server, lexical_server):
    assert not _words(CLAIM) & _words(PARAPHRASE)
    scope = new_scope()
    claim_id = _store(server.stub, scope)[0]
    hybrid = activate(server.stub, scope, task=PARAPHRASE)
    assert f"hybrid(fts5,{StaticEncoder.encoder_id.rsplit(':', 2)[0]})" in hybrid.retrieval_policy_version
    assert [m.memory_id for m in hybrid.memories][:1] == [claim_id]

    lexical_scope = new_scope()
    _store(lexical_server.stub, lexical_scope)
    lexical = activate(lexical_server.stub, lexical_scope, task=PARAPHRASE)
    assert "hybrid" not in lexical.retrieval_policy_version and "lexical(fts5)" in lexical.retrieval_policy_version
    assert all(m.content != CLAIM for m in lexical.memories), [
        (m.content, str(m.ranking), m.pathway) for m in lexical.memories
    ]


def test_numbers_in_a_claim_do_not_move_its_meaning(server):
    # The same claim with and without its version, date and ticket number, each alone in a scope
    # (so no other rule compares them), asked in words it does not share: the same relevance, as
    # the encoder leaves number tokens out of the mean. Averaging their pieces (16, ., 4, 2024 ...)
    # in gave the numbered claim 0.54 against 0.85.
    numbered = "The payments service keeps its ledger in PostgreSQL 16.4, upgraded on 2024-03-18 under ticket 48213."
    plain = "The payments service keeps its ledger in PostgreSQL."
    assert not (_words(numbered) | _words(plain)) & _words(PARAPHRASE)
    found = []
    for claim in (numbered, plain):
        scope = new_scope()
        _store(server.stub, scope, texts=(claim,))
        page = activate(server.stub, scope, task=PARAPHRASE)
        assert [m.content for m in page.memories] == [claim]
        found.append(page.memories[0].ranking.relevance)
    assert found[0] == found[1] >= 0.35, found


def _scope_vectors(server, scope) -> list:
    with server.running.ctx.db.transaction() as uow:
        return uow.vectors.after("local", scope, StaticEncoder.encoder_id, 0)


def test_vectors_are_stored_at_remember_once_per_memory_and_exact_words_still_decide(server):
    stub, scope = server.stub, new_scope()
    server.consolidate()  # nothing of earlier tests still queued
    before = server.counts()
    ids = _store(stub, scope)
    server.consolidate()  # the session's outcome summary becomes a lesson, embedded too
    after = server.counts()
    created = after["memories"] - before["memories"]
    assert created >= 3 and after["memory_vectors"] - before["memory_vectors"] == created
    vectors = _scope_vectors(server, scope)  # every memory of the new scope has one 128-dim float32 vector
    assert len(vectors) == created and all(len(r.vector) == 4 * 128 for r in vectors)

    a = activate(stub, scope, task="seed again")
    again = remember(stub, a.session_id, scope, CLAIM)  # MATCHED: no second vector
    assert again.disposition == pb.DISPOSITION_MATCHED
    assess_all(stub, a)
    commit(stub, a.session_id)
    server.consolidate()
    final = server.counts()
    assert final["memory_vectors"] - before["memory_vectors"] == final["memories"] - before["memories"]
    named = activate(stub, scope, task="Is the ledger of the payments service in PostgreSQL 16?")
    assert named.memories[0].memory_id == ids[0]


def test_a_batch_remember_embeds_every_created_claim(server):
    stub, scope = server.stub, new_scope()
    texts = [
        f"The {name} service is owned by the {team} team."
        for name, team in (("search", "discovery"), ("checkout", "payments"), ("mailer", "growth"))
    ]
    a = activate(stub, scope, task="seed")
    resp = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[pb.RememberItem(content=text, type=res.MEMORY_TYPE_FACT) for text in texts],
        ),
        timeout=30,
    )
    assert len(resp.batch.results) == 3
    assert len(_scope_vectors(server, scope)) == 3  # stored with the claims, before any commit
    found = activate(stub, scope, task="Who looks after the payment flow at purchase time?")
    assert found.memories and found.memories[0].content == texts[1]
    for act in (a, found):
        assess_all(stub, act)
        commit(stub, act.session_id)


PORT_CLAIMS = [
    "billing-api listens on port 8443 in the prod cluster.",
    "search-api listens on port 9000 in the prod cluster.",
    "ledger-worker listens on port 7070 in the prod cluster.",
    "notify-hub listens on port 6060 in the prod cluster.",
]


def _ranking(stub, scope, task):
    return {m.content: (m.ranking.relevance, i) for i, m in enumerate(activate(stub, scope, task=task).memories)}


def test_meaning_never_lifts_a_claim_about_another_named_thing(server, lexical_server):
    """Same-template claims about other services are near neighbours in meaning; when the cue names
    the service, they keep only their lexical evidence, and the claim naming it ranks first."""
    cue = "Which port does billing-api listen on?"
    rankings = {}
    for name, srv in (("hybrid", server), ("lexical", lexical_server)):
        scope = new_scope()
        for claim in PORT_CLAIMS:  # one claim per call, same order: identical scope statistics
            a = activate(srv.stub, scope, task="seed")
            remember(srv.stub, a.session_id, scope, claim)
            assess_all(srv.stub, a)
            commit(srv.stub, a.session_id)
        # Each commit queues consolidation, which may add a lesson to the scope: drain it, or the
        # two servers' statistics differ by whatever one of them has consolidated so far.
        srv.consolidate()
        rankings[name] = _ranking(srv.stub, scope, cue)
    hybrid, lexical = rankings["hybrid"], rankings["lexical"]
    named = PORT_CLAIMS[0]
    assert hybrid[named][1] == 0, hybrid
    assert hybrid[named][0] > lexical[named][0]  # the named claim does get semantic evidence
    neighbours = {c: rel for c, (rel, _) in hybrid.items() if c in PORT_CLAIMS[1:]}
    assert neighbours == {c: rel for c, (rel, _) in lexical.items() if c in PORT_CLAIMS[1:]}


def test_a_cue_without_names_keeps_the_semantic_evidence(server):
    scope = new_scope()
    _store(server.stub, scope)
    ranking = _ranking(server.stub, scope, PARAPHRASE)
    assert ranking[CLAIM][1] == 0 and ranking[CLAIM][0] >= 0.35  # admitted on meaning alone


def test_punctuation_moves_no_vector_and_no_relevance(server):
    # The encoder averages a text's word tokens only: a memory stored with its full stop and one
    # stored without rank alike, for a paraphrase asked with or without its question marks, though
    # the paraphrase shares no word with either and is found on meaning alone.
    punctuated, bare = new_scope(), new_scope()
    claim_punctuated = _store(server.stub, punctuated)[0]
    claim_bare = _store(server.stub, bare, (CLAIM.rstrip("."), *DISTRACTORS))[0]
    relevance = set()
    for scope, claim in ((punctuated, claim_punctuated), (bare, claim_bare)):
        for task in (PARAPHRASE, PARAPHRASE.rstrip("?"), PARAPHRASE + "?!", "... " + PARAPHRASE.replace(" ", ", ")):
            found = {m.memory_id: m.ranking.relevance for m in activate(server.stub, scope, task=task).memories}
            assert claim in found, (scope, task, found)
            relevance.add(found[claim])
    assert len(relevance) == 1 and relevance.pop() >= 0.35  # the admission threshold, on meaning alone
    first = [_scope_vectors(server, scope)[0] for scope in (punctuated, bare)]  # each scope's claim
    assert bytes(first[0].vector) == bytes(first[1].vector)


def test_meaning_counts_in_full_only_where_no_memory_matches_the_cues_words(server):
    # The same paraphrased memory, asked the same question, in two scopes: in the second, another
    # memory holds the question's words, so meaning only corroborates there (half strength) and
    # the paraphrase ranks below the memory holding the words.
    words = "Our billing system stores its transactions in the data warehouse."
    alone, beside = new_scope(), new_scope()
    claim_alone = _store(server.stub, alone)[0]
    claim_beside, _, _, worded = _store(server.stub, beside, (CLAIM, *DISTRACTORS, words))
    found_alone = {m.memory_id: m.ranking.relevance for m in activate(server.stub, alone, task=PARAPHRASE).memories}
    found_beside = activate(server.stub, beside, task=PARAPHRASE).memories
    relevance_beside = {m.memory_id: m.ranking.relevance for m in found_beside}
    assert claim_alone in found_alone
    assert found_beside[0].memory_id == worded
    assert relevance_beside.get(claim_beside, 0.0) < found_alone[claim_alone]


def test_an_unlike_memory_in_a_graph_served_scope_is_found_though_the_graph_never_returns_it(tmp_path):
    """In a scope served by the dense graph, the memory least like the thousands around it (which a
    paraphrase sharing no word with it means) is still returned over gRPC when the graph never
    finds it: every search also scans the scope's loose vectors exactly (slowave.dense_index). At
    100k memories usearch's graph behaved so; here a stand-in graph does, at a lowered threshold."""
    from tests.unit.test_dense_index import UNLIKE, _BulkOnlyGraph, _templated

    srv = start_test_server(tmp_path, semantic="static")
    try:
        index = srv.running.ctx.semantic.index
        # 801 claims, 61 distinct vectors (claims differing only in numbers share one): a graph serves
        # from 50 distinct vectors on; with fewer every search would scan them all exactly.
        index.ann_min_rows, index.background = 50, False
        texts, _ = _templated(StaticEncoder(), 800)
        claim, cue = UNLIKE[0]
        texts.insert(400, claim)
        scope = new_scope()
        unlike_id = _remember_facts(srv.stub, scope, texts)[400]

        first = activate(srv.stub, scope, task=cue)  # the graph and the loose vectors are built here
        assert unlike_id in [m.memory_id for m in first.memories]
        entry = index._scopes[("local", scope)]
        assert entry.ann is not None and 400 in entry.loose_positions.tolist()
        entry.ann = _BulkOnlyGraph(entry.matrix, [p for p in range(entry.size) if p != 400])

        found = activate(srv.stub, scope, task=cue)
        assert unlike_id in [m.memory_id for m in found.memories]
        assert "(m32)+loose(0.05)" in found.retrieval_policy_version

        loose = entry.loose_positions, entry.loose_vectors
        entry.loose_positions, entry.loose_vectors = loose[0][:0], loose[1][:0]  # the graph alone
        assert unlike_id not in [m.memory_id for m in activate(srv.stub, scope, task=cue).memories]
        entry.loose_positions, entry.loose_vectors = loose
    finally:
        srv.stop()


def test_a_scope_of_few_distinct_vectors_is_searched_exactly_over_grpc_whatever_the_graph_returns(tmp_path):
    """A scope past the graph's row threshold whose claims differ mostly in their numbers has few
    distinct vectors, and a search compares the cue with each of them (slowave.dense_index): the
    unlike memory a paraphrase means is returned over gRPC though the graph never returns it and
    no loose vector is scanned."""
    from tests.unit.test_dense_index import UNLIKE, _BulkOnlyGraph, _templated

    srv = start_test_server(tmp_path, semantic="static")
    try:
        index = srv.running.ctx.semantic.index
        index.ann_min_rows, index.background = 500, False  # 801 rows, 61 distinct vectors
        texts, _ = _templated(StaticEncoder(), 800)
        claim, cue = UNLIKE[0]
        texts.insert(400, claim)
        scope = new_scope()
        unlike_id = _remember_facts(srv.stub, scope, texts)[400]

        activate(srv.stub, scope, task=cue)  # reads the vectors, builds the graph
        entry = index._scopes[("local", scope)]
        assert entry.ann is not None and entry.nodes[0] == 61
        entry.ann = _BulkOnlyGraph(entry.matrix, [p for p in range(entry.size) if p != 400])
        entry.loose_positions, entry.loose_vectors = entry.loose_positions[:0], entry.loose_vectors[:0]
        assert unlike_id in [m.memory_id for m in activate(srv.stub, scope, task=cue).memories]
    finally:
        srv.stop()


def _memory_ids(response) -> list[str]:
    return [m.memory_id for m in response.memories]


def test_a_restarted_server_loads_the_saved_dense_graph_and_erasure_deletes_it(tmp_path, graph_adds):
    """A graph-served scope's dense graph is saved (SLOWAVE_GRAPH_DIR; beside a SQLite file by
    default), so the next start loads it instead of building it: the same cue gets the same page
    over gRPC, and no row is added to a graph. Erasing a memory of the scope deletes the file."""
    import os
    import subprocess
    import sys

    from tests.unit.test_dense_index import UNLIKE, _templated

    graphs = tmp_path / "graphs"
    texts, _ = _templated(StaticEncoder(), 800)
    claim, cue = UNLIKE[0]
    texts.insert(400, claim)
    scope = new_scope()

    first = start_test_server(tmp_path / "first", semantic="static", graph_dir=str(graphs))
    url = first.database_url
    try:
        index = first.running.ctx.semantic.index
        index.ann_min_rows, index.background = 500, False
        ids = _remember_facts(first.stub, scope, texts)
        before = activate(first.stub, scope, task=cue)  # the graph is built (and saved) here
        assert ids[400] in _memory_ids(before)
        assert len(list(graphs.rglob("*.graph"))) == 1
    finally:
        first.stop()
    # One node per distinct vector: the templated claims differ only in their numbers.
    nodes = len(np.unique(StaticEncoder().encode(texts), axis=0))
    assert nodes < len(texts) and graph_adds == [nodes], "the first server built the graph"

    graph_adds.clear()
    again = start_test_server(tmp_path / "again", semantic="static", graph_dir=str(graphs), database_url=url)
    try:
        index = again.running.ctx.semantic.index
        index.ann_min_rows, index.background = 500, False
        after = activate(again.stub, scope, task=cue)
        assert _memory_ids(after) == _memory_ids(before)
        assert index._scopes[("local", scope)].ann_rows == len(texts)
        assert graph_adds == [], "the saved graph was loaded, not built"

        env = {**os.environ, "SLOWAVE_DATABASE_URL": url, "SLOWAVE_GRAPH_DIR": str(graphs)}
        erased = subprocess.run(
            [sys.executable, "-m", "slowave.admin", "erase", "--tenant", "local", "--memory", ids[3], "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert erased.returncode == 0, erased.stderr
        assert '"graph_files_deleted": 1' in erased.stdout
        assert not list(graphs.rglob("*.graph"))
    finally:
        again.stop()


def test_memories_stored_while_the_channel_was_off_get_vectors_when_a_server_with_it_starts(tmp_path):
    """A store written with SLOWAVE_SEMANTIC=off (or under another embedding model): the next server
    with the channel embeds those memories before it serves (service.vector_backfill), and the
    paraphrase that only the channel finds comes back over gRPC."""
    scope = new_scope()
    off = start_test_server(tmp_path / "off", semantic="off")
    url = off.database_url
    try:
        claim_id = _store(off.stub, scope)[0]
        assert claim_id not in _memory_ids(activate(off.stub, scope, task=PARAPHRASE))
    finally:
        off.stop()
    on = start_test_server(tmp_path / "on", semantic="static", database_url=url)
    try:
        # (plus the session's lesson, if the first server consolidated it before it stopped)
        assert on.running.backfilled >= 1 + len(DISTRACTORS)
        assert _memory_ids(activate(on.stub, scope, task=PARAPHRASE))[:1] == [claim_id]
    finally:
        on.stop()


def test_slowave_admin_embed_stores_the_missing_vectors_and_prunes_an_older_models(tmp_path):
    import os
    import subprocess
    import sys

    scope = new_scope()
    off = start_test_server(tmp_path / "off", semantic="off")
    url = off.database_url
    try:
        claim_id = _store(off.stub, scope)[0]
    finally:
        off.stop()
    env = {**os.environ, "SLOWAVE_DATABASE_URL": url, "SLOWAVE_SEMANTIC": "static"}
    command = [sys.executable, "-m", "slowave.admin", "embed", "--batch", "2"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    assert int(first.stdout.split("embedded:")[1]) >= 1 + len(DISTRACTORS)
    again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert "embedded: 0" in again.stdout and "pruned" not in again.stdout

    # An older model's vectors stay until the operator prunes them; the current ones are kept.
    db = Database(url)
    try:
        with db.transaction() as uow:
            current = uow.table_counts()["memory_vectors"]
            old = [
                dict(number=n, tenant=t, scope=s, encoder_id="older-model:v0", vector=b"\0" * 16)
                for n, t, s in uow._ex.connection.execute(text("SELECT number, tenant, scope FROM memories")).all()
            ]
            uow.vectors.insert_many(old)
        pruned = subprocess.run([*command, "--prune"], env=env, capture_output=True, text=True, timeout=300)
        assert pruned.returncode == 0, pruned.stderr
        assert "embedded: 0" in pruned.stdout and f"pruned: {len(old)}" in pruned.stdout
        with db.transaction(read_only=True) as view:
            assert view.table_counts()["memory_vectors"] == current
    finally:
        db.dispose()
    on = start_test_server(tmp_path / "on", semantic="static", database_url=url)
    try:
        assert on.running.backfilled == 0
        assert _memory_ids(activate(on.stub, scope, task=PARAPHRASE))[:1] == [claim_id]
    finally:
        on.stop()
