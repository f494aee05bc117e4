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

from slowave.domain.terms import STOP_WORDS, terms
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
_SENTENCE_END = re.compile(r"[.!?;]\s*$")
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


def _is_value(token: str, sentence_start: bool, next_token: str | None) -> bool:
    if any(ch.isdigit() for ch in token):
        return True
    if any(ch in "./_:+" for ch in token):
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
    return next_token[0].isupper() or any(ch.isdigit() for ch in next_token)


def _value_form(token: str) -> str:
    return _VERSION_PREFIX.sub("", token.casefold())


@lru_cache(maxsize=32_768)
def shape(text: str) -> ClaimShape:
    """The wording terms and value slots of a claim."""
    matches = list(_TOKEN.finditer(text))
    items: list[tuple[str, str]] = []  # ("w", term) or ("v", value), slots already merged
    slot_words: list[list[str]] = []
    previous_end = 0
    previous_value = False  # a stop word between two values separates them, though it leaves no term
    for i, m in enumerate(matches):
        token = m.group()
        gap = text[previous_end : m.start()]
        sentence_start = i == 0 or bool(_SENTENCE_END.search(text[: m.start()]))
        following = matches[i + 1].group() if i + 1 < len(matches) else None
        if _is_value(token, sentence_start, following):
            adjacent = previous_value and gap.isspace()
            if adjacent:
                slot_words[-1].append(token)
                items[-1] = ("v", " ".join(_value_form(w) for w in slot_words[-1]))
            else:
                slot_words.append([token])
                items.append(("v", _value_form(token)))
            previous_value = True
        else:
            items.extend(("w", t) for t in terms(token))
            previous_value = False
        previous_end = m.end()
    slots = []
    k = 0
    for i, (kind, value) in enumerate(items):
        if kind != "v":
            continue
        before = next((t for kd, t in reversed(items[:i]) if kd == "w"), _START)
        after = next((t for kd, t in items[i + 1 :] if kd == "w"), _END)
        head = " ".join(w.casefold() for w in slot_words[k] if not any(ch.isdigit() for ch in w))
        slots.append(Slot(value, head, before, after))
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


def relation(newer: str, older: str, mentions: Mentions | None = None) -> Relation:
    """How a newly remembered claim relates to an older active claim of the same scope.

    `mentions` tells the claim's topic from its other names: the name the scope talks about most
    (a service in a project's scope). A change keeps its topic; without `mentions` the topic is
    not known, and only the other conditions apply.
    """
    a, b = shape(newer), shape(older)
    if a.normalized == b.normalized:
        return Relation.SIMILAR  # the same text under another type (same type is MATCHED)
    if a.values and b.values and a.values.isdisjoint(b.values):
        return Relation.NONE  # nothing in common that either flag could rest on
    shared_words = len(a.wording & b.wording)
    union_words = len(a.wording | b.wording)
    jaccard = shared_words / union_words if union_words else 0.0
    smaller = min(len(a.wording), len(b.wording))
    containment = shared_words / smaller if smaller else 0.0
    shared_values = a.values & b.values
    if a.values <= b.values or b.values <= a.values:  # nothing replaced, at most left out or added
        return _similar(a, b, shared_values, jaccard, shared_words)
    gone = [slot for slot in b.slots if slot.value not in a.values]
    replaced = _replacements(gone, [slot for slot in a.slots if slot.value not in b.values])
    # An older version of the same fact: one value of the older claim replaced in the same place,
    # the others kept or, if they are bare references (a ticket, a date: no name in them), left out.
    if len(replaced) != 1 or any(old.head for old in gone if old not in replaced):
        return Relation.NONE
    if containment < SUPERSEDE_CONTAINMENT or jaccard < SUPERSEDE_JACCARD:
        return Relation.NONE
    # Among the kept values, a name without digits: what the claim is about (a service, a person,
    # a product), not only numbers, which are what changes.
    kept_names = [slot.value for slot in b.slots if slot.value in shared_values and slot.head == slot.value]
    if not kept_names:
        return Relation.NONE
    if [v for v in (s.value for s in a.slots) if v in shared_values] != [
        v for v in (s.value for s in b.slots) if v in shared_values
    ]:
        return Relation.NONE  # the kept values swapped places ("A calls B" and "B calls A")
    old = replaced[0]
    if mentions is not None and old.head and mentions(old.value) >= max(mentions(v) for v in kept_names):
        return Relation.NONE  # the topic itself changed: the same statement about another thing
    return Relation.SUPERSEDES


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
    return [
        (old_id, new_id)
        for j, (new_id, new_text) in enumerate(items)
        for old_id, old_text in items[:j]
        if relation(new_text, old_text, mentions) is Relation.SUPERSEDES
    ]


def value_terms(value: str) -> list[str]:
    """The index terms of a value; the rarest of them bounds how many memories mention it."""
    return terms(value)
