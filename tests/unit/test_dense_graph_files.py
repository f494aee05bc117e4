"""Saved dense graphs (slowave.dense_graph_files): loaded instead of built when they match the
scope's rows exactly, deleted when they do not, never saved over rows the database no longer holds."""

from __future__ import annotations

import numpy as np
import pytest

from slowave.dense_graph_files import GraphFiles
from slowave.dense_index import ANN_CONNECTIVITY, VectorIndex
from tests.unit.test_dense_index import FakeRepo, _unit

ENCODER = "test-encoder:v1"


def _index(files: GraphFiles | None) -> VectorIndex:
    index = VectorIndex(ENCODER, ann_min_rows=500, background=False)
    index.files = files
    return index


def _store(n: int, seed: int = 0) -> tuple[FakeRepo, np.ndarray]:
    repo = FakeRepo()
    vectors = _unit(np.random.default_rng(seed), n)
    repo.add(vectors, 1)
    return repo, vectors


def _search(index: VectorIndex, repo: FakeRepo, queries: np.ndarray, k: int = 10) -> list[list[int]]:
    return [sorted(index.similarities(repo, "t", "s", q, [], k)) for q in queries]


def test_a_saved_graph_is_loaded_at_the_next_start_instead_of_built(tmp_path, graph_adds):
    repo, vectors = _store(2000)
    queries = _unit(np.random.default_rng(1), 20)
    first = _index(GraphFiles(tmp_path))
    before = _search(first, repo, queries)
    assert graph_adds == [2000], "the first start builds the graph"
    assert list(tmp_path.rglob("*.graph")), "and saves it"

    graph_adds.clear()
    again = _index(GraphFiles(tmp_path))
    assert _search(again, repo, queries) == before
    assert graph_adds == [], "the next start loads it: nothing is added"
    entry = again._scopes[("t", "s")]
    assert entry.ann_rows == 2000 and entry.saved_rows == 2000

    # Rows stored since the save are added to the loaded graph, and found.
    newer = _unit(np.random.default_rng(2), 40)
    repo.add(newer, 2001)
    got = again.similarities(repo, "t", "s", newer[5], [], 5)
    assert sum(graph_adds) == 40
    assert max(got, key=got.get) == 2006 and got[2006] == pytest.approx(1.0, abs=1e-5)


@pytest.mark.parametrize("change", ["vector", "erased row", "torn file", "other parameters"])
def test_a_saved_graph_that_does_not_match_the_scope_is_deleted_and_built_anew(tmp_path, graph_adds, change):
    repo, vectors = _store(1500)
    files = GraphFiles(tmp_path)
    _search(_index(files), repo, vectors[:1])
    (path,) = tmp_path.rglob("*.graph")
    saved = path.read_bytes()

    if change == "vector":  # a backup of another store restored at the same path: same numbers
        repo.rows[700] = repo.rows[700]._replace(vector=_unit(np.random.default_rng(9), 1)[0].tobytes())
    elif change == "erased row":
        del repo.rows[700]
    elif change == "torn file":
        path.write_bytes(saved[: len(saved) // 2])
    else:
        built = f'"connectivity": {ANN_CONNECTIVITY}'.encode()
        assert built in saved
        path.write_bytes(saved.replace(built, f'"connectivity": {ANN_CONNECTIVITY + 1}'.encode(), 1))

    found = path.read_bytes()
    graph_adds.clear()
    rebuilt = _index(files)
    query = np.frombuffer(repo.rows[1000].vector, dtype=np.float32)
    got = rebuilt.similarities(repo, "t", "s", query, [], 5)
    assert graph_adds == [len(repo.rows)], "the graph is built anew"
    assert repo.rows[1000].number in got
    assert path.read_bytes() != found, "and saved for the rows it now covers"


def test_no_graph_is_saved_over_rows_the_database_no_longer_holds(tmp_path):
    repo, vectors = _store(1000)
    held = {"count": 999}  # an erasure removed one of the rows this process read
    files = GraphFiles(tmp_path, count_vectors=lambda tenant, scope, encoder, upto: held["count"])
    _search(_index(files), repo, vectors[:1])
    assert not list(tmp_path.rglob("*.graph"))

    held["count"] = 1000
    _search(_index(files), repo, vectors[:1])
    assert len(list(tmp_path.rglob("*.graph"))) == 1


def test_a_graph_is_saved_again_once_it_has_grown_by_a_tenth(tmp_path):
    repo, vectors = _store(1000)
    files = GraphFiles(tmp_path)
    index = _index(files)
    _search(index, repo, vectors[:1])
    (path,) = tmp_path.rglob("*.graph")
    first = path.read_bytes()
    repo.add(_unit(np.random.default_rng(3), 50), 1001)
    _search(index, repo, vectors[:1])
    assert path.read_bytes() == first  # 1,050 rows: not yet
    repo.add(_unit(np.random.default_rng(4), 60), 1051)
    _search(index, repo, vectors[:1])
    assert path.read_bytes() != first
    assert index._scopes[("t", "s")].saved_rows == 1110


def test_erasure_deletes_the_saved_graphs_of_a_scope_or_of_a_whole_tenant(tmp_path):
    repo, vectors = _store(600)
    files = GraphFiles(tmp_path)
    for tenant, scope in (("t", "s"), ("t", "other"), ("u", "s")):
        index = _index(files)
        index.similarities(repo, tenant, scope, vectors[0], [], 3)
    assert len(list(tmp_path.rglob("*.graph"))) == 3
    assert files.erase("t", "s") == 1
    assert not files.path("t", "s", ENCODER).exists() and files.path("t", "other", ENCODER).exists()
    assert files.erase("u") == 1
    assert [p for p in tmp_path.rglob("*.graph")] == [files.path("t", "other", ENCODER)]
    assert "s" not in {p.stem for p in tmp_path.rglob("*")}, "file names hold no scope text"


def test_graphs_are_saved_beside_a_sqlite_file_by_default_nowhere_on_postgresql_unless_configured():
    from pathlib import Path

    from slowave.config import Settings

    assert Settings().graph_directory("/srv/data/slowave.db") == Path("/srv/data/slowave.db-graphs")
    assert Settings().graph_directory(None) is None  # PostgreSQL
    configured = Settings.from_env({"SLOWAVE_GRAPH_DIR": "/var/cache/slowave"})
    assert configured.graph_directory(None) == Path("/var/cache/slowave")
    assert Settings.from_env({"SLOWAVE_GRAPH_DIR": "off"}).graph_directory("/srv/data/slowave.db") is None


def test_saving_a_graph_deletes_the_scopes_graphs_of_other_encoders(tmp_path):
    repo, vectors = _store(1000)
    files = GraphFiles(tmp_path)
    old = VectorIndex("older-encoder:v1", ann_min_rows=500, background=False)
    old.files = files
    old.similarities(repo, "t", "s", vectors[0], [], 5)
    other_scope = VectorIndex("older-encoder:v1", ann_min_rows=500, background=False)
    other_scope.files = files
    other_scope.similarities(repo, "t", "s2", vectors[0], [], 5)
    assert len(list(tmp_path.rglob("*.graph"))) == 2

    _search(_index(files), repo, vectors[:1])  # the new model's graph of scope s is saved ...
    names = sorted(p.name for p in tmp_path.rglob("*.graph"))
    assert files.path("t", "s", ENCODER).name in names, "... and kept"
    assert files.path("t", "s", "older-encoder:v1").name not in names, "the old model's graph of s is gone"
    assert files.path("t", "s2", "older-encoder:v1").name in names, "another scope's graph stays"


def _recall(found: list[list[int]], repo: FakeRepo, queries: np.ndarray, k: int = 10) -> float:
    numbers = np.array([r.number for r in repo.rows])
    matrix = np.vstack([np.frombuffer(r.vector, dtype=np.float32) for r in repo.rows])
    exact = [set(numbers[np.argsort(-(matrix @ q))[:k]].tolist()) for q in queries]
    return float(np.mean([len(set(f) & e) / k for f, e in zip(found, exact)]))


def _follower(files: GraphFiles) -> VectorIndex:
    index = _index(files)
    index.follower = True
    return index


def test_a_following_process_takes_the_saved_graph_instead_of_adding_rows(tmp_path, graph_adds, monkeypatch):
    """Every server process but one takes the graph that one extends and saves (api.app): a
    following process adds no row to its graph while newer saved graphs come, and its searches
    scan exactly the rows its graph lacks meanwhile."""
    monkeypatch.setattr("slowave.dense_index.FOLLOWER_CHECK_SECONDS", 0.0)
    repo, _ = _store(2000)
    files = GraphFiles(tmp_path)
    leader, follower = _index(files), _follower(files)
    queries = _unit(np.random.default_rng(1), 20)
    _search(leader, repo, queries)  # builds and saves
    graph_adds.clear()
    assert _search(follower, repo, queries) == _search(leader, repo, queries)
    assert graph_adds == [], "the follower loads the saved graph"

    newer = _unit(np.random.default_rng(2), 300)  # 15 % more rows: below FOLLOWER_TAIL_SHARE
    repo.add(newer, 2001)
    got = follower.similarities(repo, "t", "s", newer[7], [], 5)
    assert max(got, key=got.get) == 2008 and got[2008] == pytest.approx(1.0, abs=1e-5)
    assert graph_adds == [], "found by the exact scan of the rows the graph lacks, none added"
    entry = follower._scopes[("t", "s")]
    assert entry.ann_rows == 2000

    leader.similarities(repo, "t", "s", newer[7], [], 5)  # extends its graph, saved once 1.1× as large
    saved = files.rows_saved("t", "s", ENCODER)
    assert sum(graph_adds) == 300 and 2200 <= saved <= 2300
    graph_adds.clear()
    taken = _search(follower, repo, queries)
    assert graph_adds == [] and entry.ann_rows == saved and entry.saved_rows == saved
    # As good as the graph it took: the same recall of the exact nearest (the loose rows may differ
    # by when each process last measured the scope's fit).
    assert _recall(taken, repo, queries) >= 0.85
    assert _recall(taken, repo, queries) == pytest.approx(
        _recall(_search(leader, repo, queries), repo, queries), abs=0.05
    )
    assert files.rows_saved("t", "s", ENCODER) == saved, "a follower never deletes the saved graph"


def test_a_following_process_extends_its_graph_itself_when_no_newer_graph_comes(tmp_path, graph_adds, monkeypatch):
    monkeypatch.setattr("slowave.dense_index.FOLLOWER_CHECK_SECONDS", 0.0)
    repo, _ = _store(2000)
    files = GraphFiles(tmp_path)
    _search(_index(files), repo, _unit(np.random.default_rng(1), 1))  # saved at 2,000 rows
    follower = _follower(files)
    follower.similarities(repo, "t", "s", _unit(np.random.default_rng(3), 1)[0], [], 5)
    graph_adds.clear()
    newer = _unit(np.random.default_rng(2), 600)  # 30 % more: past FOLLOWER_TAIL_SHARE, no newer file
    repo.add(newer, 2001)
    got = follower.similarities(repo, "t", "s", newer[100], [], 5)
    assert max(got, key=got.get) == 2101
    assert sum(graph_adds) == 600 and follower._scopes[("t", "s")].ann_rows == 2600


def test_the_warm_up_waits_for_a_saved_graph_to_load_and_never_for_one_built_from_nothing(tmp_path, graph_adds):
    repo, vectors = _store(2000)
    _search(_index(GraphFiles(tmp_path)), repo, vectors[:1])  # built and saved by a first start

    restarted = VectorIndex(ENCODER, ann_min_rows=500, background=True)
    restarted.files = GraphFiles(tmp_path)
    assert restarted.warm(repo, "t", "s") == 2000
    assert restarted.wait_for_saved_graph("t", "s", timeout=60)
    entry = restarted._scopes[("t", "s")]
    assert entry.ann is not None and entry.ann_rows == 2000

    # No saved graph: the build goes on in the background, and nothing waits for it.
    unsaved = VectorIndex(ENCODER, ann_min_rows=500, background=True)
    unsaved.files = GraphFiles(tmp_path / "elsewhere")
    assert unsaved.warm(repo, "t", "s") == 2000
    waits: list[float | None] = []
    entry = unsaved._scopes[("t", "s")]
    ready = entry.graph_ready

    class Watched:
        def wait(self, timeout: float | None = None) -> bool:
            waits.append(timeout)
            return ready.wait(timeout)

        def set(self) -> None:
            ready.set()

    entry.graph_ready = Watched()  # type: ignore[assignment]
    assert not unsaved.wait_for_saved_graph("t", "s", timeout=60)
    assert waits == [], "no saved file: nothing to wait for"
    assert ready.wait(60)  # (the background build ends before the test does)


def test_a_following_process_adding_rows_itself_takes_a_graph_saved_meanwhile(tmp_path, monkeypatch):
    """A following process that fell back to extending its own graph (no newer saved graph had
    come) stops adding rows once one is saved, rather than adding every row of the tail itself."""
    import usearch.index

    monkeypatch.setattr("slowave.dense_index.FOLLOWER_CHECK_SECONDS", 0.0)
    repo, _ = _store(2000)
    files = GraphFiles(tmp_path)
    leader = _index(files)
    _search(leader, repo, _unit(np.random.default_rng(1), 1))  # saved at 2,000 rows
    follower = _follower(files)
    follower.similarities(repo, "t", "s", _unit(np.random.default_rng(3), 1)[0], [], 5)
    entry = follower._scopes[("t", "s")]
    newer = _unit(np.random.default_rng(2), 600)  # 30 % more: past FOLLOWER_TAIL_SHARE, no newer file yet
    repo.add(newer, 2001)

    added_by_follower: list[int] = []
    saved_meanwhile = []

    class Hooked(usearch.index.Index):
        def add(self, keys, vectors, **kw):
            if self is entry.ann:
                added_by_follower.append(len(keys))
                if not saved_meanwhile:  # the leader extends and saves while the follower adds
                    saved_meanwhile.append(True)
                    leader.similarities(repo, "t", "s", newer[0], [], 5)
            return super().add(keys, vectors, **kw)

    entry.ann.__class__ = Hooked  # the follower's loaded graph
    got = follower.similarities(repo, "t", "s", newer[100], [], 5)
    assert max(got, key=got.get) == 2101
    saved = files.rows_saved("t", "s", ENCODER)
    assert saved > 2000 + sum(added_by_follower), "the leader saved its extended graph"
    assert entry.ann_rows == saved and entry.saved_rows == saved, "the follower took it"
    assert sum(added_by_follower) < 100, f"added {sum(added_by_follower)} of the 600 rows itself"


def test_a_saved_graph_with_one_node_per_distinct_vector_is_loaded_with_its_twins(tmp_path, graph_adds):
    # 1,500 rows, 500 of them copies of one vector: the graph saved has 1,001 nodes, and the next
    # start loads it (not built anew) and finds the copies through their node.
    distinct = _unit(np.random.default_rng(3), 1001)
    vectors = np.concatenate([distinct, np.repeat(distinct[:1], 499, axis=0)])
    repo = FakeRepo()
    repo.add(vectors, 1)
    before = _search(_index(GraphFiles(tmp_path)), repo, vectors[:1], k=16)
    assert graph_adds == [1001]

    graph_adds.clear()
    again = _index(GraphFiles(tmp_path))
    got = again.similarities(repo, "t", "s", vectors[0], [], 16)
    assert graph_adds == [], "loaded, not built"
    assert len(again._scopes[("t", "s")].ann) == 1001
    copies = {1, *range(1002, 1501)}
    assert set(got) <= copies and len(got) == 16 and sorted(got) == before[0]


def test_a_following_process_registers_new_rows_itself_in_a_scope_of_few_distinct_vectors(
    tmp_path, graph_adds, monkeypatch
):
    """A scope with fewer distinct vectors than a graph is searched from is scanned node by node: a
    following process then catches up the rows stored since the last save itself (a hash each, an
    add for a new vector only) instead of scanning them row by row in every search until the next
    save, which may never come once the writes stop; only the process that saves graphs saves."""
    monkeypatch.setattr("slowave.dense_index.FOLLOWER_CHECK_SECONDS", 0.0)
    distinct = _unit(np.random.default_rng(0), 50)
    rows = distinct[np.arange(2000) % 50]  # 2,000 rows, 50 vectors: twins of the first 50
    repo = FakeRepo()
    repo.add(rows, 1)
    files = GraphFiles(tmp_path)
    _search(_index(files), repo, distinct[:1])  # the leader builds and saves at 2,000 rows
    follower = _follower(files)
    follower.similarities(repo, "t", "s", distinct[0], [], 5)
    entry = follower._scopes[("t", "s")]
    assert entry.ann_rows == 2000 and entry.nodes[0] == 50
    graph_adds.clear()

    fresh = _unit(np.random.default_rng(9), 1)
    repo.add(np.vstack([distinct[np.arange(100) % 50], fresh]), 2001)  # 5 % more rows, one new vector
    got = follower.similarities(repo, "t", "s", fresh[0], [], 5)
    assert max(got, key=got.get) == 2101
    assert entry.ann_rows == entry.size == 2101, "caught up by the follower itself"
    assert sum(graph_adds) == 1 and entry.nodes[0] == 51, "the new vector is the only node added"
    assert files.rows_saved("t", "s", ENCODER) == 2000, "the follower saved nothing"
