"""Dense candidates at 100k memories in one scope: per-query cost of each way to find them.

Vectors are "random but realistic": embeddings, by the shipped static model, of random sentences
of 6–24 vocabulary words (so they share the anisotropy of real ones); queries likewise. Measured,
single-threaded, per query (k = 100, the service's semantic_candidates):

* numpy float32 exact scan (matrix @ query + argpartition) — what VectorIndex did before;
* float16 / int8 storage scanned by numpy, and by faiss' SIMD scalar-quantiser scan (if installed);
* usearch's exact brute force over float16;
* HNSW graphs (usearch int8 / float16, faiss HNSW+SQ8 if installed): build time, recall@100
  against the exact top 100, latency per expansion;
* slowave.dense_index.VectorIndex itself (graph candidates and loose rows re-scored exactly), with
  the cost of its first query (reading the rows, building the graph and the fit) and of catching up
  after new memories;
* unlike claims planted among the vectors (paraphrase pairs whose claim is the cue's exact nearest):
  how many the graph alone returns, and how many VectorIndex returns;
* an agent store (bench/perf.py's scope: the retrieval corpus's memories among templated claims)
  asked its task cues: how often the cue's exact nearest is among VectorIndex's 16 candidates,
  with the policy's graph links and loose share, with 1 % loose, and as before 2026-12-05.

    .venv/bin/python bench/dense.py [--n 100000]
"""

from __future__ import annotations

import argparse
import os
import time
from collections import namedtuple

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from slowave.dense_index import VectorIndex
from slowave.embedding import StaticEncoder

K = 100
TIE = 1e-5  # float32 products of one vector with equal rows may differ in the last bits


def sentences(table: np.ndarray, vocab: np.ndarray, n: int, rng: np.random.Generator) -> np.ndarray:
    lens = rng.integers(6, 24, n)
    ids = rng.choice(vocab, size=int(lens.sum()))
    offsets = np.concatenate([[0], np.cumsum(lens)[:-1]])
    m = np.add.reduceat(table[ids], offsets, axis=0)
    return (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)


def per_query(fn, queries, reps=200) -> float:
    fn(queries[0])
    t = time.perf_counter()
    for i in range(reps):
        fn(queries[i % len(queries)])
    return (time.perf_counter() - t) / reps * 1e3


class Repo:
    """The two vector reads VectorIndex makes of a unit of work, over in-memory rows."""

    Row = namedtuple("Row", "number vector")

    def __init__(self, x: np.ndarray) -> None:
        self.rows = [self.Row(i + 1, v.tobytes()) for i, v in enumerate(x)]
        self.vectors = self

    def latest_number(self, *_):
        return self.rows[-1].number

    def after(self, _t, _s, _e, after):
        return self.rows[after:]  # numbers are 1..n


PLANTED = [
    (
        "Never commit credentials into git: secrets live only inside vault storage.",
        "Is it okay to put a password in the repository?",
    ),
    ("Priya prefers written design reviews over meetings.", "How does Priya like to give feedback on architecture?"),
    (
        "Backups are encrypted with age and uploaded to cold storage nightly.",
        "How do we protect our archived snapshots?",
    ),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    args = parser.parse_args()
    enc = StaticEncoder()
    table = enc._table
    vocab = np.array(
        [i for t, i in enc._tokenizer.get_vocab().items() if t.isalpha() and not t.startswith("##") and i > 1000]
    )
    rng = np.random.default_rng(0)
    x, queries = sentences(table, vocab, args.n, rng), sentences(table, vocab, 200, rng)
    planted_at = np.sort(rng.choice(args.n, len(PLANTED), replace=False))
    x[planted_at] = enc.encode([claim for claim, _ in PLANTED])
    planted_cues = enc.encode([cue for _, cue in PLANTED])
    n, dim = x.shape
    cues = [
        "Which database engine does our billing system use to store transactions?",
        "What should I verify first if the courier rate lookup treats valid credentials as expired?",
        "Which port does billing-api listen on?",
    ]
    times = []
    for i in range(3000):
        t = time.perf_counter()
        enc.encode([cues[i % 3]])
        times.append(time.perf_counter() - t)
    print(
        f"query embedding ({enc.encoder_id}): p50 {np.median(times) * 1e3:.3f} ms, "
        f"p99 {np.percentile(times, 99) * 1e3:.3f} ms"
    )
    print(f"{n:,} vectors × {dim} dims, k = {K}, one thread\n")
    exact = [set(np.argpartition(-(x @ q), K - 1)[:K].tolist()) for q in queries]

    def recall(search) -> float:
        return float(np.mean([len(set(np.asarray(search(q)).tolist()) & e) / K for q, e in zip(queries, exact)]))

    rows = []
    rows.append(
        ("numpy float32 exact scan", per_query(lambda q: np.argpartition(-(x @ q), K - 1)[:K], queries), 1.0, "-")
    )
    x16 = x.astype(np.float16)
    rows.append(("numpy float16 scan", per_query(lambda q: x16 @ q.astype(np.float16), queries, 10), 1.0, "-"))
    x8 = np.rint(x * 127).astype(np.int8)
    rows.append(
        (
            "numpy int8 scan (int32 sums)",
            per_query(lambda q: x8 @ np.rint(q * 127).astype(np.int8), queries, 10),
            recall(lambda q: np.argpartition(-(x8 @ np.rint(q * 127).astype(np.int8)).astype(np.int32), K - 1)[:K]),
            "-",
        )
    )
    from usearch.index import Index, MetricKind
    from usearch.index import search as brute

    rows.append(
        (
            "usearch exact brute force, float16",
            per_query(
                lambda q: brute(x16, q.astype(np.float16), K, MetricKind.IP, exact=True, threads=1).keys, queries
            ),
            1.0,
            "-",
        )
    )
    try:
        import faiss

        faiss.omp_set_num_threads(1)
        for name, qt in (
            ("faiss scalar-quantiser scan, int8", faiss.ScalarQuantizer.QT_8bit),
            ("faiss scalar-quantiser scan, float16", faiss.ScalarQuantizer.QT_fp16),
        ):
            sq = faiss.IndexScalarQuantizer(dim, qt, faiss.METRIC_INNER_PRODUCT)
            sq.train(x)
            sq.add(x)
            rows.append(
                (
                    name,
                    per_query(lambda q: sq.search(q[None], K)[1], queries),
                    recall(lambda q: sq.search(q[None], K)[1][0]),
                    "-",
                )
            )
        flat = faiss.IndexFlatIP(dim)
        flat.add(x)
        rows.append(
            ("faiss IndexFlatIP (float32 exact)", per_query(lambda q: flat.search(q[None], K)[1], queries), 1.0, "-")
        )
        t = time.perf_counter()
        hn = faiss.IndexHNSWSQ(dim, faiss.ScalarQuantizer.QT_8bit, 16, faiss.METRIC_INNER_PRODUCT)
        hn.hnsw.efConstruction = 128
        hn.train(x)
        hn.add(x)
        build = f"{time.perf_counter() - t:.1f} s"
        for ef in (128, 256):
            hn.hnsw.efSearch = ef
            rows.append(
                (
                    f"faiss HNSW+SQ8 M=16 ef={ef}",
                    per_query(lambda q: hn.search(q[None], K)[1], queries),
                    recall(lambda q: hn.search(q[None], K)[1][0]),
                    build,
                )
            )
    except ImportError:
        print("(faiss-cpu not installed: its rows are skipped)\n")
    for dt in ("i8", "f16"):
        t = time.perf_counter()
        g = Index(ndim=dim, metric="ip", dtype=dt, connectivity=16, expansion_add=128)
        g.add(np.arange(n, dtype=np.uint64), x, threads=1)
        build = f"{time.perf_counter() - t:.1f} s"
        for ef in (128, 256):
            g.expansion_search = ef
            rows.append(
                (
                    f"usearch HNSW {dt} M=16 ef={ef}",
                    per_query(lambda q: g.search(q, K, threads=1).keys, queries),
                    recall(lambda q: g.search(q, K).keys),
                    build,
                )
            )

    repo = Repo(x)
    index = VectorIndex("bench", background=False)
    t = time.perf_counter()
    index.similarities(repo, "t", "s", queries[0], [], K)
    first = time.perf_counter() - t
    ms = per_query(lambda q: index.similarities(repo, "t", "s", q, [1, 2, 3], K), queries)
    rec = recall(lambda q: np.array(list(index.similarities(repo, "t", "s", q, [], K))) - 1)
    rows.append(("slowave VectorIndex (HNSW i8 + loose rows, exact re-score)", ms, rec, f"{first:.1f} s first query"))
    nearest = [int(np.argmax(x @ c)) for c in planted_cues]
    graph = index._scopes[("t", "s")].ann
    by_graph = sum(
        int(p) in set(np.asarray(graph.search(c, K).keys).tolist()) for p, c in zip(planted_at, planted_cues)
    )
    by_index = sum(int(p) + 1 in index.similarities(repo, "t", "s", c, [], K) for p, c in zip(planted_at, planted_cues))
    more = sentences(table, vocab, 100, rng)
    repo.rows += [Repo.Row(n + 1 + i, v.tobytes()) for i, v in enumerate(more)]
    t = time.perf_counter()
    index.similarities(repo, "t", "s", queries[0], [], K)
    catch_up = (time.perf_counter() - t) * 1e3

    print("| method | ms / query | recall@100 | build |")
    print("|---|---:|---:|---|")
    for name, ms, rec, build in rows:
        print(f"| {name} | {ms:.3f} | {rec:.3f} | {build} |")
    print(
        f"\nVectorIndex: first query at {n:,} (read + build graph) {first:.1f} s; "
        f"a query after 100 new memories {catch_up:.1f} ms"
    )
    print(
        f"Planted unlike claims: {sum(int(p) == m for p, m in zip(planted_at, nearest))} of {len(PLANTED)} are their "
        f"cue's exact nearest; the graph alone returns {by_graph}, VectorIndex {by_index} (k = {K})."
    )
    print()
    agent_store(enc, n)


def agent_store(enc: StaticEncoder, n: int, limit: int = 16) -> None:
    """What the dense candidates miss on a store of alike agent claims: bench/perf.py's scope
    (harness.PreloadStream: the retrieval corpus's memories, then templated claims), asked its task
    cues (scale.py's service questions and the corpus's queries). For each cue, is its exact
    nearest memory among VectorIndex's `limit` candidates (the service asks for 16)? Claims that
    differ only in their numbers have one vector (the encoder leaves number tokens out), so the
    nearest is any memory at the best cosine: a cue counts as found when a candidate has it. With
    the policy's graph links and loose share, with 1 % loose, and as before 2026-12-05 (16 links, 1 %)."""
    import random

    from harness import PreloadStream, service_cue
    from slowave import dense_index

    stream = PreloadStream()
    x = enc.encode([item.content for item in stream.items(0, n)]).astype(np.float32)
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    rng = random.Random(7)
    cues = [service_cue(rng) for _ in range(300)] + [q.text for q in stream.corpus().queries][:300]
    queries = enc.encode(cues).astype(np.float32)
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    best = np.array([float((x @ q).max()) for q in queries])
    strong = best >= 0.7
    distinct = len(np.unique(x, axis=0))
    print(
        f"Agent store ({n:,} of perf.py's memories, {distinct:,} distinct vectors, {len(cues)} task cues, "
        f"{strong.sum()} with a nearest at cosine ≥ 0.7): a memory at the cue's best cosine among "
        f"VectorIndex's {limit} candidates"
    )
    print("\n| links | loose share | loose rows | best cosine found | … of cues with a nearest ≥ 0.7 | ms / query |")
    print("|---:|---:|---:|---:|---:|---:|")
    policy = (dense_index.ANN_CONNECTIVITY, dense_index.LOOSE_SHARE)
    for links, share, note in ((16, 0.01, " (before 2026-12-05)"), (policy[0], 0.01, ""), (*policy, " (policy)")):
        dense_index.ANN_CONNECTIVITY, dense_index.LOOSE_SHARE = links, share
        try:
            repo, index = Repo(x), VectorIndex("bench", background=False)
            index.similarities(repo, "t", "s", queries[0], [], limit)
            found = np.array(
                [
                    max(index.similarities(repo, "t", "s", q, [], limit).values()) >= b - TIE
                    for b, q in zip(best, queries)
                ]
            )
            ms = per_query(lambda q: index.similarities(repo, "t", "s", q, [], limit), queries)
            loose = len(index._scopes[("t", "s")].loose_positions)
        finally:
            dense_index.ANN_CONNECTIVITY, dense_index.LOOSE_SHARE = policy
        print(f"| {links}{note} | {share:g} | {loose:,} | {found.mean():.3f} | {found[strong].mean():.3f} | {ms:.3f} |")


if __name__ == "__main__":
    main()
