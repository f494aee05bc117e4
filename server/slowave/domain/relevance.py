"""Relevance of a memory, procedure or knowledge gap to a cue, and the admission test (spec 12.1).

First version: lexical. Relevance blends how much of the item's wording the cue covers with the
full-text engine's bm25 score; the admission floor (an item whose normalised text the cue contains
verbatim is always admitted) holds whatever the blend says.
"""
from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property, lru_cache

from slowave.domain.learning import precise
from slowave.domain.text import normalize_claim

ADMISSION_THRESHOLD = 0.35
_COVERAGE_WEIGHT = 0.7
_BM25_WEIGHT = 0.3
_TOKEN = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    """Words as the full-text index sees them: letters and digits, lowercased, accents removed."""
    folded = text.casefold()
    if not folded.isascii():
        folded = "".join(ch for ch in unicodedata.normalize("NFKD", folded) if not unicodedata.combining(ch))
    return _TOKEN.findall(folded)


@lru_cache(maxsize=200_000)
def word_set(text: str) -> frozenset[str]:
    """Distinct words of a stored text. Stored texts never change, so they are cached by value."""
    return frozenset(tokens(text))


@lru_cache(maxsize=200_000)
def normalized(text: str) -> str:
    return normalize_claim(text)


@dataclass(frozen=True)
class Cue:
    """What a retrieval looks for: the task (or query) plus the optional semantic context."""

    primary: str
    semantic: str | None = None

    @cached_property
    def normalized_parts(self) -> list[str]:
        return [normalize_claim(p) for p in (self.primary, self.semantic) if p]

    @cached_property
    def token_set(self) -> frozenset[str]:
        return frozenset(tokens(self.primary) + (tokens(self.semantic) if self.semantic else []))

    def contains(self, text: str) -> bool:
        """The admission floor: the item's normalised text occurs in the task/query or semantic context."""
        needle = normalized(text)
        return bool(needle) and any(needle in part for part in self.normalized_parts)

    @property
    def text(self) -> str:
        return f"{self.primary}\n{self.semantic}" if self.semantic else self.primary


def coverage(cue_tokens: frozenset[str], text: str) -> float:
    """Share of the item's distinct words that the cue contains."""
    item = word_set(text)
    return len(item & cue_tokens) / len(item) if item else 0.0


def bm25_strength(rank: float | None) -> float:
    """Maps FTS5's bm25 (negative; lower is better) into [0, 1)."""
    if rank is None:
        return 0.0
    r = max(0.0, -rank)
    return r / (r + 1.0)


TOTAL_DOCS_TERM = ""  # the term_stats row counting all documents (no word is empty)


def term_weights(doc_counts: dict[str, int]) -> dict[str, float]:
    """Inverse document frequency of the cue's words that occur in the store at all (a word that
    occurs nowhere cannot tell two memories apart)."""
    total = max(doc_counts.get(TOTAL_DOCS_TERM, 0), 1)
    return {t: math.log(1 + total / (1 + d)) for t, d in doc_counts.items() if t != TOTAL_DOCS_TERM and d > 0}


def cue_coverage(weights: dict[str, float], text: str) -> float:
    """Share of the cue's specificity the item carries: rare words of the cue count most, function
    words hardly at all. Complements `coverage`, which favours short items."""
    total = sum(weights.values())
    if not total:
        return 0.0
    return sum(w for t, w in weights.items() if t in word_set(text)) / total


def memory_relevance(cue: Cue, content: str, rank: float | None, weights: dict[str, float] | None = None) -> float:
    """Lexical relevance: how completely the cue and the claim cover each other, plus bm25."""
    # A cue that contains the whole claim covers all of it, whatever its word breaks.
    covered = 1.0 if cue.contains(content) else coverage(cue.token_set, content)
    if weights:
        covered = max(covered, cue_coverage(weights, content))
    return precise(_COVERAGE_WEIGHT * covered + _BM25_WEIGHT * bm25_strength(rank))


def text_relevance(cue: Cue, *texts: str) -> float:
    """Relevance without an index score (procedures, gaps): the best coverage among the texts."""
    return precise(max((coverage(cue.token_set, t) for t in texts if t), default=0.0))


# Calibrated on the retrieval benchmark for all-MiniLM-L6-v2: a cosine of 0.30 (a typical true
# paraphrase) reaches the admission threshold; 0.67 and above is full strength.
SEMANTIC_FLOOR_COSINE = 0.10
SEMANTIC_SPAN = 0.57


def semantic_strength(cosine: float) -> float:
    """Maps a cosine similarity into [0, 1]: below the floor nothing, then linear up to 1."""
    return max(0.0, min(1.0, (cosine - SEMANTIC_FLOOR_COSINE) / SEMANTIC_SPAN))


def fused_relevance(lexical: float, cosine: float | None) -> float:
    """Hybrid relevance: the probabilistic OR of the channels' evidence, 1 − (1 − lex)(1 − sem).

    A paraphrase with no shared word is found on meaning alone, and between two claims that mean
    nearly the same thing the one whose exact words match the cue still ranks higher."""
    if cosine is None:
        return lexical
    return precise(1 - (1 - lexical) * (1 - semantic_strength(cosine)))


@dataclass(frozen=True)
class LexicalQuery:
    terms: list[str]
    require_all: bool  # AND instead of OR


def lexical_query(terms: frozenset[str], doc_counts: dict[str, int], budget_docs: int = 400) -> LexicalQuery | None:
    """What to ask the full-text index: the cue's rarest words, within a document budget.

    The index scores every document that contains a queried word, so a query costs the sum of its
    words' document counts. Words are taken rarest first (the most specific, which also weigh most
    in bm25) while that sum stays within `budget_docs` (any of them may match). When even the
    rarest word is too common, documents must contain the two or three rarest words together.
    Words left out still count in relevance, and the containment floor does not depend on them.
    """
    present = sorted((doc_counts[t], t) for t in terms if doc_counts.get(t, 0) > 0)
    if not present:
        return None
    if present[0][0] > budget_docs:
        return LexicalQuery(sorted(t for _, t in present[:3]), require_all=True)
    chosen, used = [], 0
    for docs, term in present:
        if used + docs > budget_docs:
            break
        chosen.append(term)
        used += docs
    return LexicalQuery(sorted(chosen), require_all=False)


def admits(cue: Cue, relevance: float, text: str) -> bool:
    return relevance >= ADMISSION_THRESHOLD or cue.contains(text)
