"""Relevance of a memory, procedure or knowledge gap to a cue, and the admission test (spec 12.1).

Lexical relevance blends how much of the item's wording the cue covers with a BM25 score that the
service computes itself from its own term statistics, so a memory's relevance does not depend on
which backend's full-text index found it, nor on which of the cue's words the index was asked for.
The admission floor (an item whose normalised text the cue contains verbatim is always admitted)
holds whatever the blend says.
"""
from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
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


# Stored texts never change, so their word profiles are cached by value; the bound keeps the
# cache to a few tens of MB however large the store grows.
_TEXT_CACHE = 32_768


@lru_cache(maxsize=_TEXT_CACHE)
def term_counts(text: str) -> tuple[dict[str, int], int]:
    """How often each word occurs in a stored text, and its length in words."""
    words = tokens(text)
    counts = dict.fromkeys(words, 1)  # claims seldom repeat a word; Counter only when they do
    if len(counts) != len(words):
        counts = Counter(words)
    return counts, len(words)


def word_set(text: str):  # noqa: ANN201 - a set-like view
    """Distinct words of a stored text."""
    return term_counts(text)[0].keys()


@lru_cache(maxsize=_TEXT_CACHE)
def folded(text: str) -> str:
    """Case-folded stored text (names are looked up in it)."""
    return text.casefold()


@lru_cache(maxsize=_TEXT_CACHE)
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


TOTAL_DOCS_TERM = ""  # the scope_terms row counting the scope's memories (no word is empty)
TOTAL_WORDS_TERM = " words"  # the scope_terms row counting their words (no word has a space)
BM25_K1 = 1.2
BM25_B = 0.75


@dataclass(frozen=True)
class LexicalScorer:
    """Lexical relevance of stored texts to one cue, from the store's term statistics.

    Relevance blends coverage — how completely the cue and the text cover each other: the share
    of the text's words the cue contains, or the share of the cue's specificity the text carries,
    whichever is larger — with Okapi BM25 (the parameters and IDF of SQLite FTS5's bm25, so scores
    keep its familiar scale). Built once per retrieval; scoring a text reads only its cached word
    counts."""

    terms: frozenset[str]
    weights: dict[str, float]
    """Specificity of each of the cue's words (inverse document frequency); a word that occurs
    nowhere weighs the most, so a text carrying only the cue's common words never covers it all."""
    idf: dict[str, float]
    average_length: float
    _total_weight: float = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_total_weight", sum(self.weights.values()))

    @classmethod
    def for_cue(cls, cue: Cue, doc_counts: dict[str, int]) -> "LexicalScorer":
        total = max(doc_counts.get(TOTAL_DOCS_TERM, 0), 1)
        docs = {t: doc_counts.get(t[:128], 0) for t in cue.token_set}
        return cls(
            terms=cue.token_set,
            weights={t: math.log(1 + total / (1 + d)) for t, d in docs.items()},
            idf={t: max(1e-6, math.log((total - d + 0.5) / (d + 0.5))) for t, d in docs.items() if d > 0},
            average_length=doc_counts.get(TOTAL_WORDS_TERM, 0) / total or 1.0,
        )

    def bm25(self, text: str) -> float:
        counts, length = term_counts(text)
        return self._bm25(counts, length, [t for t in self.terms if t in counts])

    def _bm25(self, counts: dict[str, int], length: int, shared: list[str]) -> float:
        norm = BM25_K1 * (1 - BM25_B + BM25_B * length / self.average_length)
        score = 0.0
        for t in shared:
            idf = self.idf.get(t)
            if idf is not None:
                tf = counts[t]
                score += idf * tf * (BM25_K1 + 1) / (tf + norm)
        return score

    def relevance(self, text: str, contained: bool) -> float:
        """`contained`: the cue contains the text verbatim (the admission floor), which covers
        all of it whatever its word breaks."""
        counts, length = term_counts(text)
        shared = [t for t in self.terms if t in counts]
        if contained:
            covered = 1.0
        elif not counts or not shared:
            covered = 0.0
        else:
            weight = 0.0
            for t in shared:
                weight += self.weights[t]
            covered = max(len(shared) / len(counts), weight / self._total_weight)
        score = self._bm25(counts, length, shared) if shared else 0.0
        return precise(_COVERAGE_WEIGHT * covered + _BM25_WEIGHT * score / (score + 1.0))


def memory_relevance(cue: Cue, content: str, doc_counts: dict[str, int] | None = None) -> float:
    """Lexical relevance of one text (see LexicalScorer; retrieval builds the scorer once)."""
    return LexicalScorer.for_cue(cue, doc_counts or {}).relevance(content, cue.contains(content))


def text_relevance(cue: Cue, *texts: str) -> float:
    """Relevance without an index score (procedures, gaps): the best coverage among the texts."""
    return precise(max((coverage(cue.token_set, t) for t in texts if t), default=0.0))


# Calibrated on the retrieval benchmark for all-MiniLM-L6-v2: a cosine of 0.30 (a typical true
# paraphrase) reaches the admission threshold; 0.585 and above is full strength. Meaning alone never
# makes a memory certain (the ceiling): claims from one template (`search-api listens on 9000`,
# `billing-api listens on 8443`) are near neighbours, and only their exact words tell them apart.
SEMANTIC_FLOOR_COSINE = 0.10
SEMANTIC_SPAN = 0.485
SEMANTIC_CEILING = 0.85


def semantic_strength(cosine: float) -> float:
    """Maps a cosine similarity into [0, ceiling]: below the floor nothing, then linear."""
    return SEMANTIC_CEILING * max(0.0, min(1.0, (cosine - SEMANTIC_FLOOR_COSINE) / SEMANTIC_SPAN))


def fused_relevance(lexical: float, cosine: float | None, name_share: float = 1.0) -> float:
    """Hybrid relevance: the probabilistic OR of the channels' evidence, 1 − (1 − lex)(1 − sem).

    A paraphrase with no shared word is found on meaning alone, and — the semantic evidence being
    capped below certainty — between two claims that mean nearly the same thing the one whose exact
    words match the cue still ranks higher. `name_share` (see CueNames) scales the semantic
    evidence: a memory that does not mention what the cue names gets none of it.

    Corroboration needs a channel that stands on its own: when neither channel alone reaches the
    admission threshold, two weak signals do not add up (the stronger one is the relevance). Weak
    lexical overlap plus a vague resemblance in meaning is how unrelated memories of the same
    project crowd a page; each one shown costs the agent context and an `irrelevant` assessment."""
    if cosine is None:
        return lexical
    semantic = semantic_strength(cosine)
    if lexical < ADMISSION_THRESHOLD and semantic < ADMISSION_THRESHOLD:
        return precise(max(lexical, semantic * name_share))
    return precise(1 - (1 - lexical) * (1 - semantic * name_share))


# Spans of a cue that name something rather than describe it: words joined by - . / : _
# (`geo-lookup`, `deploy/app/runtime.json`, `2024-08-23`, `SEC-5165`, `metrics.updates.v1`), words
# with a digit (`v1`, `3.12.1`, `9000`) and capitalised words after the first (`Kafka`, `Novak`).
_SPAN = re.compile(r"[^\W_]+(?:[-./:_][^\W_]+)*")


def cue_names(text: str) -> list[str]:
    """The cue's name-like spans, case-folded, in order."""
    names = []
    for i, match in enumerate(_SPAN.finditer(text)):
        span = match.group(0)
        joined = not span.isalnum()
        if joined or any(c.isdigit() for c in span) or (i > 0 and len(span) > 1 and span[0].isupper()):
            names.append(span.casefold())
    return names


def mentions(folded_text: str, name: str) -> bool:
    """`name` occurs in the case-folded text as a whole span (`ledger-worker` is not in `ledger-workers`)."""
    start = 0
    while (i := folded_text.find(name, start)) >= 0:
        end = i + len(name)
        if (i == 0 or not folded_text[i - 1].isalnum()) and (end == len(folded_text) or not folded_text[end].isalnum()):
            return True
        start = i + 1
    return False


@dataclass(frozen=True)
class CueNames:
    """What the cue names, among the things the candidates mention — and how much each weighs.

    Meaning finds a memory that shares no word with the cue, but it cannot tell `search-api
    listens on 9000` from `billing-api listens on 8443`: to an embedding model they are near
    neighbours, and only the names tell them apart. So when the cue names something that the
    scope's candidates mention (a service, a file, a date, a version, a ticket, a person), a
    memory gets semantic evidence only in proportion to the share of those names it mentions
    itself, weighted by their words' specificity. A name no candidate mentions (`sign-in` in a
    paraphrase) is ordinary wording and weighs nothing; a cue without names leaves the semantic
    channel as it is. Lexical evidence and the admission floor are untouched, so exact words
    still admit and rank a memory however its meaning compares.
    """

    weights: dict[str, float]

    @classmethod
    def among(cls, cue: Cue, scorer: LexicalScorer, contents: list[str]) -> "CueNames":
        names = dict.fromkeys(cue_names(cue.primary) + (cue_names(cue.semantic) if cue.semantic else []))
        if not names:
            return cls({})
        texts = [folded(c) for c in contents]
        weights = {}
        for name in names:
            if any(mentions(text, name) for text in texts):
                weights[name] = sum(scorer.weights.get(t, 0.0) for t in set(tokens(name))) or 1.0
        return cls(weights)

    def share(self, content: str) -> float:
        """Share of the cue's names (by weight) that the text mentions; 1 when the cue names nothing."""
        if not self.weights:
            return 1.0
        text = folded(content)
        return sum(w for name, w in self.weights.items() if mentions(text, name)) / sum(self.weights.values())


@dataclass(frozen=True)
class LexicalQuery:
    terms: list[str]
    require_all: bool  # AND instead of OR


def lexical_query(terms: frozenset[str], doc_counts: dict[str, int], budget_docs: int = 128) -> LexicalQuery | None:
    """What to ask the full-text index: the cue's rarest words, within a document budget.

    Every memory matching an any-of query is scored, so such a query costs the sum of its words'
    document counts in the scope. Words are taken rarest first (the most specific, which also weigh
    most in BM25) while that sum stays within `budget_docs`. When even the rarest word is too
    common, memories must contain the two or three rarest words together (the index then streams
    the newest matches). Words left out still count in relevance, and the containment floor does
    not depend on them.
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


def admits(cue: Cue, relevance: float, text: str, contained: bool | None = None) -> bool:
    """Admitted on the threshold, or by the floor (`contained` when the caller already knows)."""
    return relevance >= ADMISSION_THRESHOLD or (cue.contains(text) if contained is None else contained)
