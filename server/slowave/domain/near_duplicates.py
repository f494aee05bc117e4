"""Near-duplicate and conflict flags between two claims of one scope, without a language model
(behaviour §6, Remember's `similar` and `possibly_supersedes`; §10 `conflicting_memories`).

A claim is read as a sequence of *wording* terms (retrieval's terms: stop words out, Snowball
stems, domain.terms) and *value slots*: runs of adjacent value tokens — anything with a digit
(numbers, versions such as 3.11 or v2.4.1, ports, dates, ticket ids, regions like eu-west-1),
identifiers joined by `-`, `.`, `/`, `_` or `:` (payments-api, src/app.py), and capitalised names
(Priya Raman, GitHub Actions, Postgres 16: a name and its version form one slot). Each slot
remembers the wording term before and after it, which is how two claims' slots are aligned.

* `possibly_supersedes`: the two claims are worded alike (the smaller wording mostly contained in
  the larger), they keep at least one value in common (what the claim is about: the service, the
  person), at least one slot of the older claim reappears in the newer one, aligned, with another
  value (13 → 16, Jenkins → GitHub Actions, port 8081 → 9090), and every value of the older claim
  is either kept or so replaced. That is how a fact's next version reads; which of two values is
  the subject is not knowable without understanding the sentence, so it is a flag only.
* `similar`: no value changed — the same values, worded nearly alike (a restatement, a paraphrase
  naming the same things).

Exact repeats (the same normalised text and type) are MATCHED by Remember and never flagged.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from functools import cached_property, lru_cache

from slowave.domain.terms import STOP_WORDS, stem_words, terms, words
from slowave.domain.text import normalize_claim

# The smaller claim's wording that the larger must hold for an older version of the same fact:
# half, since a changed fact is often reworded around its new value ("runs Redis 6.2" → "was
# upgraded to Redis 7.2"); the value conditions carry the rest of the evidence.
SUPERSEDE_CONTAINMENT = 0.5
# ... and, over both claims, at least a third of their distinct wording in common: a claim that
# only shares a verb and a subject with a longer one ("X runs …", "X cache runs …") is another fact.
SUPERSEDE_JACCARD = 1 / 3
# A restatement with the same values shares at least half of its wording (Jaccard); a claim with
# no values at all has only its wording to go on, so it must coincide nearly entirely.
SIMILAR_JACCARD = 0.5
SIMILAR_JACCARD_NO_VALUES = 0.8
# Three or more values in common and none changed name one specific fact, however it is worded.
SIMILAR_SHARED_VALUES = 3

_TOKEN = re.compile(r"[^\W_]+(?:[-./_:+][^\W_]+)*")
_SENTENCE_ENDS = ".!?;"
_ASCII_DIGIT = re.compile(r"[0-9]")
_JOINER = re.compile(r"[./_:+]")
_MAYBE_VALUE = re.compile(r"[-./_:+]")
_VERSION_PREFIX = re.compile(r"^v(?=\d)")
_START, _END = "^", "$"


class Relation(Enum):
    NONE = "none"
    SIMILAR = "similar"
    SUPERSEDES = "possibly_supersedes"


@dataclass(frozen=True)
class Slot:
    value: str
    head: str
    """The slot's words without digits ("postgres" of "Postgres 16"): a version change keeps it."""
    before: str
    after: str


@dataclass(frozen=True)
class ClaimShape:
    normalized: str
    wording: frozenset[str]
    slots: tuple[Slot, ...]

    @cached_property
    def values(self) -> frozenset[str]:
        return frozenset(s.value for s in self.slots)


def _has_digit(token: str) -> bool:
    """`str.isdigit` of some character (ASCII: 0-9, by a regular expression; otherwise each one)."""
    if token.isascii():
        return _ASCII_DIGIT.search(token) is not None
    return any(ch.isdigit() for ch in token)


def _is_value(token: str, sentence_start: bool, next_token: str | None) -> bool:
    if _has_digit(token):
        return True
    if _JOINER.search(token):
        return True
    if "-" in token:
        # payments-api is an identifier; on-call, read-only and follow-up are words
        return not any(part.casefold() in STOP_WORDS for part in token.split("-"))
    if not token[0].isupper() or token.casefold() in STOP_WORDS:
        return False
    if any(ch.isupper() for ch in token[1:]):  # GitHub, HTTP, PostgreSQL
        return True
    if not sentence_start:
        return True
    # A capitalised first word is a name only when a name or a number follows it (Priya Raman,
    # Python 3.11).
    if next_token is None or next_token.casefold() in STOP_WORDS:
        return False
    return next_token[0].isupper() or _has_digit(next_token)


@lru_cache(maxsize=32_768)
def may_hold_two_values(text: str) -> bool:
    """False when the text cannot hold two value slots: fewer than two of its tokens could be read
    as values (a digit, a joiner, a hyphen, or a capital that is not a stop word), and each slot
    holds one at least. A cheap test before `shape`."""
    seen = 0
    for m in _TOKEN.finditer(text):
        token = m.group()
        if (
            (token[0].isupper() and token.casefold() not in STOP_WORDS)
            or _has_digit(token)
            or _MAYBE_VALUE.search(token)
        ):
            seen += 1
            if seen == 2:
                return True
    return False


def _value_form(token: str) -> str:
    return _VERSION_PREFIX.sub("", token.casefold())


@lru_cache(maxsize=32_768)
def shape(text: str) -> ClaimShape:
    """The wording terms and value slots of a claim. Cached by text: a stored memory's text never
    changes, and Remember's flags and the page check compare the same texts again and again."""
    matches = list(_TOKEN.finditer(text))
    tokens = [m.group() for m in matches]
    # Each token read as a value, or as the words it holds (stop words out), stemmed in one call.
    kinds: list[bool] = []
    words_of: list[list[str]] = []
    previous_end = 0
    for i, m in enumerate(matches):
        # A sentence starts at the first token and after `.`, `!`, `?` or `;` (white space between).
        gap = text[previous_end : m.start()].rstrip()
        sentence_start = i == 0 or (gap != "" and gap[-1] in _SENTENCE_ENDS)
        following = tokens[i + 1] if i + 1 < len(tokens) else None
        value = _is_value(tokens[i], sentence_start, following)
        kinds.append(value)
        words_of.append([] if value else [w for w in words(tokens[i]) if w not in STOP_WORDS])
        previous_end = m.end()
    flat = [w for ws in words_of for w in ws]
    stems = iter(stem_words(flat) if flat else [])
    items: list[tuple[str, str]] = []  # ("w", term) or ("v", value), slots already merged
    slot_words: list[list[str]] = []
    previous_end = 0
    previous_value = False  # a stop word between two values separates them, though it leaves no term
    for m, token, value, ws in zip(matches, tokens, kinds, words_of):
        if value:
            if previous_value and text[previous_end : m.start()].isspace():
                slot_words[-1].append(token)
                items[-1] = ("v", " ".join(_value_form(w) for w in slot_words[-1]))
            else:
                slot_words.append([token])
                items.append(("v", _value_form(token)))
        else:
            items.extend(("w", next(stems)) for _ in ws)
        previous_value = value
        previous_end = m.end()
    slots = []
    k = 0
    last_word = _START
    before_of: list[str] = []
    for kind, term in items:
        before_of.append(last_word)
        if kind == "w":
            last_word = term
    next_word = _END
    after_of: list[str] = [_END] * len(items)
    for i in range(len(items) - 1, -1, -1):
        after_of[i] = next_word
        if items[i][0] == "w":
            next_word = items[i][1]
    for i, (kind, slot_value) in enumerate(items):
        if kind != "v":
            continue
        head = " ".join(w.casefold() for w in slot_words[k] if not _has_digit(w))
        slots.append(Slot(slot_value, head, before_of[i], after_of[i]))
        k += 1
    return ClaimShape(normalize_claim(text), frozenset(t for kind, t in items if kind == "w"), tuple(slots))


def _aligned(old: Slot, new: Slot) -> bool:
    """The same slot of one fact in two claims: a versioned name keeps its name around a new
    number (Postgres 13 → 16; Node.js 18 and Redis 6 are two things); other values sit between
    the same words, or next to the same term (not a sentence boundary) on one side."""
    if old.head and new.head and old.head != old.value and new.head != new.value:
        return old.head == new.head
    if old.before == new.before and old.after == new.after:
        return True
    return (old.before == new.before and old.before != _START) or (old.after == new.after and old.after != _END)


def _replacements(gone: list[Slot], added: list[Slot]) -> list[Slot]:
    """The older claim's values that the newer replaces: each paired with one new value, a name
    kept around a new number first (Redis 7.0 → 7.2 before a ticket beside it)."""
    free = list(added)
    out = []
    for same_name in (True, False):
        for old in gone:
            if old in out:
                continue
            match = next(
                (new for new in free if _aligned(old, new) and (not same_name or (old.head and old.head == new.head))),
                None,
            )
            if match is not None:
                free.remove(match)
                out.append(old)
    return out


Mentions = Callable[[str], int]
"""How many memories of the scope mention a value (the scope's index statistics)."""


@dataclass(frozen=True)
class Verdict:
    """How two claims relate, before the scope's counts are asked: a `possibly_supersedes` whose
    replaced value is a name still depends on the topic check (`topic`)."""

    relation: Relation
    topic: tuple[str, tuple[str, ...]] | None = None
    """(the replaced value, the kept names): not a new version when the scope mentions the replaced
    value at least as often as every kept name (the topic itself changed)."""

    def resolve(self, mentions: Mentions | None) -> Relation:
        if self.topic is None or mentions is None:
            return self.relation
        replaced, kept = self.topic
        if mentions(replaced) >= max(mentions(v) for v in kept):
            return Relation.NONE  # the topic itself changed: the same statement about another thing
        return self.relation

    def values(self) -> tuple[str, ...]:
        """The values the topic check asks the scope's counts for."""
        return () if self.topic is None else (self.topic[0], *self.topic[1])


_NONE = Verdict(Relation.NONE)
_SIMILAR = Verdict(Relation.SIMILAR)


def relation(newer: str, older: str, mentions: Mentions | None = None) -> Relation:
    """How a newly remembered claim relates to an older active claim of the same scope.

    `mentions` tells the claim's topic from its other names: the name the scope talks about most
    (a service in a project's scope). A change keeps its topic; without `mentions` the topic is
    not known, and only the other conditions apply.
    """
    return compare(shape(newer), shape(older)).resolve(mentions)


def compare(a: ClaimShape, b: ClaimShape) -> Verdict:
    """`relation` of two parsed claims (a newer, b older), the topic check left to the caller, so
    that the counts of every pair's values can be read at once, and only for pairs that need them."""
    if a.normalized == b.normalized:
        return _SIMILAR  # the same text under another type (same type is MATCHED)
    a_values, b_values = a.values, b.values
    if a_values and b_values and a_values.isdisjoint(b_values):
        return _NONE  # nothing in common that either flag could rest on
    shared_words = len(a.wording & b.wording)
    shared_values = a_values & b_values
    if not shared_words and len(shared_values) < SIMILAR_SHARED_VALUES:
        # No wording in common: neither flag's wording condition can hold, and too few values in
        # common to name one fact alone.
        return _NONE
    union_words = len(a.wording | b.wording)
    jaccard = shared_words / union_words if union_words else 0.0
    smaller = min(len(a.wording), len(b.wording))
    containment = shared_words / smaller if smaller else 0.0
    if a_values <= b_values or b_values <= a_values:  # nothing replaced, at most left out or added
        return Verdict(_similar(a, b, shared_values, jaccard, shared_words))
    if containment < SUPERSEDE_CONTAINMENT or jaccard < SUPERSEDE_JACCARD:
        return _NONE  # (checked before the slots: the cheaper test; both must hold for a version)
    gone = [slot for slot in b.slots if slot.value not in a_values]
    replaced = _replacements(gone, [slot for slot in a.slots if slot.value not in b_values])
    # An older version of the same fact: one value of the older claim replaced in the same place,
    # the others kept or, if they are bare references (a ticket, a date: no name in them), left out.
    if len(replaced) != 1 or any(old.head for old in gone if old not in replaced):
        return _NONE
    # Among the kept values, a name without digits: what the claim is about (a service, a person,
    # a product), not only numbers, which are what changes.
    kept_names = [slot.value for slot in b.slots if slot.value in shared_values and slot.head == slot.value]
    if not kept_names:
        return _NONE
    if [v for v in (s.value for s in a.slots) if v in shared_values] != [
        v for v in (s.value for s in b.slots) if v in shared_values
    ]:
        return _NONE  # the kept values swapped places ("A calls B" and "B calls A")
    old = replaced[0]
    if old.head:
        return Verdict(Relation.SUPERSEDES, (old.value, tuple(kept_names)))
    return Verdict(Relation.SUPERSEDES)


def _similar(
    a: ClaimShape, b: ClaimShape, shared_values: frozenset[str], jaccard: float, shared_words: int
) -> Relation:
    """No value replaced: the same fact when both hold the same values and the words coincide, or
    when the values in common are enough to name one fact."""
    if not a.values:
        return Relation.SIMILAR if jaccard >= SIMILAR_JACCARD_NO_VALUES else Relation.NONE
    if a.values == b.values and jaccard >= SIMILAR_JACCARD:
        return Relation.SIMILAR
    if len(shared_values) >= SIMILAR_SHARED_VALUES or (len(shared_values) >= 2 and shared_words):
        return Relation.SIMILAR
    return Relation.NONE


def conflicting_pairs(items: list[tuple[str, str]], mentions: Mentions | None = None) -> list[tuple[str, str]]:
    """(older, newer) ids of the pairs among `items` (id, text; oldest first) where the newer
    possibly supersedes the older."""
    return [pair for pair, verdict in possible_conflicts(items) if verdict.resolve(mentions) is Relation.SUPERSEDES]


def possible_conflicts(items: list[tuple[str, str]]) -> list[tuple[tuple[str, str], Verdict]]:
    """The pairs of `items` (id, text; oldest first) that may read as two versions of one fact,
    (older id, newer id) with their verdict, the topic check left to the caller (`Verdict.values`
    names what it asks). Each text is parsed once."""
    # A new version keeps a name and replaces another value: both claims hold two slots at least,
    # which a text with fewer than two tokens that could be values cannot (it is not even parsed).
    shapes = [(item_id, shape(text)) for item_id, text in items if may_hold_two_values(text)]
    shapes = [(item_id, s) for item_id, s in shapes if len(s.slots) >= 2]
    out = []
    for j, (new_id, new) in enumerate(shapes):
        for old_id, old in shapes[:j]:
            verdict = compare(new, old)
            if verdict.relation is Relation.SUPERSEDES:
                out.append(((old_id, new_id), verdict))
    return out


def value_terms(value: str) -> list[str]:
    """The index terms of a value; the rarest of them bounds how many memories mention it."""
    return terms(value)
