"""Retrieval rules (behaviour §5.4, 12.1, 12.3): which memories a cue admits, how they rank, and the
frozen catalog a retrieval serves its pages from.

The service layer reads candidates and statistics from storage and hands them here; nothing in
this module does I/O. The pieces, in the order a retrieval applies them:

* `CandidateScoring` — relevance of the candidates: lexical (relevance.LexicalScorer) fused with
  the semantic channel's evidence when it is on (relevance.fused_relevance, the names rule; in full
  only where no candidate matches the cue's words), the admission test (threshold or floor), then
  the preference for memories that occurred on a date the cue names (domain.dates), then what
  each admitted memory is about (`about_named`), then the evidence of each admitted memory's
  occasion (`in_occasions`).
* versions (`version_pairs`, `newer_versions_first`): of two admitted memories that read as two
  versions of one fact (domain.near_duplicates), the newer ranks above the older.
* supersession (domain.supersession): an admitted memory retired as `superseded` is represented
  by its active replacement (pathway `redirect`), never twice.
* `rank` — score = relevance + learned; order by score, relevance, memory number.
* `Catalog` — at most `catalog_memories` memories and `catalog_procedures` procedures, frozen
  with their signals and sizes; stored as JSON with the retrieval and read back by pages.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

from slowave.domain.dates import Period, date_words, named_periods, prefer_named_dates
from slowave.domain.learning import precise
from slowave.domain.near_duplicates import StoredShapes, Verdict, possible_conflicts
from slowave.domain.relevance import (
    ADMISSION_THRESHOLD,
    ASKING_WEIGHT,
    OCCASION_WEIGHT,
    SUBJECT_WEIGHT,
    Cue,
    CueNames,
    LexicalScorer,
    SemanticCalibration,
    TermProfile,
    admits,
    asks,
    claim_subject,
    raw_fused_relevance,
)

DIRECT, REDIRECT = "direct", "redirect"
# Share of its strength the semantic evidence keeps when some candidate is admitted on the cue's
# words (CandidateScoring.admitted).
MEANING_WHERE_WORDS_MATCH = 0.5
# The most relevant admitted memories compared pairwise for versions of one fact (a page's worth:
# 45 pairs; comparing 20 found no more on the synthetic benchmark and costs four times as much).
VERSIONS_COMPARED = 10
# How far below the newer version an older one is placed: the least step of a reported relevance,
# so the rule orders the two and moves nothing else (feedback, ±0.05 a unit, still decides).
VERSION_GAP = 0.000001


class StoredMemory(Protocol):
    """What retrieval reads of a memory (storage's MemoryView or a full row)."""

    number: int
    type: str
    content: str
    status: str
    stale_reason: str | None
    superseded_by: int | None
    context_terms: str | None
    occurred_on: str | None
    own_terms: str | None
    occasion: int | None


def lowered(relevance: float, weight: float) -> float:
    """The lowered form of the subject and asking rules: what the relevance lacks of 1 grows by
    1 / (1 - weight), down to the admission threshold and never below it, so a rule never drops a
    memory; a certain (verbatim) match keeps 1."""
    if relevance >= 1.0:
        return relevance
    down = max(ADMISSION_THRESHOLD, 1.0 - (1.0 - relevance) / (1.0 - weight))
    return precise(down) if down < relevance else relevance


@dataclass
class Candidate:
    """An admitted memory and how it got onto the list."""

    number: int
    relevance: float
    pathway: str = DIRECT
    redirected_from: int | None = None


@dataclass(frozen=True)
class CandidateScoring:
    """Relevance of the candidates of one retrieval to its cue."""

    cue: Cue
    lexical_scorer: LexicalScorer
    names: CueNames | None = None
    """With the semantic channel: what the cue names, among the candidates (relevance.CueNames)."""
    calibration: SemanticCalibration | None = None
    periods: tuple[Period, ...] = field(default=())
    named: frozenset[str] = field(default=frozenset())
    """What the cue names (relevance.cue_names), for `about_named`."""

    @classmethod
    def for_cue(
        cls,
        cue: Cue,
        doc_counts: dict[str, int],
        candidates: Iterable[StoredMemory],
        calibration: SemanticCalibration | None,
    ) -> CandidateScoring:
        lexical = LexicalScorer.for_cue(cue, doc_counts)
        names = CueNames.among(cue, lexical, [m.content for m in candidates]) if calibration is not None else None
        named = frozenset(cue.names)
        return cls(cue, lexical, names, calibration, named_periods(cue.text), named)

    def lexical(self, memory: StoredMemory, contained: bool) -> float:
        return self.lexical_scorer.raw_relevance(
            memory.content, contained, memory.context_terms, date_words(memory.occurred_on), memory.own_terms
        )

    def admitted(
        self, memories: dict[int, StoredMemory], contained: set[int], cosines: dict[int, float]
    ) -> dict[int, float]:
        """The relevance of each memory the cue admits.

        Meaning fills in where words fail: when no candidate carries enough of the cue's words to
        be admitted on them (a paraphrase), the semantic evidence counts in full; when some do,
        it counts at MEANING_WHERE_WORDS_MATCH of its strength, so it corroborates and breaks
        near-ties without lifting loosely related memories over the ones holding the cue's
        words (measured on the conversational benchmark: full strength there cost 0.03
        evidence@10 against lexical only, half strength none, and lifted evidence@1)."""
        lexical = {n: self.lexical(m, n in contained) for n, m in memories.items()}
        weight = 1.0
        if any(r >= ADMISSION_THRESHOLD for r in lexical.values()):
            weight = MEANING_WHERE_WORDS_MATCH
        out = {}
        for n, memory in memories.items():
            relevance = lexical[n]
            if self.names is not None and self.calibration is not None:
                cosine = cosines.get(n)
                relevance = raw_fused_relevance(
                    relevance,
                    -1.0 if cosine is None else cosine,
                    weight * self.names.share(memory.content),
                    self.calibration,
                )
            # Rounded (behaviour §12.1 precision) only where it can be admitted: most candidates fall short.
            if relevance < ADMISSION_THRESHOLD - 1e-6 and n not in contained:
                continue
            relevance = precise(relevance)
            if admits(self.cue, relevance, memory.content, n in contained):
                out[n] = precise(prefer_named_dates(relevance, self.periods, memory.occurred_on, memory.content))
        return self.asking_lowered(self.about_named(out, memories), memories)

    @staticmethod
    def asking_lowered(admitted: dict[int, float], memories: dict[int, StoredMemory]) -> dict[int, float]:
        """Relevance lowered for the admitted memories that ask rather than tell (relevance.asks): a
        stored question holds the words of what it asks about but not the answer, which the claims
        around it hold. What such a memory lacks of 1 grows by 1 / (1 - ASKING_WEIGHT), down to the
        admission threshold, as in `about_named`: the rule never admits nor drops a memory."""
        out = {}
        for n, relevance in admitted.items():
            out[n] = lowered(relevance, ASKING_WEIGHT) if asks(memories[n].content) else relevance
        return out

    def about_named(self, admitted: dict[int, float], memories: dict[int, StoredMemory]) -> dict[int, float]:
        """Relevance lowered for the admitted memories that are not about what the cue names, when
        some are: a memory is about what it names first (relevance.claim_subject), and one that
        only mentions what the question asks about answers it less well than its words suggest.
        What a memory lacks of 1 grows by 1 / (1 - SUBJECT_WEIGHT), down to the admission threshold,
        so the rule never admits nor drops a memory, and the memories the cue is about keep their
        relevance — and the gaps between them, against which a learned adjustment is weighed."""
        if not self.named:
            return admitted
        about = {n for n in admitted if claim_subject(memories[n].content) in self.named}
        if not about:
            return admitted
        out = {}
        for n, relevance in admitted.items():
            out[n] = relevance if n in about else lowered(relevance, SUBJECT_WEIGHT)
        return out

    def in_occasions(
        self, admitted: dict[int, float], occasion_of: dict[int, int], profiles: dict[int, TermProfile]
    ) -> dict[int, float]:
        """Relevance raised by what each admitted memory's occasion says about the cue
        (`occasion_of`: memory number -> occasion number; `profiles`: the occasions' term
        profiles): the occasion's share of the cue's ideal score fills that share of
        OCCASION_WEIGHT of what the relevance lacks of 1. Only admitted memories are raised: an
        occasion tells which of the memories the cue admits belong to what it asks about, and
        never admits one."""
        shares: dict[int, float] = {}
        out = {}
        for n, relevance in admitted.items():
            occasion = occasion_of.get(n)
            if occasion is not None and occasion in profiles and relevance < 1.0:
                share = shares.get(occasion)
                if share is None:
                    share = shares[occasion] = self.lexical_scorer.occasion_share(profiles[occasion])
                relevance = precise(relevance + OCCASION_WEIGHT * share * (1.0 - relevance))
            out[n] = relevance
        return out


def version_pairs(
    admitted: dict[int, float], memories: dict[int, StoredMemory], stored: StoredShapes[int] | None = None
) -> tuple[list[int], list[tuple[tuple[int, int], Verdict]]]:
    """The VERSIONS_COMPARED most relevant active admitted memories, and the pairs among them that
    may be two versions of one fact, (older, newer) by memory number, with their verdict; the topic
    check (`Verdict.resolve`) needs the scope's counts of `Verdict.values`, which the caller reads.
    A retired memory is left out: if it was superseded, its relevance goes to its successor
    (supersession), which a lowered relevance would take away. `stored`: the memories' stored
    shape records, read for those whose shape is not cached."""
    active = [n for n in admitted if memories[n].status == "active"]
    # Numbers grow with every Remember, so they order memories by age.
    top = sorted(sorted(active, key=lambda n: (-admitted[n], n))[:VERSIONS_COMPARED])
    return top, possible_conflicts([(n, memories[n].content) for n in top], stored)


def newer_versions_first(admitted: dict[int, float], versions: list[tuple[int, int]]) -> dict[int, float]:
    """Relevance of the older of each (older, newer) pair of versions of one fact lowered to just
    below the newer's, when it was not already below: an agent asking about a fact that changed
    should meet its current value first. Both stay admitted (the page also warns
    `conflicting_memories`) and nothing else moves. As with the other rules, a verbatim match
    keeps relevance 1 and no relevance falls below the admission threshold. The newest version of
    a chain is settled first, so v1 < v2 < v3 end in that order."""
    if not versions:
        return admitted
    out = dict(admitted)
    for older, newer in sorted(versions, key=lambda pair: -pair[1]):
        if out[older] < 1.0:
            out[older] = max(ADMISSION_THRESHOLD, min(out[older], precise(out[newer] - VERSION_GAP)))
    return out


@dataclass(frozen=True)
class VersionCheck:
    """What the version rule compared while ranking, kept with the catalog it built (not stored):
    the first page's `conflicting_memories` check asks the same question of the same pairs."""

    compared: frozenset[int]
    versions: tuple[tuple[int, int], ...]
    """(older, newer) pairs that read as two versions of one fact, the topic check resolved."""

    def covers(self, numbers: Iterable[int | None]) -> bool:
        return all(n in self.compared for n in numbers)

    def among(self, numbers: Iterable[int | None]) -> list[tuple[int, int]]:
        """The pairs of versions among `numbers`, in the page check's order (by the newer's age,
        then the older's)."""
        wanted = set(numbers)
        return sorted(((o, n) for o, n in self.versions if o in wanted and n in wanted), key=lambda p: (p[1], p[0]))


@dataclass(frozen=True)
class CatalogMemory:
    """A memory frozen in a catalog, with its signals and rendered sizes."""

    n: int
    type: str
    relevance: float
    learned: float
    score: float
    size: int
    """Bytes of the rendered content (page budgets)."""
    chars: int
    """Characters of the rendered content (accessible_field's token estimate)."""
    pathway: str = DIRECT
    redirected_from: str | None = None


@dataclass(frozen=True)
class CatalogProcedure:
    id: str
    relevance: float
    learned: float
    score: float
    size: int
    chars: int
    created: float
    """When the procedure was stored (POSIX seconds): newer first among equal scores."""


def memory_order(m: CatalogMemory) -> tuple[float, float, int]:
    return (-m.score, -m.relevance, m.n)


def top_memories(
    candidates: list[Candidate], learned: dict[int, float], limit: int
) -> list[tuple[Candidate, float, float]]:
    """The `limit` best candidates in catalog order (memory_order), each with its learned adjustment
    and score, so that only they are rendered into the catalog."""
    scored = []
    for c in candidates:
        adjustment = learned.get(c.number, 0.0)
        score = precise(c.relevance + adjustment)
        scored.append((-score, -c.relevance, c.number, adjustment, c))
    scored.sort(key=lambda x: x[:3])
    return [(c, adjustment, -neg_score) for neg_score, _, _, adjustment, c in scored[:limit]]


def procedure_order(p: CatalogProcedure) -> tuple[float, float, str]:
    return (-p.score, -p.created, p.id)


@dataclass(frozen=True)
class Catalog:
    """What a retrieval serves, frozen at creation (behaviour §5.4)."""

    memories: list[CatalogMemory]
    procedures: list[CatalogProcedure]
    relevant_total: int
    truncated: bool
    versions: VersionCheck | None = field(default=None, compare=False)
    """The version rule's comparisons, while the catalog is the one just built; not stored."""

    @classmethod
    def freeze(
        cls,
        memories: list[CatalogMemory],
        procedures: list[CatalogProcedure],
        memory_limit: int,
        procedure_limit: int,
        memory_total: int | None = None,
        versions: VersionCheck | None = None,
    ) -> Catalog:
        """`memory_total`: how many memories were ranked, when the caller passes only the best of
        them (`top_memories`)."""
        total = len(memories) if memory_total is None else memory_total
        memories = sorted(memories, key=memory_order)
        procedures = sorted(procedures, key=procedure_order)
        return cls(
            memories[:memory_limit],
            procedures[:procedure_limit],
            min(total, memory_limit),
            total > memory_limit,
            versions,
        )

    def to_json(self) -> dict[str, Any]:
        """Stored with the retrieval: each item as an array of its fields in declaration order
        (format 2; format 1, still read, had an object per item). Arrays are less than half the
        bytes and encode in about half the time (50 memories: 3.3 against 8 KB, 53 against 93 µs)."""
        return {
            "format": 2,
            "memories": [[getattr(m, f) for f in _MEMORY_FIELDS] for m in self.memories],
            "procedures": [[getattr(p, f) for f in _PROCEDURE_FIELDS] for p in self.procedures],
            "relevant_total": self.relevant_total,
            "truncated": self.truncated,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Catalog:
        if data.get("released"):  # its session has ended, and an ended session serves no page
            raise ValueError("a released catalog serves no page: its session has ended")
        if data.get("format") == 2:
            memories = [CatalogMemory(*m) for m in data["memories"]]
            procedures = [CatalogProcedure(*p) for p in data["procedures"]]
        else:
            memories = [CatalogMemory(**m) for m in data["memories"]]
            procedures = [CatalogProcedure(**p) for p in data["procedures"]]
        return cls(memories, procedures, data["relevant_total"], data["truncated"])


_MEMORY_FIELDS = tuple(f.name for f in fields(CatalogMemory))
_PROCEDURE_FIELDS = tuple(f.name for f in fields(CatalogProcedure))
