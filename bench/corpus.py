"""A deterministic, realistic agent-memory corpus with gold queries, for the retrieval benchmark.

What it builds (everything derives from one seed; the same parameters give the same corpus):

* Scopes `project:<name>`, each with its own cast: a few services, people, teams, channels…
* Memories of the five types decision, constraint, lesson, preference and fact, rendered from ~40
  templates with entity slots (services, people, ports, versions, dates, file paths, ticket ids,
  tools, teams, regions). Every template is instantiated several times per scope with other
  entities, so most memories are *distractors* for the others: same wording, other identifiers.
* Changing facts: an evolving template stores one or two *old* claims ("payments-api uses Postgres
  13") and later the *current* claim ("… was upgraded on 2024-05-02 and now uses Postgres 16").
  Queries always target the current claim; an old claim in a result is a stale hit.
* Restatements: some facts are recorded twice in other words; both are then gold.
* For each gold memory, queries in two families, each with a train and a held-out test query:
  PARAPHRASE queries ask for the memory in other words (entity aliases such as "the card charging
  backend" for payments-api, synonyms, another sentence structure), and NAMING queries name an
  exact identifier of the memory (a ticket id, a port, a date, a version, a person). A query is
  only kept when no other memory of its template in the scope renders the same query, so every
  query has a well-defined answer.

`python bench/corpus.py [--quick]` prints the corpus statistics and a sample.
"""

from __future__ import annotations

import argparse
import random
import re
from collections import Counter
from dataclasses import dataclass, field
from datetime import date, timedelta

from templates import CAST, DRAWERS, PROJECTS, TEMPLATES, UNIQUE, Entity, Said, Template, draw_cast

# ------------------------------------------------------------------------------------ the model

MEMORY_TYPES = ("decision", "constraint", "lesson", "preference", "fact")
FAMILIES = ("paraphrase", "naming")
SPLITS = ("train", "test")


@dataclass(frozen=True)
class MemorySpec:
    """One memory to store. `role`: current, old (superseded by `replaced_by`) or restated."""

    key: str
    scope: str
    type: str
    text: str
    role: str
    occurred_at: date
    replaced_by: str | None = None


@dataclass(frozen=True)
class Query:
    key: str
    scope: str
    text: str
    family: str
    split: str
    gold: tuple[str, ...]
    template: str
    changed_fact: bool


@dataclass(frozen=True)
class CorpusParams:
    seed: int = 20261129
    scopes: int = 20
    instances: tuple[int, int] = (2, 4)
    """Instances of each regular template per scope (min, max)."""
    evolving_instances: tuple[int, int] = (1, 2)
    templates_per_scope: int | None = None
    """A random subset of the templates per scope; None = all."""
    gold_per_scope: int = 8
    changed_gold_per_scope: int = 2
    """How many of the gold memories are current claims of changing facts."""
    chain_share: float = 0.33
    """Share of changing facts with two old claims (X -> Y -> Z) instead of one."""
    restate_share: float = 0.3

    @classmethod
    def quick(cls) -> CorpusParams:
        return cls(
            scopes=3,
            instances=(2, 2),
            evolving_instances=(1, 2),
            templates_per_scope=22,
            gold_per_scope=5,
            changed_gold_per_scope=1,
        )


@dataclass
class Corpus:
    params: CorpusParams
    memories: list[MemorySpec]
    """In storage order: per scope, old claims first, then the rest, then the current claims of changing facts."""
    queries: list[Query]
    by_key: dict[str, MemorySpec] = field(init=False)

    def __post_init__(self) -> None:
        self.by_key = {m.key: m for m in self.memories}

    @property
    def scopes(self) -> list[str]:
        return list(dict.fromkeys(m.scope for m in self.memories))

    def scope_memories(self, scope: str) -> list[MemorySpec]:
        return [m for m in self.memories if m.scope == scope]

    def stats(self) -> dict:
        gold = {g for q in self.queries for g in q.gold}
        return {
            "seed": self.params.seed,
            "scopes": len(self.scopes),
            "memories": len(self.memories),
            "by_type": dict(sorted(Counter(m.type for m in self.memories).items())),
            "templates": len(TEMPLATES),
            "old_claims": sum(m.role == "old" for m in self.memories),
            "changing_facts": sum(m.role == "current" and m.key.endswith("/new") for m in self.memories),
            "restatements": sum(m.role == "restated" for m in self.memories),
            "gold_memories": len(gold),
            "queries": dict(sorted(Counter(f"{q.family}/{q.split}" for q in self.queries).items())),
            "content_overlap": {
                f: round(
                    _mean(
                        [content_overlap(q.text, self.by_key[q.gold[0]].text) for q in self.queries if q.family == f]
                    ),
                    3,
                )
                for f in FAMILIES
            },
        }


# ------------------------------------------------------------------------------------ wording

_TOKEN = re.compile(r"[^\W_]+")
STOPWORDS = frozenset(
    "a an the of to in on at by for with from and or not no is are was were be been it its this that these those "
    "what which who whom whose when where why how do does did can could should would may must i we you they our "
    "my me us any anything after before about into over under than then there so if as all every each still now "
    "get gets go goes going up down out off".split()
)


def content_words(text: str) -> set[str]:
    return {t for t in _TOKEN.findall(text.casefold()) if t not in STOPWORDS}


def content_overlap(query: str, memory: str) -> float:
    """Share of the query's content words that occur in the memory (0 = a pure paraphrase)."""
    words = content_words(query)
    return len(words & content_words(memory)) / len(words) if words else 0.0


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


# ------------------------------------------------------------------------------------ generation


@dataclass
class _Instance:
    template: Template
    slots: dict
    history: list  # values of the evolving slot, oldest first; [] for regular templates

    def render(self, text: str, alias: int = 0, value: object | None = None) -> str:
        values = {k: (Said(v.entity, alias) if isinstance(v, Said) else v) for k, v in self.slots.items()}
        if self.template.value:
            v = self.history[-1] if value is None else value
            values[self.template.value] = Said(v) if isinstance(v, Entity) else v
        return text.format(**values)


class _ScopeBuilder:
    """Draws one scope's cast, instances, memories and queries."""

    def __init__(self, rng: random.Random, params: CorpusParams, name: str) -> None:
        self.rng, self.params = rng, params
        self.scope = f"project:{name}"
        self.cast = draw_cast(rng)
        self.used: dict[str, set] = {}

    # -- slots

    def _draw(self, slot: str, drawn: dict) -> object | None:
        """A value for the slot, or None when a unique slot has no unused value left."""
        if slot in CAST:
            taken = {v.entity for k, v in drawn.items() if isinstance(v, Said) and CAST.get(k) == CAST[slot]}
            return Said(self.rng.choice([e for e in self.cast[CAST[slot]] if e not in taken]))
        used = self.used.setdefault(slot, set())
        for _ in range(200):
            value = DRAWERS[slot](self.rng, drawn)
            if slot not in UNIQUE or value not in used:
                used.add(value)
                return value
        return None

    def _history(self, t: Template) -> list:
        olds = 2 if self.rng.random() < self.params.chain_share else 1
        if t.values is None:  # ports: unique per scope
            return [self._draw("port", {}) for _ in range(olds + 1)]
        pool = list(t.values)
        if t.ordered:
            return sorted(self.rng.sample(pool, olds + 1), key=pool.index)
        return self.rng.sample(pool, olds + 1)

    def instances(self, t: Template) -> list[_Instance]:
        lo, hi = self.params.evolving_instances if t.evolving else self.params.instances
        out, keys = [], set()
        for _ in range(self.rng.randint(lo, hi)):
            for _attempt in range(20):
                slots: dict = {}
                for s in t.slot_names():
                    slots[s] = self._draw(s, slots)
                if None in slots.values():
                    continue
                key = tuple(slots[u].entity.name for u in t.unique)
                if key not in keys:
                    keys.add(key)
                    out.append(_Instance(t, slots, self._history(t) if t.evolving else []))
                    break
        return out

    # -- memories

    def memories(
        self, t: Template, i: int, inst: _Instance
    ) -> tuple[list[MemorySpec], list[MemorySpec], list[MemorySpec]]:
        """(old claims, regular memories, current claims of changing facts) of one instance."""
        base = f"{self.scope}/{t.key}/{i}"
        when = date(2025, 1, 1) - timedelta(days=self.rng.randint(0, 700))
        if not t.evolving:
            mems = [MemorySpec(f"{base}/main", self.scope, t.type, inst.render(t.text), "current", when)]
            if t.restate and self.rng.random() < self.params.restate_share:
                mems.append(
                    MemorySpec(
                        f"{base}/restated",
                        self.scope,
                        t.type,
                        inst.render(t.restate),
                        "restated",
                        when + timedelta(days=self.rng.randint(1, 60)),
                    )
                )
            return [], mems, []
        new_key = f"{base}/new"
        olds = [
            MemorySpec(
                f"{base}/old{k}",
                self.scope,
                t.type,
                inst.render(t.old_text, value=v),
                "old",
                when - timedelta(days=200 * (len(inst.history) - k)),
                replaced_by=new_key,
            )
            for k, v in enumerate(inst.history[:-1])
        ]
        return olds, [], [MemorySpec(new_key, self.scope, t.type, inst.render(t.text), "current", when)]

    # -- queries

    def queries(
        self, t: Template, inst: _Instance, siblings: list[_Instance], gold: tuple[str, ...]
    ) -> list[Query] | None:
        """Two paraphrase and two naming queries (one train, one test each), or None if too few are unambiguous.

        The two queries of a family come from different query templates; two paraphrases also word
        the entities with different aliases where the template allows it.
        """
        out = []
        for family, texts in (("paraphrase", t.paraphrases), ("naming", t.namings)):
            candidates = {}  # (query template, alias) -> query, unambiguous ones only
            for text in texts:
                for alias in (0, 1):
                    q = inst.render(text, alias)
                    if q not in candidates.values() and not any(
                        s.render(text, alias) == q for s in siblings if s is not inst
                    ):
                        candidates[(text, alias)] = q
            pairs = [(a, b) for a in candidates for b in candidates if a[0] < b[0]]
            if not pairs:
                return None
            best = [(a, b) for a, b in pairs if a[1] != b[1]] or pairs
            chosen = self.rng.choice(best)
            for split, pick in zip(self.rng.sample(SPLITS, 2), chosen):
                out.append(
                    Query(
                        f"{gold[0]}/{family}/{split}",
                        self.scope,
                        candidates[pick],
                        family,
                        split,
                        gold,
                        t.key,
                        t.evolving,
                    )
                )
        return out


def _build_scope(rng: random.Random, params: CorpusParams, name: str) -> tuple[list[MemorySpec], list[Query]]:
    b = _ScopeBuilder(rng, params, name)
    templates = TEMPLATES if params.templates_per_scope is None else rng.sample(TEMPLATES, params.templates_per_scope)
    olds: list[MemorySpec] = []
    regular: list[MemorySpec] = []
    currents: list[MemorySpec] = []
    eligible: list[tuple[Template, list[Query]]] = []
    for t in templates:
        insts = b.instances(t)
        for i, inst in enumerate(insts):
            o, r, c = b.memories(t, i, inst)
            olds += o
            regular += r
            currents += c
            gold = tuple(m.key for m in r + c if m.role in ("current", "restated"))
            qs = b.queries(t, inst, insts, gold)
            if qs:
                eligible.append((t, qs))
    queries = _choose_gold(rng, params, eligible)
    rng.shuffle(regular)
    return olds + regular + currents, queries


def _choose_gold(rng: random.Random, params: CorpusParams, eligible: list[tuple[Template, list[Query]]]) -> list[Query]:
    """Gold memories from distinct templates: a few changing facts, the rest regular memories."""
    rng.shuffle(eligible)
    chosen: list[list[Query]] = []
    seen: set[str] = set()
    quota = {True: params.changed_gold_per_scope, False: params.gold_per_scope - params.changed_gold_per_scope}
    for t, qs in eligible:
        if t.key not in seen and quota[t.evolving] > 0:
            quota[t.evolving] -= 1
            seen.add(t.key)
            chosen.append(qs)
    return [q for qs in chosen for q in qs]


def build_corpus(params: CorpusParams) -> Corpus:
    rng = random.Random(params.seed)
    memories: list[MemorySpec] = []
    queries: list[Query] = []
    for name in PROJECTS[: params.scopes]:
        m, q = _build_scope(random.Random(rng.getrandbits(64)), params, name)
        memories += m
        queries += q
    _check_unique_texts(memories)
    return Corpus(params, memories, queries)


def _check_unique_texts(memories: list[MemorySpec]) -> None:
    seen: set[tuple[str, str, str]] = set()
    for m in memories:
        k = (m.scope, m.type, " ".join(m.text.split()).casefold())
        if k in seen:
            raise ValueError(f"duplicate memory text in {m.scope}: {m.text!r}")
        seen.add(k)


# ------------------------------------------------------------------------------------ inspection


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sample", type=int, default=6, help="queries to show")
    args = parser.parse_args()
    corpus = build_corpus(CorpusParams.quick() if args.quick else CorpusParams())
    for k, v in corpus.stats().items():
        print(f"{k}: {v}")
    by_family: dict[str, list[Query]] = {}
    for q in corpus.queries:
        by_family.setdefault(q.family, []).append(q)
    for family, qs in by_family.items():
        print(f"\n{family} queries (sample):")
        for q in random.Random(0).sample(qs, min(args.sample, len(qs))):
            print(f"  [{q.split}] {q.text}\n      gold: {corpus.by_key[q.gold[0]].text}")


if __name__ == "__main__":
    main()
