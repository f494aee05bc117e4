"""Near-duplicate and conflict flags between two claims of one scope, without a language model
(behaviour §6, Remember's `similar` and `possibly_supersedes`; §10 `conflicting_memories`).

A claim is read as a sequence of *wording* terms (retrieval's terms: stop words out, Snowball
stems, domain.terms) and *value slots*: runs of adjacent value tokens — anything with a digit
(numbers, versions such as 3.11 or v2.4.1, ports, dates, ticket ids, regions like eu-west-1),
identifiers joined by `-`, `.`, `/`, `_` or `:` (payments-api, src/app.py), and capitalised names
(Priya Raman, GitHub Actions, Postgres 16: a name and its version form one slot). Each slot
remembers the wording term before and after it, which is how two claims' slots are aligned.

Change phrases are read apart: change words ("moved", "upgraded", "now"), side clauses ("since
the exporter change", "after the March upgrade", "Since 2024-05-01, …"), time phrases ("last
quarter") and former values (the X of "changed from X to Y" or "X -> Y") say that a value changed,
not what the fact is; the rest is the claim's *core* wording.

* `possibly_supersedes`: the newer claim's core wording says nothing the older does not, and leaves
  out at most one of its terms (the verb its change words replace: "is hosted in" → "was migrated
  to"); and either one value of the older claim reappears, aligned, with another value (13 → 16,
  Jenkins → GitHub Actions, port 8081 → 9090), every other value kept or a bare reference, or no
  value changes and the one word that differs is the value, last in the claim where values stand
  ("is master" → "is main", "daily" → "weekly"). What the claim is about must be kept: a name, or
  two terms of its wording; a replaced lowercase identifier (billing-db) is what a claim is about
  unless it stands where values do. That is how a fact's next version reads; which of two names is
  the subject is not knowable without understanding the sentence, so it is a flag only.
* `similar`: no value changed — the same values, worded nearly alike (a restatement, a paraphrase
  naming the same things).

Exact repeats (the same normalised text and type) are MATCHED by Remember and never flagged.
"""

from __future__ import annotations

import json
import re
import sys
import threading
import zlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, NamedTuple, TypeVar

from slowave.domain.terms import STOP_WORDS, TERMS_VERSION, stem_words, terms, words
from slowave.domain.text import normalize_claim

# Without a kept name, what a claim is about is its wording: at least this many terms kept.
SUPERSEDE_KEPT_TERMS = 2
# A restatement with the same values shares at least half of its wording (Jaccard); a claim with
# no values at all has only its wording to go on, so it must coincide nearly entirely.
SIMILAR_JACCARD = 0.5
SIMILAR_JACCARD_NO_VALUES = 0.8
# Three or more values in common and none changed name one specific fact, however it is worded.
SIMILAR_SHARED_VALUES = 3

_TOKEN = re.compile(r"([^\W_]+(?:[-./_:+][^\W_]+)*)")  # one group: split keeps the tokens
_SENTENCE_ENDS = ".!?;"
# Any of these between two tokens ends a clause: a side clause (below) stops there.
_CLAUSE_ENDS = re.compile(r"[.!?;:,()\[\]\u2014\u2013]| - ")
_SIDE_CLAUSE_CLOSE = re.compile(r"^[^.!?;]*[,\u2014\u2013][^.!?;]*$| - ")
_ARROW = re.compile(r"->|\u2192|=>")
_ASCII_DIGIT = re.compile(r"[0-9]")
_JOINER = re.compile(r"[./_:+]")
_MAYBE_VALUE = re.compile(r"[-./_:+]")
_START, _END = "^", "$"
_new_tuple = tuple.__new__

# Words that say a value changed, not what the fact is about ("was moved to", "now", "renewed"):
# a newer version may add them, or put one where the older claim's verb was ("is hosted in" →
# "was migrated to"). Stems, as the wording holds them.
CHANGE_WORDS = frozenset(
    stem_words(
        """change changed changes move moved moves migrate migrated upgrade upgraded downgrade downgraded
        bump bumped raise raised lower lowered increase increased decrease decreased reduce reduced
        scale scaled switch switched rename renamed update updated replace replaced extend extended
        shorten shortened renew renewed reassign reassigned transfer transferred swap swapped grew grown
        double doubled halve halved convert converted relocate relocated shift shifted revise revised
        adjust adjusted currently today new newly latest instead longer starting effective recently
        yesterday lately went""".split()
    )
)
# Words opening a side clause — when or why a value changed ("since the exporter change", "after the
# March upgrade", "Since 2024-05-01, …", "as of …"): up to the end of the clause, what a newer claim
# says there is not part of the fact. ("as" only as "as of".)
SIDE_CLAUSE_OPENERS = frozenset("since after following because due while until starting effective thanks".split())
# A value preceded by one of these is the one replaced ("replacing Jenkins", "previously 30"), as
# is the first of "changed from X to Y" and of "X -> Y": not a value the claim holds.
FORMER_MARKERS = frozenset("previously formerly replacing replaces".split())
# "last quarter", "this week": when a value changed, not part of the fact.
_TIME_DEICTICS = frozenset("last this next earlier".split())
TIME_NOUNS = frozenset("week month quarter year sprint release weekend night morning".split())
# The word before a value written as a plain word: a copula, or "to" ("is master", "set to info").
VALUE_LEADS = frozenset("is are was were be been becomes became remains stays to as at".split())
# Words naming where a fact holds, not a value of it: staging and production hold distinct facts.
QUALIFIERS = frozenset(
    stem_words(
        """staging production prod dev development test testing qa canary sandbox preview local demo uat
        preprod""".split()
    )
)


class Relation(Enum):
    NONE = "none"
    SIMILAR = "similar"
    SUPERSEDES = "possibly_supersedes"


Slot = tuple[str, str, str, str, bool, bool, tuple[str, str]]
"""A run of adjacent value tokens (module docstring), read by the indices below. A plain tuple of
strings and booleans, not a named tuple or a dataclass: CPython's cyclic garbage collector stops
tracking an exact tuple of such items, and the shape cache holds several slots for each of up to
131k claims (`ShapeCache`)."""
# The fields of a slot (Final: a type checker then knows each field's type).
VALUE: Final = 0  # the value, case folded ("postgres 16", "8080", "payments-api")
HEAD: Final = 1  # its words without digits ("postgres" of "Postgres 16"): a version change keeps it
BEFORE: Final = 2  # the wording term before the slot (`_START` at the claim's start)
AFTER: Final = 3  # the wording term after it (`_END`), side clauses left out
# A lowercase identifier without digits (payments-api, src/app.py): what a claim is about as often
# as a value of it.
IDENTIFIER: Final = 4
SIDE: Final = 5  # in a side clause ("after the March upgrade"): not part of the fact
FRAME: Final = 6  # the two terms before the slot, change words left out


class ClaimShape(NamedTuple):
    """A claim as the rules compare it. A named tuple: the shape cache holds it packed
    (`ShapeCache`) and builds it again on each get, by `tuple.__new__` in 0.13 µs against 0.80 µs
    for a frozen dataclass of the same fields (0.25 µs by the named tuple's own constructor)."""

    normalized: str
    wording: frozenset[str]
    slots: tuple[Slot, ...]
    core: frozenset[str] = frozenset()
    """The wording outside side clauses and change words: what the fact itself says."""
    last: tuple[str, str] = ("", "")
    """The last item of the main clause (the one naming the most), side clauses and bare references
    (a date, a ticket) left out: ("w", term) or ("v", value) — where a fact's value usually stands
    ("… is master")."""
    last_is_value: bool = False
    """The last item is a word written where a value stands: after a copula or "to" ("is master",
    "renamed to main"), or an adverb such as "weekly"; not a noun of a phrase ("the billing
    dashboard")."""
    values: frozenset[str] = frozenset()
    """The slots' values."""


def _has_digit(token: str) -> bool:
    """`str.isdigit` of some character (ASCII: 0-9, by a regular expression; otherwise each one)."""
    if token.isascii():
        return _ASCII_DIGIT.search(token) is not None
    return any(ch.isdigit() for ch in token)


def _opens_sentence(gap: str) -> bool:
    """Whether the text before a token (not the first) ends a sentence: `.`, `!`, `?` or `;`, white
    space after it."""
    stripped = gap.rstrip()
    return stripped != "" and stripped[-1] in _SENTENCE_ENDS


def _is_value(token: str, word: str, sentence_start: bool, next_token: str | None, next_word: str | None) -> bool:
    """Whether a token is (part of) a value; `word` and `next_word` are it and the next token case
    folded."""
    # Letters only (most tokens): no digit (no character is both), no joiner, no hyphen.
    if not token.isalpha():
        if _has_digit(token) or _JOINER.search(token):
            return True
        if "-" in token:
            # payments-api is an identifier; on-call, read-only and follow-up are words
            return not any(part in STOP_WORDS for part in word.split("-"))
    if not token[0].isupper() or word in STOP_WORDS:
        return False
    if any(ch.isupper() for ch in token[1:]):  # GitHub, HTTP, PostgreSQL
        return True
    if not sentence_start:
        return True
    # A capitalised first word is a name only when a name or a number follows it (Priya Raman,
    # Python 3.11).
    if next_token is None or next_word in STOP_WORDS:
        return False
    return next_token[0].isupper() or _has_digit(next_token)


def _value_form(word: str) -> str:
    """A case-folded token as a value: versions compare without their v (v2.4.1 is 2.4.1; a digit
    is what `\\d` matches, `str.isdecimal`)."""
    if word.startswith("v") and word[1:2].isdecimal():
        word = word[1:]
    return sys.intern(word)


# A claim's shape is parsed once, when it is remembered, and stored with its memory as a record
# (`shape_record`, memories.claim_shape): Remember's flags and Activate's version check read the
# records of the older claims they compare that this cache does not hold (≈ 10 µs to read against
# ≈ 48 µs to parse). A process that has just started no longer parses them all again, nor does one
# serving a scope larger than the cache. The cache still holds a 100k-memory scope (≈ 118 MB
# packed, `pack`; ≈ 209 MB as parsed): measured on bench/perf.py's 100k store, whose templated claims each compare
# with ten older ones drawn from the whole scope, a cache of 32k shapes cut one process's memory
# by ≈ 70 MB but batch Remember by 15–24 % (bench/results/history.md, 2026-12-06 10:25).
SHAPE_CACHE = 131_072


Packed = tuple[str, tuple[str, ...], tuple[Slot, ...], tuple[str, ...] | None, tuple[str, str], bool]
"""A shape as the cache holds it (`pack`): its term sets as tuples, its core None where it is its
wording, its values left to its slots."""


def pack(parsed: ClaimShape) -> Packed:
    """A shape as tuples of strings, booleans and tuples only, which CPython's cyclic garbage
    collector stops tracking at the collections that reach it. Held as parsed, a shape left 7.7 objects
    tracked (its frozensets are always tracked; the named tuples and the dataclass it was built of
    too), so every full collection walked the whole cache: ≈ 0.25 s over 100k shapes, a stall of
    every request in flight (bench/results/history.md, 2026-12-07). Packed, it also takes about
    half the memory (≈ 820 bytes against ≈ 1,450, strings aside)."""
    core = None if parsed.core is parsed.wording else tuple(parsed.core)
    return (parsed.normalized, tuple(parsed.wording), parsed.slots, core, parsed.last, parsed.last_is_value)


def unpack(packed: Packed) -> ClaimShape:
    """The shape `pack` packed, its term sets frozensets again for the comparisons."""
    normalized, wording_terms, slots, core_terms, last, last_is_value = packed
    wording = frozenset(wording_terms)
    core = wording if core_terms is None else frozenset(core_terms)
    values = frozenset([slot[VALUE] for slot in slots])
    return _new_tuple(ClaimShape, (normalized, wording, slots, core, last, last_is_value, values))


class ShapeCache:
    """The shapes of the claims compared last, by text (least recently used out), held packed
    (`pack`); thread-safe."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._shapes: OrderedDict[str, Packed] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, text: str) -> ClaimShape | None:
        with self._lock:
            found = self._shapes.get(text)
            if found is None:
                return None
            self._shapes.move_to_end(text)
        return unpack(found)

    def put(self, text: str, parsed: ClaimShape) -> None:
        packed = pack(parsed)
        with self._lock:
            self._shapes[text] = packed
            if len(self._shapes) > self.capacity:
                self._shapes.popitem(last=False)

    def __len__(self) -> int:
        return len(self._shapes)


SHAPES = ShapeCache(SHAPE_CACHE)


def shape(text: str) -> ClaimShape:
    """The wording terms and value slots of a claim, parsed (`parse_claim`) unless cached: a stored
    memory's text never changes, and the same claims are compared again and again."""
    found = SHAPES.get(text)
    if found is None:
        found = parse_claim(text)
        SHAPES.put(text, found)
    return found


def parse_claim(text: str) -> ClaimShape:
    """The wording terms and value slots of a claim (module docstring)."""
    # The tokens and the text before each (`_TOKEN` is one group: split keeps what it matches).
    parts = _TOKEN.split(text)
    tokens = parts[1::2]
    gaps = parts[0::2]
    folded = [t.casefold() for t in tokens]
    n = len(tokens)
    # Each token read as a value (None), or as the words it holds (stop words out), stemmed in one
    # call.
    words_of: list[Sequence[str] | None] = []
    flat: list[str] = []
    for i, (token, word) in enumerate(zip(tokens, folded)):
        if token.islower() and token.isalpha():  # a lowercase word (most tokens)
            is_value = False
        else:
            following = i + 1 < n
            is_value = _is_value(
                token,
                word,
                i == 0 or _opens_sentence(gaps[i]),
                tokens[i + 1] if following else None,
                folded[i + 1] if following else None,
            )
        if is_value:
            words_of.append(None)
        elif word in STOP_WORDS:
            words_of.append(())
        elif word.isascii() and word.isalpha():  # one word (most tokens)
            words_of.append((word,))
            flat.append(word)
        else:
            kept = [w for w in words(token) if w not in STOP_WORDS]
            words_of.append(kept)
            flat += kept
    stems = iter(stem_words(flat) if flat else ())
    # Items: ("w", term) or ("v", value), slots already merged; each with whether it is in a side
    # clause, which clause holds it and the token it starts at; and the tokens of each slot.
    items: list[tuple[str, str]] = []
    item_side: list[bool] = []
    item_clause: list[int] = []
    item_token: list[int] = []
    slot_tokens: list[list[int]] = []
    wording: set[str] = set()
    previous_value = False  # a stop word between two values separates them, though it leaves no term
    in_side = False
    clause = 0
    change_in_clause = False
    former = False  # the current slot is the value replaced ("from X to Y"): left out
    # A side clause opening a sentence is one only if a comma (or a dash) closes it, with the fact
    # after it ("Since 2024-05-01, Marco Silva is …"); "After PAY-12 we learned that …" is the fact.
    pending: int | None = None  # where such a side clause began, until it is closed
    for i, (gap, word, ws) in enumerate(zip(gaps, folded, words_of)):
        # Punctuation between two tokens ends a clause (most gaps are a space).
        if i and gap != " " and _CLAUSE_ENDS.search(gap):
            if pending is not None and not _SIDE_CLAUSE_CLOSE.search(gap):
                item_side[pending:] = [False] * (len(item_side) - pending)
            pending = None
            in_side = change_in_clause = False
            clause += 1
        if word in SIDE_CLAUSE_OPENERS or (word == "as" and i + 1 < n and folded[i + 1] == "of"):
            if not in_side and (i == 0 or _opens_sentence(gap)):
                pending = len(items)
            in_side = True
        if ws is None:  # a value
            if previous_value and gap.isspace():
                if not former:
                    slot_tokens[-1].append(i)
            else:
                if previous_value and not former and _ARROW.search(gap) and items and items[-1][0] == "v":
                    # "X -> Y": X is the value replaced
                    items.pop(), item_side.pop(), item_clause.pop(), item_token.pop(), slot_tokens.pop()
                before = folded[i - 1] if i else ""
                former = (
                    (before == "from" and change_in_clause)
                    or before in FORMER_MARKERS
                    or (before == "of" and i > 1 and folded[i - 2] == "instead")
                )
                if not former:
                    slot_tokens.append([i])
                    items.append(("v", ""))  # its value once the slot is complete
                    item_side.append(in_side)
                    item_clause.append(clause)
                    item_token.append(i)
            previous_value = True
            continue
        former = previous_value = False
        if not ws:
            continue
        # "last quarter", "this week": when, not what
        side = in_side or bool(
            (word in TIME_NOUNS and i and folded[i - 1] in _TIME_DEICTICS)
            or (word in _TIME_DEICTICS and i + 1 < n and folded[i + 1] in TIME_NOUNS)
        )
        for _ in ws:
            term = sys.intern(next(stems))
            items.append(("w", term))
            item_side.append(side)
            item_clause.append(clause)
            item_token.append(i)
            wording.add(term)
            change_in_clause = change_in_clause or term in CHANGE_WORDS
    if pending is not None:
        item_side[pending:] = [False] * (len(item_side) - pending)
    # The term after each item, side clauses left out (a side clause after a value is not its frame).
    after_of: list[str] = [_END] * len(items)
    next_word = _END
    for k in range(len(items) - 1, -1, -1):
        after_of[k] = next_word
        kind, term = items[k]
        if kind == "w" and not item_side[k]:
            next_word = term
    slots = []
    core = set()
    # The term before each item, and the two before it with change words left out: where a value
    # stood before its verb was replaced ("is hosted in X" → "was migrated to Y").
    last_word = _START
    frame = (_START, _START)
    named: list[int] = []  # the items that can be the last (below): the core's terms, names outside side clauses
    slot_index = 0
    for k, (kind, term) in enumerate(items):
        if kind == "w":
            change = term in CHANGE_WORDS
            if not change and not item_side[k]:
                core.add(term)
                named.append(k)
            last_word = term
            if not change:
                frame = (term, frame[0])
            continue
        # The slot's value, its tokens without digits (its head) and whether one of those is a
        # lowercase identifier; a slot of one token (most) read without the joins.
        raw = slot_tokens[slot_index]
        slot_index += 1
        if len(raw) == 1:
            token, word = tokens[raw[0]], folded[raw[0]]
            value = _value_form(word)
            no_digit = not _has_digit(token)
            head = sys.intern(word) if no_digit else ""
            identifier = no_digit and token.islower() and _MAYBE_VALUE.search(token) is not None
        else:
            no_digits = [j for j in raw if not _has_digit(tokens[j])]
            value = " ".join([_value_form(folded[j]) for j in raw])
            head = sys.intern(" ".join([folded[j] for j in no_digits]))
            identifier = any(tokens[j].islower() and _MAYBE_VALUE.search(tokens[j]) for j in no_digits)
        items[k] = ("v", value)
        slots.append((value, head, last_word, after_of[k], identifier, item_side[k], frame))
        if head and not item_side[k]:
            named.append(k)
    # The last name or term of the main clause (the one naming the most, the first of equals;
    # items come clause by clause).
    last: tuple[str, str] = ("", "")
    value_word = False
    if named:
        best = count = 0
        current = main = last_k = -1
        for k in named:
            if item_clause[k] != current:
                current, count = item_clause[k], 0
            count += 1
            if count > best:
                best, main = count, current
            if current == main:
                last_k = k
        last = items[last_k]
        t = item_token[last_k]
        adverb = last[0] == "w" and folded[t].endswith("ly")  # daily, nightly, quarterly
        value_word = adverb or (folded[t - 1] if t else "") in VALUE_LEADS
    wording_terms = frozenset(wording)
    core_terms = frozenset(core)
    return ClaimShape(
        normalize_claim(text),
        wording_terms,
        tuple(slots),
        wording_terms if core_terms == wording_terms else core_terms,  # one set where they coincide (most claims)
        last,
        value_word,
        frozenset([slot[VALUE] for slot in slots]),
    )


# ------------------------------------------------------------------ shapes stored with their memories

# Names the parse a stored record holds: its layout and every rule `parse_claim` reads a claim by
# (the terms' stemmer and stop words included). A record of another version is never decoded; the
# claim is parsed again (and the server's start stores the record anew: service.shape_backfill).
# Bump SHAPE_RULES with any change of parse_claim or of the word lists above.
SHAPE_RULES = 1
SHAPE_RECORD_VERSION = f"s{SHAPE_RULES}-{zlib.crc32(TERMS_VERSION.encode()):08x}"
SHAPE_RECORD_PREFIX = json.dumps([SHAPE_RECORD_VERSION])[:-1] + ","


def shape_record(parsed: ClaimShape) -> str:
    """A claim's shape as stored with its memory: compact JSON, its version first. The normalised
    text and the values are not stored (the content gives the one, the slots the other)."""
    slots = [
        [
            slot[VALUE],
            0 if slot[HEAD] == slot[VALUE] else slot[HEAD],
            slot[BEFORE],
            slot[AFTER],
            int(slot[IDENTIFIER]) | int(slot[SIDE]) << 1,
            *slot[FRAME],
        ]
        for slot in parsed.slots
    ]
    core = 0 if parsed.core is parsed.wording else sorted(parsed.core)
    fields = [SHAPE_RECORD_VERSION, sorted(parsed.wording), core, slots, *parsed.last, int(parsed.last_is_value)]
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))


def shape_from_record(text: str, record: str | None) -> ClaimShape | None:
    """The shape a record holds for the claim `text`, or None when there is no record of this
    version (the claim is then parsed)."""
    if not record or not record.startswith(SHAPE_RECORD_PREFIX):
        return None
    _version, wording_terms, core_terms, slot_fields, last_kind, last_item, last_is_value = json.loads(record)
    # Terms and values interned as the parse interns them: a cached shape shares its strings with
    # every other (≈ a third of a shape's memory).
    intern = sys.intern
    wording = frozenset(map(intern, wording_terms))
    slots = tuple(
        [
            (
                intern(value),
                intern(value if head == 0 else head),
                intern(before),
                intern(after),
                bool(flags & 1),
                bool(flags & 2),
                (intern(f0), intern(f1)),
            )
            for value, head, before, after, flags, f0, f1 in slot_fields
        ]
    )
    # tuple.__new__: the named tuple's own constructor is a Python function.
    return _new_tuple(
        ClaimShape,
        (
            normalize_claim(text),
            wording,
            slots,
            wording if core_terms == 0 else frozenset(map(intern, core_terms)),
            (last_kind, intern(last_item)),
            bool(last_is_value),
            frozenset([slot[VALUE] for slot in slots]),
        ),
    )


Id = TypeVar("Id")
"""Whatever names an item of `possible_conflicts`: a memory id, or a memory number."""

StoredShapes = Callable[[list[Id]], dict[Id, str | None]]
"""The stored shape records of the claims an iterable of ids names (absent or None: none)."""


def shapes_of(items: Sequence[tuple[Id, str]], stored: StoredShapes[Id] | None = None) -> list[ClaimShape]:
    """The shape of each (id, text): from the process cache, else from the claim's stored record
    (`stored`, asked once for all the claims not cached), else parsed."""
    out: list[ClaimShape | None] = [SHAPES.get(text) for _, text in items]
    missing = [i for i, found in enumerate(out) if found is None]
    if missing:
        records = stored([items[i][0] for i in missing]) if stored is not None else {}
        for i in missing:
            item_id, text = items[i]
            found = shape_from_record(text, records.get(item_id)) or parse_claim(text)
            SHAPES.put(text, found)
            out[i] = found
    return out  # type: ignore[return-value]


def _aligned(old: Slot, new: Slot, lost: frozenset[str] = frozenset()) -> bool:
    """The same slot of one fact in two claims: a versioned name keeps its name around a new
    number (Postgres 13 → 16; Node.js 18 and Redis 6 are two things); other values sit between
    the same words, or next to the same term (not a sentence boundary) on one side. Change words
    do not count, nor the older claim's verb they replace (`lost`: "is hosted in X" → "was migrated
    to Y")."""
    if old[HEAD] and new[HEAD] and old[HEAD] != old[VALUE] and new[HEAD] != new[VALUE]:
        return old[HEAD] == new[HEAD]
    before = old[BEFORE] == new[BEFORE] or old[FRAME][0] == new[FRAME][0]
    if not before and old[FRAME][0] in lost and new[BEFORE] in CHANGE_WORDS:
        before = old[FRAME][1] == new[FRAME][0]
    after = old[AFTER] == new[AFTER]
    if before and after:
        return True
    return (before and old[BEFORE] != _START) or (after and old[AFTER] != _END)


def _same_name(old: Slot, new: Slot) -> bool:
    return bool(old[HEAD]) and old[HEAD] == new[HEAD]


def _kind(slot: Slot) -> int:
    """0 a bare reference (a number, a date, a region), 1 a name, 2 a versioned name."""
    return 0 if not slot[HEAD] else 1 if slot[HEAD] == slot[VALUE] else 2


def _same_kind(old: Slot, new: Slot) -> bool:
    """A name for a name, a bare reference for a bare reference, outside side clauses first."""
    return _kind(old) == _kind(new) and not new[SIDE]


def _compatible(old: Slot, new: Slot) -> bool:
    """A versioned name only for another version of it (never Postgres 12 for a region); a name
    for a bare value or the reverse ("on S3" → "on GCS")."""
    return (_kind(old) == 2) == (_kind(new) == 2)


def _replacements(gone: list[Slot], added: list[Slot], lost: frozenset[str]) -> list[tuple[Slot, Slot]]:
    """The older claim's values that the newer replaces, each paired with one new value: a name
    kept around a new number first (Redis 7.0 → 7.2 before a ticket beside it), then a value of the
    same kind (a person for a person, not for the date of a "Since …" beside it; never a version
    for a region)."""
    free = list(added)
    out: list[tuple[Slot, Slot]] = []
    done: dict[str, list[Slot]] = {}  # the older slots paired, by value (cheaper than comparing slots)
    for fit in (_same_name, _same_kind, _compatible):
        for old in gone:
            if old in done.get(old[VALUE], ()):
                continue
            # The first new value that fits (the cheaper test first); `del`, as no slot before it is
            # equal to it (that one would fit too).
            for k, new in enumerate(free):
                if fit(old, new) and _aligned(old, new, lost):
                    del free[k]
                    done.setdefault(old[VALUE], []).append(old)
                    out.append((old, new))
                    break
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
_SUPERSEDES = Verdict(Relation.SUPERSEDES)


def relation(newer: str, older: str, mentions: Mentions | None = None) -> Relation:
    """How a newly remembered claim relates to an older active claim of the same scope.

    `mentions` tells the claim's topic from its other names: the name the scope talks about most
    (a service in a project's scope). A change keeps its topic; without `mentions` the topic is
    not known, and only the other conditions apply.
    """
    return compare(shape(newer), shape(older)).resolve(mentions)


def compare(a: ClaimShape, b: ClaimShape, *, similar: bool = True) -> Verdict:
    """`relation` of two parsed claims (a newer, b older), the topic check left to the caller, so
    that the counts of every pair's values can be read at once, and only for pairs that need them.
    Without `similar`, a pair that is not SUPERSEDES is NONE: the page check asks for nothing else,
    and judging SIMILAR was a third of its time."""
    if a.normalized == b.normalized:
        return _SIMILAR if similar else _NONE  # the same text under another type (same type is MATCHED)
    a_values, b_values = a.values, b.values
    # What the newer claim says that the older does not (change words and side clauses aside), and
    # what of the older claim the newer leaves out: a newer version of a fact says nothing else, and
    # drops at most the verb its change words replace ("is hosted in" → "was migrated to") or the
    # one word that is its value ("… is master" → "… is main").
    extra = a.core - b.wording
    lost = b.core - a.wording
    if a_values <= b_values or b_values <= a_values:  # no slot replaced, at most left out or added
        if len(extra) == 1 and len(lost) == 1 and _word_replaced(a, b, extra, lost):
            return _SUPERSEDES
        return _SIMILAR if similar and _similar(a, b) is Relation.SIMILAR else _NONE
    if extra or len(lost) > 1:
        return _NONE
    gone = [slot for slot in b.slots if slot[VALUE] not in a_values]
    added = [slot for slot in a.slots if slot[VALUE] not in b_values]
    replaced = _replacements(gone, added, lost)
    # An older version of the same fact: one value of the older claim replaced in the same place,
    # the others kept or, if they are bare references (a ticket, a date: no name in them) or in a
    # side clause, left out; the newer adds no other value but such references.
    if len(replaced) != 1:
        return _NONE
    old, new = replaced[0]
    if any(s[HEAD] and not s[SIDE] for s in gone if s is not old) or any(
        s[HEAD] and not s[SIDE] for s in added if s is not new
    ):
        return _NONE
    if lost and not (lost == {old[FRAME][0]} and new[BEFORE] in CHANGE_WORDS):
        # Another word left out (a verb of a reworded claim: "X listens on port 8080 in production"
        # → "In production the X port is 9090"): only with the rest of the wording kept, and never
        # a word naming where the fact holds ("The staging cluster has 6 nodes" → "The cluster …").
        if lost & QUALIFIERS or len(a.core & b.core) < SUPERSEDE_KEPT_TERMS:
            return _NONE
    shared_values = a_values & b_values
    if [v for v in (s[VALUE] for s in a.slots) if v in shared_values] != [
        v for v in (s[VALUE] for s in b.slots) if v in shared_values
    ]:
        return _NONE  # the kept values swapped places ("A calls B" and "B calls A")
    # An identifier (payments-api, src/app.py) names what a claim is about as often as a value of
    # it: replaced, it is a value only where values stand, last in the older claim's main clause or
    # after the newer's change word ("Deploys go through deploy-bot", "docs moved to docs-site"),
    # not "Backups of billing-db …" → "Backups of orders-db …".
    if old[IDENTIFIER] and b.last != ("v", old[VALUE]) and new[BEFORE] not in CHANGE_WORDS:
        return _NONE
    # What the claim is about: a kept name without digits (a service, a person, a product), or
    # else at least two terms of its wording in common ("the release train leaves every …").
    kept_names = [slot[VALUE] for slot in b.slots if slot[VALUE] in shared_values and slot[HEAD] == slot[VALUE]]
    if not kept_names:
        return _SUPERSEDES if len(a.core & b.core) >= SUPERSEDE_KEPT_TERMS else _NONE
    # The topic check, for a name replaced by another name. A value whose words stay and whose
    # number changes ("Postgres 14" → "Postgres 15") is the same thing in a new version, however
    # often the scope mentions it: among 2,000 claims about other services' Postgres versions the
    # check read Postgres as the topic and stopped pairing a service's two versions.
    if old[HEAD] and old[HEAD] != new[HEAD]:
        return Verdict(Relation.SUPERSEDES, (old[VALUE], tuple(kept_names)))
    return _SUPERSEDES


def _word_replaced(a: ClaimShape, b: ClaimShape, extra: frozenset[str], lost: frozenset[str]) -> bool:
    """A value written as a plain word, replaced: the one word each claim has that the other has not
    is the last of its main clause ("The default branch is master" → "… is main", "Deploys happen
    weekly" → "… monthly"), the same values on both sides (bare references and side clauses aside),
    and at least two terms of the wording kept. Not a word naming where the fact holds (staging,
    production: two facts)."""
    (new_word,), (old_word,) = extra, lost
    if a.last != ("w", new_word) or b.last != ("w", old_word) or not (a.last_is_value and b.last_is_value):
        return False
    if new_word in QUALIFIERS or old_word in QUALIFIERS:
        return False
    if len(a.core & b.core) < SUPERSEDE_KEPT_TERMS:
        return False
    a_values, b_values = a.values, b.values
    return not any(s[HEAD] and not s[SIDE] for s in a.slots if s[VALUE] not in b_values) and not any(
        s[HEAD] and not s[SIDE] for s in b.slots if s[VALUE] not in a_values
    )


def _similar(a: ClaimShape, b: ClaimShape) -> Relation:
    """No value replaced: the same fact when both hold the same values and the words coincide, or
    when the values in common are enough to name one fact."""
    shared_words = len(a.wording & b.wording)
    shared_values = a.values & b.values
    if not shared_words and len(shared_values) < SIMILAR_SHARED_VALUES:
        return Relation.NONE  # no wording in common, and too few values to name one fact alone
    union_words = len(a.wording) + len(b.wording) - shared_words
    jaccard = shared_words / union_words if union_words else 0.0
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


def possible_conflicts(
    items: list[tuple[Id, str]], stored: StoredShapes[Id] | None = None
) -> list[tuple[tuple[Id, Id], Verdict]]:
    """The pairs of `items` (id, text; oldest first) that may read as two versions of one fact,
    (older id, newer id) with their verdict, the topic check left to the caller (`Verdict.values`
    names what it asks). Each text is read once (`shapes_of`; `stored`: their stored records)."""
    # (Every text is read: a new version may hold a single value, or a plain word as its value.)
    shapes = list(zip((item_id for item_id, _ in items), shapes_of(items, stored)))
    out = []
    for j, (new_id, new) in enumerate(shapes):
        for old_id, old in shapes[:j]:
            verdict = compare(new, old, similar=False)
            if verdict.relation is Relation.SUPERSEDES:
                out.append(((old_id, new_id), verdict))
    return out


def value_terms(value: str) -> list[str]:
    """The index terms of a value; the rarest of them bounds how many memories mention it."""
    return terms(value)
