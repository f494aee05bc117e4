"""Relevance of a memory, procedure or knowledge gap to a cue, and the admission test (behaviour §12.1).

Lexical relevance is Okapi BM25 over terms (`domain.terms`: stop words out, Snowball stems), with
two fields per memory: its own words (and the words of the date it occurred on) and, at lower
weight, its session context — the words of the memories stored just before it in the same session
(fixed at Remember), which adds to a memory's own evidence but never admits it alone. The score is read against the best a memory could score for the cue (every
cue term once, in a memory of average length), so relevance says how much of what the cue asks
about a memory carries: a memory holding the cue's specific words is admitted whatever else the
cue says. The service computes BM25 from its own per-scope statistics, so both backends give the
same numbers. The admission floor (an item whose normalised text the cue contains verbatim is
always admitted) holds whatever the score says.
"""

from __future__ import annotations

import math
import re
from bisect import bisect_right
from collections.abc import KeysView
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import accumulate

from slowave.domain.learning import precise
from slowave.domain.terms import terms
from slowave.domain.text import normalize_claim

ADMISSION_THRESHOLD = 0.35


# Stored texts never change, so their term profiles are cached by value; the bound keeps the
# cache to a few tens of MB however large the store grows.
_TEXT_CACHE = 131_072


TermProfile = tuple[dict[str, int], int]
"""How often each term occurs in a text, and its length in terms."""


def _profile(items: list[str]) -> TermProfile:
    # A plain dict of strings and ints, never a Counter: the garbage collector skips such a dict,
    # but tracks every instance of a dict subclass, and a process caches tens of thousands of
    # profiles (an occasion's holds ~100 terms). As Counters they were three quarters of what a
    # full collection walked at 100k memories (api/collector.py).
    counts = dict.fromkeys(items, 1)  # claims seldom repeat a term
    if len(counts) != len(items):
        counts = {}
        for item in items:
            counts[item] = counts.get(item, 0) + 1
    return counts, len(items)


@lru_cache(maxsize=_TEXT_CACHE)
def term_counts(text: str, date_words: str = "") -> tuple[dict[str, int], int]:
    """How often each term occurs in a stored text (plus its date's words), and its length in terms."""
    return _profile(terms(f"{text} {date_words}") if date_words else terms(text))


@lru_cache(maxsize=_TEXT_CACHE)
def stored_counts(stored_terms: str | None) -> tuple[dict[str, int], int]:
    """A field stored as its terms separated by spaces (a memory's own terms, its session context):
    splitting it costs a third of finding and stemming the words again."""
    return _profile(stored_terms.split()) if stored_terms else ({}, 0)


def term_profile(stored_terms: str) -> TermProfile:
    """The profile of a long field stored as terms separated by spaces (an occasion's), uncached."""
    return _profile(stored_terms.split())


def word_set(text: str) -> KeysView[str]:
    """Distinct terms of a stored text."""
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
        """The cue's distinct terms (stemmed, stop words removed)."""
        return frozenset(terms(self.primary) + (terms(self.semantic) if self.semantic else []))

    @cached_property
    def names(self) -> tuple[str, ...]:
        """The name-like spans of the task (or query), then of the semantic context (cue_names):
        found once per cue, as three rules ask for them (an 8 KiB cue: ≈ 2 ms each time)."""
        return tuple(cue_names(self.primary) + (cue_names(self.semantic) if self.semantic else []))

    @cached_property
    def name_terms(self) -> frozenset[str]:
        """Terms of what the cue names (see cue_names)."""
        return frozenset(t for span in self.names for t in terms(span))

    def contains(self, text: str) -> bool:
        """The admission floor: the item's normalised text occurs in the task/query or semantic context."""
        needle = normalized(text)
        return bool(needle) and any(needle in part for part in self.normalized_parts)

    @property
    def text(self) -> str:
        return f"{self.primary}\n{self.semantic}" if self.semantic else self.primary


def term_share(cue_tokens: frozenset[str], text: str) -> float:
    """Share of the item's distinct terms that the cue contains."""
    item = word_set(text)
    return len(item & cue_tokens) / len(item) if item else 0.0


TOTAL_DOCS_TERM = ""  # the scope_terms row counting the scope's memories (no term is empty)
TOTAL_WORDS_TERM = " words"  # the scope_terms row counting their terms (no term has a space)
CONTEXT_PREFIX = "\t"  # scope_terms rows of the session-context field: "\t" + term
TOTAL_CONTEXT_WORDS_TERM = "\t words"  # ... and the total term count of their session contexts
TOTAL_OCCASIONS_TERM = " occasions"  # the scope's occasions (see OccasionScorer) ...
TOTAL_OCCASION_WORDS_TERM = " occasion words"  # ... and their total term count
BM25_K1 = 1.2
# Claims are short and of similar length: a weak length normalisation (Lucene's default 0.75
# punishes a claim for one extra clause).
BM25_B = 0.3
# How much a match in the session context counts against one in the memory's own words.
CONTEXT_WEIGHT = 0.4
# Relevance = 1 − exp(−RELEVANCE_RATE × share of the cue's best score): a memory carrying the cue's
# term of highest weight out of four or five equally rare ones reaches the admission threshold; one
# carrying all of them is near 0.9.
RELEVANCE_RATE = 2.2
# What the cue names (a person, a service, a version) is what it asks about, however many memories
# mention it, so a name weighs at least NAME_FLOOR × the cue's average stored term. Not the whole
# average: a name in most memories of a scope (the two people of a conversation, the one service a
# scope is about) then outweighed the cue's specific words, and a memory holding the name and a
# common word ("Thanks, Evan, good to hear") ranked above the one holding what was asked.
# Measured on the conversational benchmark: 1.0 -> 0.5 lifts evidence@5 0.766 -> 0.777 and
# evidence@10 0.840 -> 0.846; the synthetic agent bench is unchanged in every cell.
NAME_FLOOR = 0.5


# The session context of a memory: the claims stored just before it in the same session. A turn
# of a conversation or a step of a task is often understood only with the one before it ("Yes,
# and it broke again on Friday"); two claims back is where the benchmark gain levels off.
SESSION_CONTEXT_CLAIMS = 2


# A memory's occasion: the claims one session remembered about one day (their `occurred_at` date,
# or none), in runs of at most OCCASION_CLAIMS. A question is often answered by one turn of a
# conversation, or one step of a task, whose own words say little ("Yes, and it broke again") while
# the occasion's words say what it was about. Measured on the conversational benchmark (reranking
# the first 50 memories of the service by this evidence): +0.03 evidence@10, in each of its five
# conversations, flat for weights 0.35-0.5 and length normalisations 0.5-1. The cap keeps a bulk
# load in one session from becoming one occasion that mentions everything.
OCCASION_CLAIMS = 64
# The share of what an admitted memory's relevance lacks of 1 that an occasion holding all of the
# cue's terms fills (domain.retrieval.CandidateScoring.in_occasions; it never admits a memory).
OCCASION_WEIGHT = 0.4
# Occasions differ in length far more than claims do: Lucene's usual normalisation.
OCCASION_B = 0.75
# What a claim is about: the first thing it names among its opening words (`claim_subject`). When the
# cue names it, the claim is about what the cue asks, not one that mentions it in passing
# (`Evan: keep trying new things` for "What advice did Evan give Sam?", over `Melanie: Evan said…`;
# `billing-db backups run nightly` over `orders-db replicates into billing-db`). When some admitted
# memories are about what the cue names, what the others lack of 1 grows by 1 / (1 - SUBJECT_WEIGHT),
# down to the admission threshold (CandidateScoring.about_named). Measured on the conversational
# benchmark by reranking the service's first 50 memories: evidence@1 +0.04, evidence@10 +0.01, flat
# for weights 0.3-0.5.
SUBJECT_WORDS = 4
SUBJECT_WEIGHT = 0.4
# A memory that ends with a question mark asks rather than tells (`What other hobbies have you
# found?`, `Should billing-db move to Postgres 16?`): it holds the words of what it asks about, not
# the answer. What such an admitted memory lacks of 1 grows by 1 / (1 - ASKING_WEIGHT), down to the
# admission threshold (CandidateScoring.asking_lowered). Measured on the conversational benchmark
# by reranking the service's first 50 memories: evidence@10 +0.005, evidence@20 +0.01, flat for
# weights 0.2-0.4.
ASKING_WEIGHT = 0.3


def session_context(previous_claims: list[str]) -> str | None:
    """The context field stored with a new memory, from the contents of the claims before it."""
    context = terms(" ".join(previous_claims[-SESSION_CONTEXT_CLAIMS:]))
    return " ".join(context) if context else None


def context_term(term: str) -> str:
    return CONTEXT_PREFIX + term


def statistics_terms(cue_terms: frozenset[str]) -> list[str]:
    """The scope_terms rows a retrieval reads for a cue."""
    return [
        TOTAL_DOCS_TERM,
        TOTAL_WORDS_TERM,
        TOTAL_CONTEXT_WORDS_TERM,
        *cue_terms,
        *(context_term(t) for t in cue_terms),
        TOTAL_OCCASIONS_TERM,
        TOTAL_OCCASION_WORDS_TERM,
    ]


def bm25_idf(total: int, docs: int) -> float:
    """Lucene's BM25 IDF: positive for every term (a term in most memories still counts a little)."""
    return math.log(1 + (total - docs + 0.5) / (docs + 0.5))


@dataclass(frozen=True)
class LexicalScorer:
    """Lexical relevance of stored memories to one cue, from the scope's term statistics.

    Built once per retrieval; scoring a memory reads only its cached term counts."""

    terms: frozenset[str]
    weights: dict[str, float]
    """Specificity (BM25 IDF) of each cue term that some memory of the scope holds. A cue term no
    memory holds cannot tell memories apart; it weighs as the cue's most common stored term does,
    so a memory still carries only a share of a cue that asks for more than the store holds."""
    average_length: float
    average_context_length: float
    average_occasion_length: float = 1.0
    _ideal: float = field(init=False)

    def __post_init__(self) -> None:
        present = [w for w in self.weights.values() if w > 0]
        absent = len(self.terms) - len(present)
        object.__setattr__(self, "_ideal", sum(present) + absent * min(present, default=0.0))

    @classmethod
    def for_cue(cls, cue: Cue, doc_counts: dict[str, int]) -> LexicalScorer:
        total = max(doc_counts.get(TOTAL_DOCS_TERM, 0), 1)
        weights = {}
        for t in cue.token_set:
            docs = doc_counts.get(t[:128], 0)
            weights[t] = bm25_idf(total, docs) if docs > 0 else 0.0
        present = [w for w in weights.values() if w > 0]
        if present:
            floor = NAME_FLOOR * sum(present) / len(present)
            for t in cue.name_terms:
                if weights.get(t, 0.0) > 0:
                    weights[t] = max(weights[t], floor)
        return cls(
            terms=cue.token_set,
            weights=weights,
            average_length=doc_counts.get(TOTAL_WORDS_TERM, 0) / total or 1.0,
            average_context_length=doc_counts.get(TOTAL_CONTEXT_WORDS_TERM, 0) / total or 1.0,
            average_occasion_length=(
                doc_counts.get(TOTAL_OCCASION_WORDS_TERM, 0) / max(doc_counts.get(TOTAL_OCCASIONS_TERM, 0), 1) or 1.0
            ),
        )

    def _bm25(self, counts: dict[str, int], length: int, average: float, b: float = BM25_B) -> float:
        norm = BM25_K1 * (1 - b + b * length / average)
        score = 0.0
        for t in self.terms:
            tf = counts.get(t)
            if tf:
                score += self.weights[t] * tf * (BM25_K1 + 1) / (tf + norm)
        return score

    def share(self, text: str, context: str | None = None, date_words: str = "", own_terms: str | None = None) -> float:
        """The memory's BM25 score over both fields, as a share of the cue's ideal score. `own_terms`:
        the terms of the text and its date words as stored at Remember, when the caller has them."""
        if self._ideal <= 0:
            return 0.0
        counts, length = term_counts(text, date_words) if own_terms is None else stored_counts(own_terms)
        score = self._bm25(counts, length, self.average_length)
        # The context adds to a memory's own evidence and never stands in for it: measured on the
        # conversational benchmark, memories matching only by their neighbours' words add nothing
        # to what is found, and in an agent's store they would crowd pages with unrelated claims
        # that happened to be stored together.
        if context and score > 0:
            ctx_counts, ctx_length = stored_counts(context)
            score += CONTEXT_WEIGHT * self._bm25(ctx_counts, ctx_length, self.average_context_length)
        return score / self._ideal

    def occasion_share(self, occasion: TermProfile) -> float:
        """The BM25 score of a memory's occasion (its term profile), as a share of the cue's ideal
        score, with the term weights of the memories' own field."""
        counts, length = occasion
        if self._ideal <= 0 or not length:
            return 0.0
        return min(1.0, self._bm25(counts, length, self.average_occasion_length, OCCASION_B) / self._ideal)

    def relevance(
        self, text: str, contained: bool, context: str | None = None, date_words: str = "", own_terms: str | None = None
    ) -> float:
        """`contained`: the cue contains the text verbatim (the admission floor)."""
        return precise(self.raw_relevance(text, contained, context, date_words, own_terms))

    def raw_relevance(
        self, text: str, contained: bool, context: str | None = None, date_words: str = "", own_terms: str | None = None
    ) -> float:
        """`relevance` before rounding: retrieval rounds once, when a memory is admitted (rounding
        every candidate's every step was 8 % of an Activate's CPU at 100k memories)."""
        if contained:
            return 1.0
        return 1 - math.exp(-RELEVANCE_RATE * self.share(text, context, date_words, own_terms))


def memory_relevance(cue: Cue, content: str, doc_counts: dict[str, int] | None = None) -> float:
    """Lexical relevance of one text (see LexicalScorer; retrieval builds the scorer once)."""
    return LexicalScorer.for_cue(cue, doc_counts or {}).relevance(content, cue.contains(content))


def text_relevance(cue: Cue, *texts: str) -> float:
    """Relevance without an index score (procedures, gaps): the best term share among the texts."""
    return precise(max((term_share(cue.token_set, t) for t in texts if t), default=0.0))


@dataclass(frozen=True)
class SemanticCalibration:
    """How an encoder's cosine similarities become evidence in [0, ceiling]: nothing below
    `floor_cosine`, then linear up to full strength at `full_cosine`. Each encoder has its own
    (embedding.py), measured on the retrieval benchmark so that a typical true paraphrase reaches
    the admission threshold. Meaning alone never makes a memory certain (the ceiling): claims from
    one template (`search-api listens on 9000`, `billing-api listens on 8443`) are near neighbours,
    and only their exact words tell them apart."""

    floor_cosine: float
    full_cosine: float
    ceiling: float = 0.85

    def strength(self, cosine: float) -> float:
        return self.ceiling * max(0.0, min(1.0, (cosine - self.floor_cosine) / (self.full_cosine - self.floor_cosine)))


# all-MiniLM-L6-v2: a cosine of 0.30 reaches the admission threshold; 0.585 and above is full strength.
MINILM_CALIBRATION = SemanticCalibration(floor_cosine=0.10, full_cosine=0.585)


def semantic_strength(cosine: float, calibration: SemanticCalibration = MINILM_CALIBRATION) -> float:
    """Maps a cosine similarity into [0, ceiling]: below the floor nothing, then linear."""
    return calibration.strength(cosine)


def fused_relevance(
    lexical: float, cosine: float | None, name_share: float = 1.0, calibration: SemanticCalibration = MINILM_CALIBRATION
) -> float:
    """Hybrid relevance: the probabilistic OR of the channels' evidence, 1 − (1 − lex)(1 − sem).

    A paraphrase with no shared word is found on meaning alone, and — the semantic evidence being
    capped below certainty — between two claims that mean nearly the same thing the one whose exact
    words match the cue still ranks higher. `name_share` (see CueNames) scales the semantic
    evidence: a memory that does not mention what the cue names gets none of it.

    Corroboration needs a channel that stands on its own: when neither channel alone reaches the
    admission threshold, two weak signals do not add up (the stronger one is the relevance). Weak
    lexical overlap plus a vague resemblance in meaning is how unrelated memories of the same
    project crowd a page; each one shown costs the agent context and an `irrelevant` assessment."""
    return lexical if cosine is None else precise(raw_fused_relevance(lexical, cosine, name_share, calibration))


def raw_fused_relevance(
    lexical: float, cosine: float, name_share: float = 1.0, calibration: SemanticCalibration = MINILM_CALIBRATION
) -> float:
    """`fused_relevance` before rounding."""
    semantic = calibration.strength(cosine)
    if lexical < ADMISSION_THRESHOLD and semantic < ADMISSION_THRESHOLD:
        return max(lexical, semantic * name_share)
    return 1 - (1 - lexical) * (1 - semantic * name_share)


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


@lru_cache(maxsize=_TEXT_CACHE)
def claim_subject(content: str) -> str | None:
    """The first name-like span among the claim's first SUBJECT_WORDS words, case-folded: an
    identifier joined by - . / : _, a word with a digit, or a capitalised word of two letters or
    more that is not a stop word (a claim's first word counts: it is where its subject stands)."""
    for i, match in enumerate(_SPAN.finditer(content)):
        if i >= SUBJECT_WORDS:
            break
        span = match.group(0)
        if (
            not span.isalnum()
            or any(c.isdigit() for c in span)
            or (len(span) > 1 and span[0].isupper() and terms(span))
        ):
            return span.casefold()
    return None


def asks(content: str) -> bool:
    """The memory ends with a question mark: it asks rather than tells."""
    return content.rstrip().endswith("?")


def mentions(folded_text: str, name: str) -> bool:
    """`name` occurs in the case-folded text as a whole span (`ledger-worker` is not in `ledger-workers`)."""
    start = 0
    while (i := folded_text.find(name, start)) >= 0:
        end = i + len(name)
        if (i == 0 or not folded_text[i - 1].isalnum()) and (end == len(folded_text) or not folded_text[end].isalnum()):
            return True
        start = i + 1
    return False


def _holders(names: list[str], contents: list[str]) -> dict[str, list[int]]:
    """name -> the candidates (indices, ascending) whose content `mentions` it, for the names some
    candidate mentions, in the names' order."""
    holders: dict[str, list[int]] = {}
    if not all(c.isascii() for c in contents):  # case folding may change a text's length
        texts = [folded(c) for c in contents]
        for name in names:
            holding = [i for i, text in enumerate(texts) if name in text and mentions(text, name)]
            if holding:
                holders[name] = holding
        return holders
    # The usual case, over one string rather than a case-folded copy of each candidate (≈ 0.03 ms
    # of a hybrid Activate over 70 candidates): ASCII folds to its lower case, length for length,
    # so each candidate starts where the lengths before it say; NUL between two is no letter or
    # digit, so a span ends there as at the end of a text.
    joint = "\0".join(contents).lower()
    starts = list(accumulate((len(c) + 1 for c in contents), initial=0))
    for name in names:
        found: list[int] = []
        i = joint.find(name)
        while i >= 0:
            end = i + len(name)
            if (i == 0 or not joint[i - 1].isalnum()) and (end == len(joint) or not joint[end].isalnum()):
                at = bisect_right(starts, i) - 1
                found.append(at)
                i = joint.find(name, starts[at + 1])  # on to the next candidate
            else:
                i = joint.find(name, i + 1)
        if found:
            holders[name] = found
    return holders


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
    shares: dict[str, float] = field(default_factory=dict, repr=False)
    """`share` of each candidate's content, computed by `among`."""

    @classmethod
    def among(cls, cue: Cue, scorer: LexicalScorer, contents: list[str]) -> CueNames:
        names = dict.fromkeys(cue.names)
        if not names:
            return cls({})
        holders = _holders(list(names), contents)
        if not holders:
            return cls({})
        weights = {name: sum(scorer.weights.get(t, 0.0) for t in set(terms(name))) or 1.0 for name in holders}
        # Each candidate's share, summed in the cue's order as `share` sums (the same number), here
        # where the names are found: one pass over a hybrid retrieval's hundred candidates.
        mentioned: list[float] = [0] * len(contents)
        for name, found in holders.items():
            for i in found:
                mentioned[i] += weights[name]
        total = sum(weights.values())
        return cls(weights, {c: m / total for c, m in zip(contents, mentioned)})

    def share(self, content: str) -> float:
        """Share of the cue's names (by weight) that the text mentions; 1 when the cue names nothing."""
        if not self.weights:
            return 1.0
        known = self.shares.get(content)
        if known is not None:
            return known
        text = folded(content)
        return sum(w for name, w in self.weights.items() if mentions(text, name)) / sum(self.weights.values())


@dataclass(frozen=True)
class LexicalQuery:
    terms: list[str]
    require_all: bool
    """All of the terms in the memory's own words, instead of any of them in either field."""


def lexical_query(
    terms: frozenset[str], doc_counts: dict[str, int], budget_docs: int = 128, context: bool = True
) -> LexicalQuery | None:
    """What to ask the full-text index: the cue's rarest terms, within a document budget.

    Every memory matching an any-of query is scored, so such a query costs the sum of its terms'
    document counts in the scope, in both fields. Terms are taken rarest first (the most specific,
    which also weigh most in BM25) while that sum stays within `budget_docs`. A memory whose session
    context holds a rare cue term is asked for too: its own words may hold the cue's common terms,
    which the budget leaves out of the query (measured on the conversational benchmark: +0.03
    evidence@10). When even the rarest term is too common, memories must hold the two or three
    rarest terms together in their own words (the index then streams the newest matches). Terms
    left out still count in relevance, and the containment floor does not depend on them.

    `context=False`: the query is over memories' own words only (Remember's flags, which compare a
    claim with what other claims say themselves), so only those documents count against the budget.
    """
    present = sorted(
        (doc_counts.get(t[:128], 0) + (doc_counts.get(context_term(t)[:128], 0) if context else 0), t)
        for t in terms
        if doc_counts.get(t[:128], 0) > 0
    )
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
