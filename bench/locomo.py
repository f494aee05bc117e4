"""Retrieval quality of Slowave MemoryService on LoCoMo (development half), over its real gRPC API.

What is measured. LoCoMo (Maharana et al., ACL 2024) holds very long two-person conversations and
questions about them, each naming the dialogue turns (`dia_id`) that hold its answer. The protocol
is the one of ../shared/data/locomo-dev/README.md:

* Each conversation is one scope (`locomo:<file stem>`). One writer session (opened by Activate)
  remembers every turn, in order, as one memory of type `fact` with content `"<speaker>: <text>"`
  (plus ` [shared image: <blip_caption>]` where the turn has one) and `occurred_at` = its
  session's date (`session_N_date_time`, e.g. `1:56 pm on 8 May, 2023`, taken as UTC), in batches
  of 100 (the batch form of Remember); the writer gives complete (neutral) Feedback on its own
  activation and commits. Memory ids come back in batch order and map memories to dia_ids.
* Scored questions: categories 1-4 (multi-hop, temporal, open-domain, single-hop) with non-empty
  evidence (786 in the dev half). Evidence strings are split into dia_ids by the pattern
  `D<session>:<turn>` (a few entries hold several ids in one string, one is written `D:11:26`).
* Each question is one Activate (task = initial_goal = the question, page_size 10) plus one
  continuation page (Recall with `continue_from`), i.e. up to 20 ranked memories. Activate always
  opens a new session, so every question has its own; measuring sessions are left uncommitted
  (the idle reaper closes them), which the contract allows.
* evidence@k (k = 1, 5, 10, 20): share of questions with at least one evidence turn among the
  first k memories. keyword@10: share of questions whose answer words (lower-cased, regex
  `[a-z0-9]+`, STOP_WORDS removed) are at least half present among the words of the first 10
  memories' text: content plus the memory's `occurred_at` rendered `8 May 2023` where the response
  sets it. Reported overall and per category, with the client-side wall time of Activate (p50,
  p95) and the server's `retrieval_policy_version`.
* `--learn`, the learning probe: per conversation, the scored questions alternate into a train
  half (even index) and a test half (odd). Round 0 asks all of them (the figures above). Each
  further round gives the train half honest feedback (its own session: Activate + continuation
  page, Feedback with the evidence turns among the shown memories `used`, every other shown memory
  `irrelevant`, coverage COMPLETE, then Commit), then asks both halves again; evidence@1/5/10 and
  keyword@10 are reported per half at round 0 and after each round of `--rounds` (e.g. `1,3`).
  `--flip P` flips that share of labels (used <-> irrelevant), decided per (question, round,
  memory) by a seeded RNG (`--seed`). Every commit of the run, the writer's included, carries the
  same outcome summary (SUMMARY), so consolidation adds exactly one derived lesson per scope; the
  script waits for it before asking anything, which keeps runs repeatable.
* `--baseline`: plain BM25 computed in-process, without the server, over the same turn contents
  (bm25s, method `lucene`, k1 = 1.2, b = 0.75, English Snowball stemmer from PyStemmer, bm25s's
  English stop words, i.e. Lucene's 33-word list), the question as the query, the same metrics
  (keyword@10 over the turns' contents alone, as the README's baseline figure; the figure with
  the session dates added, as the service's memories carry them, is printed beside it).

How. Unless `--target HOST:PORT` names a running server, the script starts the installed
`slowave-server` as `make serve` would (no retrieval settings in its environment; `--server-env
KEY=VALUE` adds some for A/B runs) on a free loopback port with a fresh temporary SQLite file and
no metrics endpoint, and stops it at the end. It prints the figures and writes a Markdown report
(figures only, never question or turn text: the data is CC BY-NC and stays outside the
repository).

    python bench/locomo.py                       # dev half, default server: bench/results/locomo.md
    python bench/locomo.py --baseline            # ... plus plain BM25 over the same turns
    python bench/locomo.py --learn --rounds 1,3  # ... plus the learning probe
    python bench/locomo.py --conversations 26 --limit 20 --learn --out /tmp/locomo-quick.md
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shlex
import signal
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
sys.path.insert(0, str(BENCH))
from harness import ServerProcess, pct, server_revision  # noqa: E402
from slowave.v1 import memory_service_pb2 as pb  # noqa: E402
from slowave.v1 import memory_service_pb2_grpc as pb_grpc  # noqa: E402
from slowave.v1 import resources_pb2 as res  # noqa: E402

DEFAULT_DATA = REPO.parent / "shared" / "data" / "locomo-dev"
DEFAULT_OUT = BENCH / "results" / "locomo.md"
PAGE_SIZE = 10
DEPTH = 20  # Activate page + one continuation page
BATCH = 100
RPC_TIMEOUT = 60.0
KS = (1, 5, 10, 20)
LEARN_KS = (1, 5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
# The one outcome summary of every commit (writer, consolidation probe, train questions): it becomes
# one lesson per scope, and later commits match it instead of adding more derived memories.
SUMMARY = "LoCoMo benchmark task closed by the simulated agent."
VERIFICATION = pb.Verification(
    status=res.VERIFICATION_STATUS_UNVERIFIED, summary="Simulated agent of the LoCoMo retrieval benchmark."
)

# Stop words removed from answers for keyword@k: English articles, pronouns, auxiliaries,
# prepositions, conjunctions and a few adverbs (the list below, nothing else). Month names ("may",
# "march"), numbers and negations that carry the answer ("never") are deliberately not in it.
STOP_WORDS = frozenset(
    """
a an the and or but nor so yet if then than as of to in on at by for from with without into onto
about above below over under after before during until since between through against among around
up down out off upon via per is are was were be been being am do does did done doing has have had
having will would shall should can could might must it its this that these those there here i me
my mine myself we us our ours you your yours he him his she her hers they them their theirs who
whom whose which what when where why how s t d ll re ve m also too very just only both each all
any some such own same other another more most much many few lot lots etc
""".split()
)
WORD = re.compile(r"[a-z0-9]+")
DIA_ID = re.compile(r"D:?(\d+):(\d+)")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ data


@dataclass(frozen=True)
class Turn:
    dia_id: str
    content: str
    occurred: datetime


@dataclass(frozen=True)
class Question:
    conversation: str
    index: int  # position among the conversation's scored questions
    text: str
    answer: str
    evidence: frozenset[str]
    category: int

    @property
    def split(self) -> str:
        return "train" if self.index % 2 == 0 else "test"


@dataclass
class Conversation:
    stem: str
    turns: list[Turn]
    questions: list[Question]

    @property
    def scope(self) -> str:
        return f"locomo:{self.stem}"


def session_date(raw: str) -> datetime:
    """`1:56 pm on 8 May, 2023` as UTC."""
    return datetime.strptime(raw.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load_conversation(path: Path, limit: int | None) -> Conversation:
    data = json.loads(path.read_text(encoding="utf-8"))
    sessions = sorted(int(m.group(1)) for k in data if (m := re.fullmatch(r"session_(\d+)", k)))
    turns = []
    for n in sessions:
        when = session_date(data[f"session_{n}_date_time"])
        for t in data[f"session_{n}"]:
            content = f"{t['speaker']}: {t['text']}"
            if t.get("blip_caption"):
                content += f" [shared image: {t['blip_caption']}]"
            turns.append(Turn(t["dia_id"], content, when))
    questions: list[Question] = []
    for qa in data.get("qa", []):
        if qa.get("category") not in CATEGORIES or not qa.get("evidence"):
            continue
        evidence = frozenset(f"D{a}:{b}" for e in qa["evidence"] for a, b in DIA_ID.findall(str(e)))
        if not evidence:
            continue
        if limit is not None and len(questions) >= limit:
            break
        questions.append(
            Question(path.stem, len(questions), qa["question"], str(qa.get("answer", "")), evidence, qa["category"])
        )
    return Conversation(path.stem, turns, questions)


def load_data(directory: Path, only: list[str] | None, limit: int | None) -> list[Conversation]:
    if not directory.is_dir():
        raise SystemExit(f"LoCoMo data not found at {directory} (pass --data DIR)")
    paths = sorted(
        directory.glob("*.json"), key=lambda p: (not p.stem.isdigit(), int(p.stem) if p.stem.isdigit() else 0, p.stem)
    )
    if only:
        missing = sorted(set(only) - {p.stem for p in paths})
        if missing:
            raise SystemExit(f"no conversation file(s) {', '.join(missing)} in {directory}")
        paths = [p for p in paths if p.stem in only]
    return [load_conversation(p, limit) for p in paths]


# ------------------------------------------------------------------------------------ scoring


def words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def answer_keywords(answer: str) -> list[str]:
    """The answer's words without stop words; all its words if only stop words remain."""
    tokens = words(answer)
    kept = [w for w in tokens if w not in STOP_WORDS]
    return list(dict.fromkeys(kept or tokens))


def render_date(when: datetime) -> str:
    return f"{when.day} {when:%B} {when.year}"


@dataclass(frozen=True)
class Ranked:
    """One returned item: the dia_ids it stands for (none for a memory that is not a turn) and its text."""

    memory_id: str
    dia_ids: frozenset[str]
    text: str


@dataclass
class Outcome:
    question: Question
    rank: int | None  # 1-based rank of the first evidence turn among the returned items
    keyword10: bool
    returned: int


def score(question: Question, ranked: list[Ranked]) -> Outcome:
    rank = next((i for i, r in enumerate(ranked, 1) if r.dia_ids & question.evidence), None)
    keywords = answer_keywords(question.answer)
    present = {w for r in ranked[:10] for w in words(r.text)}
    hits = sum(w in present for w in keywords)
    return Outcome(question, rank, bool(keywords) and 2 * hits >= len(keywords), len(ranked))


@dataclass(frozen=True)
class Figures:
    n: int
    evidence: dict[int, float]
    keyword10: float


def figures(outcomes: list[Outcome], ks: tuple[int, ...] = KS) -> Figures:
    n = len(outcomes)
    if not n:
        return Figures(0, {k: float("nan") for k in ks}, float("nan"))
    return Figures(
        n,
        {k: sum(o.rank is not None and o.rank <= k for o in outcomes) / n for k in ks},
        sum(o.keyword10 for o in outcomes) / n,
    )


def by_category(outcomes: list[Outcome]) -> list[tuple[str, Figures]]:
    rows = [("all", figures(outcomes))]
    for cat, name in CATEGORIES.items():
        rows.append((f"{cat} {name}", figures([o for o in outcomes if o.question.category == cat])))
    return rows


def share(value: float) -> str:
    return "–" if value != value else f"{value:.3f}"  # NaN: no question of that kind


def table(rows: list[tuple[str, Figures]], ks: tuple[int, ...] = KS, first: str = "questions") -> str:
    head = f"| {first} | n | " + " | ".join(f"evidence@{k}" for k in ks) + " | keyword@10 |\n"
    head += "|---|---:|" + "---:|" * (len(ks) + 1) + "\n"
    body = "".join(
        f"| {name} | {f.n} | " + " | ".join(share(f.evidence[k]) for k in ks) + f" | {share(f.keyword10)} |\n"
        for name, f in rows
    )
    return head + body


# ------------------------------------------------------------------------------------ the service


def timestamp(when: datetime) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(when)
    return ts


class DefaultServer(ServerProcess):
    """bench/quality.py's ServerProcess with `make serve`'s defaults: the idle reaper stays on (its
    default timeout); only the listen address, the database file and the (disabled) metrics
    endpoint differ, plus whatever `--server-env` adds."""

    def __init__(self, workdir: Path, extra_env: dict[str, str]) -> None:
        super().__init__(workdir, {})
        self.env.pop("SLOWAVE_SESSION_IDLE_TIMEOUT", None)
        self.env.update(extra_env)


@dataclass
class Retrieval:
    session_id: str
    retrieval_id: str
    policy: str
    activate_seconds: float
    ranked: list[Ranked]
    dated: int  # returned memories with occurred_at set


@dataclass
class FeedbackTally:
    calls: int = 0
    used: int = 0
    irrelevant: int = 0
    flipped: int = 0
    rejected: int = 0
    strengthened: int = 0
    weakened: int = 0


class Service:
    """The benchmark's gRPC client: ingest, ask, train."""

    def __init__(self, stub: pb_grpc.MemoryServiceStub, flip: float, seed: int) -> None:
        self.stub, self.flip, self.seed = stub, flip, seed
        self.dia_ids: dict[str, dict[str, set[str]]] = {}  # scope -> memory_id -> dia_ids
        self.tally = FeedbackTally()
        self.matched = 0  # turns whose content matched an earlier memory (same id, several dia_ids)

    def _commit(self, session_id: str, goal: str, found: bool = True) -> None:
        self.stub.Commit(
            pb.CommitRequest(
                session_id=session_id,
                final_goal=goal[:1000],
                outcome=res.OUTCOME_SUCCESS if found else res.OUTCOME_PARTIAL,
                outcome_summary=SUMMARY,
                verification=VERIFICATION,
            ),
            timeout=RPC_TIMEOUT,
        )

    def ingest(self, conv: Conversation) -> str:
        """One writer session remembers every turn in order; returns the policy version."""
        goal = "Store the conversation's turns"
        act = self.stub.Activate(
            pb.ActivateRequest(task=goal, initial_goal=goal, scope=conv.scope), timeout=RPC_TIMEOUT
        )
        ids: dict[str, set[str]] = defaultdict(set)
        for start in range(0, len(conv.turns), BATCH):
            chunk = conv.turns[start : start + BATCH]
            items = [
                pb.RememberItem(content=t.content, type=res.MEMORY_TYPE_FACT, occurred_at=timestamp(t.occurred))
                for t in chunk
            ]
            batch = self.stub.Remember(
                pb.RememberRequest(session_id=act.session_id, scope=conv.scope, memories=items), timeout=RPC_TIMEOUT
            ).batch
            if len(batch.results) != len(chunk):
                raise RuntimeError(f"batch Remember answered {len(batch.results)} results for {len(chunk)} items")
            for t, result in zip(chunk, batch.results):
                if result.HasField("error"):
                    raise RuntimeError(f"Remember refused {t.dia_id}: {result.error.code} {result.error.message}")
                self.matched += result.data.disposition == pb.DISPOSITION_MATCHED
                ids[result.data.memory_id].add(t.dia_id)
        self.dia_ids[conv.scope] = ids
        self.stub.Feedback(
            pb.FeedbackRequest(retrieval_id=act.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=RPC_TIMEOUT
        )
        self._commit(act.session_id, goal)
        return act.retrieval_policy_version

    def wait_for_lesson(self, scope: str, timeout: float = 120.0) -> None:
        """Waits until consolidation has made the writer's outcome summary a lesson."""
        deadline = time.monotonic() + timeout
        while True:
            act = self.stub.Activate(
                pb.ActivateRequest(
                    task=SUMMARY, initial_goal="Wait for consolidation", scope=scope, page_size=PAGE_SIZE
                ),
                timeout=RPC_TIMEOUT,
            )
            self.stub.Feedback(
                pb.FeedbackRequest(retrieval_id=act.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=RPC_TIMEOUT
            )
            self._commit(act.session_id, "Wait for consolidation")
            if any(m.content == SUMMARY for m in act.memories):
                return
            if time.monotonic() > deadline:
                raise RuntimeError(f"consolidation made no lesson in {scope} within {timeout:.0f}s")
            time.sleep(0.25)

    def _ranked(self, scope: str, memory: res.Memory) -> tuple[Ranked, bool]:
        text = memory.content
        dated = memory.HasField("occurred_at")
        if dated:
            text += " " + render_date(memory.occurred_at.ToDatetime(tzinfo=UTC))
        return Ranked(memory.memory_id, frozenset(self.dia_ids[scope].get(memory.memory_id, ())), text), dated

    def ask(self, q: Question, scope: str) -> Retrieval:
        """Activate (page_size 10) plus one continuation page."""
        t = time.perf_counter()
        act = self.stub.Activate(
            pb.ActivateRequest(task=q.text, initial_goal=q.text, scope=scope, page_size=PAGE_SIZE), timeout=RPC_TIMEOUT
        )
        seconds = time.perf_counter() - t
        memories = list(act.memories)
        if act.more_available and act.HasField("continue_from"):
            page = self.stub.Recall(
                pb.RecallRequest(session_id=act.session_id, scope=scope, continue_from=act.continue_from),
                timeout=RPC_TIMEOUT,
            )
            memories += list(page.memories)
        pairs = [self._ranked(scope, m) for m in memories[:DEPTH]]
        return Retrieval(
            act.session_id,
            act.retrieval_id,
            act.retrieval_policy_version,
            seconds,
            [r for r, _ in pairs],
            sum(d for _, d in pairs),
        )

    def _flipped(self, q: Question, round_: int, memory_id: str) -> bool:
        return (
            self.flip > 0
            and random.Random(f"{self.seed}|{q.conversation}|{q.index}|{round_}|{memory_id}").random() < self.flip
        )

    def train(self, q: Question, scope: str, round_: int) -> None:
        """Honest feedback on everything the question's retrieval showed (both pages), then Commit."""
        r = self.ask(q, scope)
        entries, seen = [], set()
        for item in r.ranked:
            if item.memory_id in seen:
                continue
            seen.add(item.memory_id)
            used = bool(item.dia_ids & q.evidence)
            if self._flipped(q, round_, item.memory_id):
                used = not used
                self.tally.flipped += 1
            self.tally.used += used
            self.tally.irrelevant += not used
            entries.append(
                pb.MemoryFeedbackEntry(
                    memory_id=item.memory_id,
                    assessment=(pb.MEMORY_ASSESSMENT_USED if used else pb.MEMORY_ASSESSMENT_IRRELEVANT),
                )
            )
        record = self.stub.Feedback(
            pb.FeedbackRequest(retrieval_id=r.retrieval_id, memory_feedback=entries, coverage=pb.COVERAGE_COMPLETE),
            timeout=RPC_TIMEOUT,
        ).record
        self.tally.calls += 1
        self.tally.rejected += len(record.rejected)
        self.tally.strengthened += len(record.applied.strengthened)
        self.tally.weakened += len(record.applied.weakened)
        found = any(item.dia_ids & q.evidence for item in r.ranked)
        self._commit(r.session_id, q.text, found)


# ------------------------------------------------------------------------------------ the baseline


def bm25_baseline(conversations: list[Conversation]) -> tuple[list[Outcome], list[Outcome]]:
    """Plain BM25 (bm25s, lucene, k1 1.2, b 0.75, Snowball English, Lucene's English stop words).

    Returns the outcomes scored on the turns' contents alone (keyword@10 as the README's baseline
    figure: no API, so no dates) and the same rankings scored on contents plus session dates."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    plain, dated = [], []
    for conv in conversations:
        texts = [t.content for t in conv.turns]
        retriever = bm25s.BM25(k1=1.2, b=0.75, method="lucene")
        retriever.index(
            bm25s.tokenize(texts, stopwords="en", stemmer=stemmer, show_progress=False), show_progress=False
        )
        k = min(DEPTH, len(texts))
        for q in conv.questions:
            query = bm25s.tokenize([q.text], stopwords="en", stemmer=stemmer, return_ids=False, show_progress=False)
            docs, scores = retriever.retrieve(query, k=k, show_progress=False)
            turns = [conv.turns[i] for i in docs[0]]
            plain.append(score(q, [Ranked(t.dia_id, frozenset({t.dia_id}), t.content) for t in turns]))
            dated.append(
                score(
                    q,
                    [Ranked(t.dia_id, frozenset({t.dia_id}), f"{t.content} {render_date(t.occurred)}") for t in turns],
                )
            )
    return plain, dated


# ------------------------------------------------------------------------------------ running


@dataclass
class Run:
    policy: str = ""
    round0: list[Outcome] = field(default_factory=list)
    latencies: list[float] = field(default_factory=list)
    returned_dated: int = 0
    returned_total: int = 0
    learn: dict[int, list[Outcome]] = field(default_factory=dict)  # round -> outcomes of both halves
    seconds: dict[str, float] = field(default_factory=dict)
    tally: FeedbackTally | None = None
    matched: int = 0
    baseline: list[Outcome] | None = None
    baseline_dated: list[Outcome] | None = None


def ask_all(service: Service, conversations: list[Conversation], run: Run | None = None) -> list[Outcome]:
    outcomes = []
    for conv in conversations:
        for q in conv.questions:
            r = service.ask(q, conv.scope)
            outcomes.append(score(q, r.ranked))
            if run is not None:
                run.policy = run.policy or r.policy
                run.latencies.append(r.activate_seconds)
                run.returned_dated += r.dated
                run.returned_total += len(r.ranked)
    return outcomes


def measure(address: str, conversations: list[Conversation], args: argparse.Namespace) -> Run:
    run = Run()
    with grpc.insecure_channel(address) as channel:
        grpc.channel_ready_future(channel).result(timeout=30)
        service = Service(pb_grpc.MemoryServiceStub(channel), args.flip, args.seed)
        t = time.perf_counter()
        # Each scope's lesson is consolidated before the next scope is stored, so every memory gets
        # the same number in every run (ties of score and relevance are broken by number).
        for conv in conversations:
            run.policy = service.ingest(conv)
            service.wait_for_lesson(conv.scope)
            log(f"ingested {conv.stem}: {len(conv.turns)} turns")
        run.seconds["ingest"] = time.perf_counter() - t
        run.matched = service.matched

        t = time.perf_counter()
        run.round0 = ask_all(service, conversations, run)
        run.seconds["questions"] = time.perf_counter() - t
        log(f"asked {len(run.round0)} questions in {run.seconds['questions']:.0f} s")

        if args.learn:
            run.learn[0] = run.round0
            t = time.perf_counter()
            for round_ in range(1, max(args.rounds) + 1):
                for conv in conversations:
                    for q in conv.questions:
                        if q.split == "train":
                            service.train(q, conv.scope, round_)
                if round_ in args.rounds:
                    run.learn[round_] = ask_all(service, conversations)
                log(f"learning round {round_} done")
            run.seconds["learning"] = time.perf_counter() - t
            run.tally = service.tally
    return run


# ------------------------------------------------------------------------------------ reporting


def learn_table(run: Run) -> str:
    ks = LEARN_KS
    out = "| round | half | n | " + " | ".join(f"evidence@{k}" for k in ks) + " | keyword@10 |\n"
    out += "|---:|---|---:|" + "---:|" * (len(ks) + 1) + "\n"
    for round_, outcomes in sorted(run.learn.items()):
        for half in ("train", "test"):
            f = figures([o for o in outcomes if o.question.split == half], ks)
            out += (
                f"| {round_} | {half} | {f.n} | "
                + " | ".join(share(f.evidence[k]) for k in ks)
                + f" | {share(f.keyword10)} |\n"
            )
    return out


def summary(run: Run, args: argparse.Namespace, conversations: list[Conversation]) -> str:
    lat = sorted(run.latencies)
    n_turns = sum(len(c.turns) for c in conversations)
    out = [
        f"retrieval_policy_version `{run.policy}`; {len(run.round0)} questions over {len(conversations)} "
        f"conversation(s) ({', '.join(c.stem for c in conversations)}), {n_turns} turns "
        f"({run.matched} matched an earlier identical turn).\n",
        f"Activate latency (client wall time) p50 {pct(lat, 0.5) * 1000:.1f} ms, p95 {pct(lat, 0.95) * 1000:.1f} ms; "
        f"memories returned per question {run.returned_total / max(1, len(run.round0)):.1f}, "
        f"{run.returned_dated / max(1, run.returned_total):.0%} of them with occurred_at set.\n",
        "Time: " + ", ".join(f"{k} {v:.1f} s" for k, v in run.seconds.items()) + ".\n",
        "### Slowave\n",
        table(by_category(run.round0)),
    ]
    if run.baseline is not None:
        out += [
            "### Plain BM25 (in-process baseline)\n",
            table(by_category(run.baseline)),
            f"keyword@10 over the turns' contents alone (no API, so no dates); with their session dates added "
            f"as the service's memories carry them: {figures(run.baseline_dated).keyword10:.3f}.\n",
        ]
        rows = [("Slowave", figures(run.round0)), ("BM25", figures(run.baseline))]
        out += ["### Side by side\n", table(rows, first="system")]
    if run.learn:
        flip = f", {args.flip:.0%} of labels flipped (seed {args.seed})" if args.flip else ""
        out += [
            f"### Learning probe (train = even, test = odd scored questions per conversation{flip})\n",
            learn_table(run),
        ]
        t = run.tally
        out.append(
            f"Feedback: {t.calls} calls, entries used {t.used}, irrelevant {t.irrelevant} (flipped {t.flipped}), "
            f"rejected {t.rejected}; strengthened {t.strengthened}, weakened {t.weakened}.\n"
        )
    return "\n".join(out)


def markdown(run: Run, args: argparse.Namespace, conversations: list[Conversation], command: str) -> str:
    server = (
        f"`--target {args.target}`"
        if args.target
        else (
            "own `slowave-server`, `make serve` defaults"
            + (" plus " + ", ".join(f"`{k}={v}`" for k, v in args.server_env.items()) if args.server_env else "")
        )
    )
    return "\n".join(
        [
            "# LoCoMo retrieval quality (development half)\n",
            f"Command: `{command}`  \nDate: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  \n"
            f"Git commit: `{server_revision()}`  \nServer: {server}  \nretrieval_policy_version: `{run.policy}`\n",
            "Protocol of ../shared/data/locomo-dev/README.md (see bench/locomo.py's docstring): every turn one `fact` "
            "memory with its session date as `occurred_at`, one scope per conversation; per question one Activate "
            "(page_size 10) plus one continuation page. evidence@k = share of questions with an evidence turn among the "
            "first k memories; keyword@10 = share whose answer words (stop words removed) are at least half present in "
            "the first 10 memories' text and dates. Figures only: no question or turn text.\n",
            "## Results\n",
            summary(run, args, conversations),
        ]
    )


# ------------------------------------------------------------------------------------ main


def parse_rounds(text: str) -> list[int]:
    try:
        rounds = sorted({int(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise argparse.ArgumentTypeError(f"--rounds takes positive integers like 1,3 (got {text!r})") from None
    if not rounds or rounds[0] < 1:
        raise argparse.ArgumentTypeError("--rounds takes positive integers like 1,3")
    return rounds


def parse_env(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--server-env takes KEY=VALUE (got {text!r})")
    return key.strip(), value


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--data", type=Path, default=DEFAULT_DATA, help=f"LoCoMo dev directory (default {DEFAULT_DATA})"
    )
    parser.add_argument("--target", metavar="HOST:PORT", help="use this running server instead of starting one")
    parser.add_argument(
        "--server-env",
        metavar="KEY=VALUE",
        type=parse_env,
        action="append",
        default=[],
        help="extra environment of the started server (repeatable; for A/B runs)",
    )
    parser.add_argument("--conversations", help="comma-separated file stems, e.g. 26,41 (default: all)")
    parser.add_argument("--limit", type=int, help="scored questions per conversation (the first N)")
    parser.add_argument("--learn", action="store_true", help="run the learning probe")
    parser.add_argument("--rounds", type=parse_rounds, default=[1], help="learning rounds to report, e.g. 1,3")
    parser.add_argument("--flip", type=float, default=0.0, help="share of feedback labels flipped (0..1)")
    parser.add_argument("--seed", type=int, default=20261201, help="seed of the label flips")
    parser.add_argument("--baseline", action="store_true", help="also score plain BM25 in-process")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"Markdown report (default {DEFAULT_OUT})")
    args = parser.parse_args()
    if not 0.0 <= args.flip <= 1.0:
        parser.error("--flip takes a share between 0 and 1")
    if args.limit is not None and args.limit < 1:
        parser.error("--limit takes a positive number")
    if args.target and args.server_env:
        parser.error("--server-env applies only to the server the script starts (not with --target)")
    args.server_env = dict(args.server_env)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # unwind: the server subprocess is stopped

    only = [c.strip() for c in args.conversations.split(",") if c.strip()] if args.conversations else None
    conversations = load_data(args.data.resolve(), only, args.limit)
    if args.target:
        # A shared server may hold earlier runs' scopes (and their learning): use fresh ones.
        suffix = os.urandom(3).hex()
        for conv in conversations:
            conv.stem = f"{conv.stem}-{suffix}"
    command = "python bench/locomo.py " + " ".join(shlex.quote(a) for a in sys.argv[1:])

    if args.target:
        run = measure(args.target, conversations, args)
    else:
        with tempfile.TemporaryDirectory(prefix="slowave-locomo-") as tmp:
            with DefaultServer(Path(tmp), args.server_env) as server:
                log(f"server on {server.address}")
                try:
                    run = measure(server.address, conversations, args)
                except grpc.RpcError:
                    log(f"server log (end): {server.log_tail(10)}")
                    raise
    if args.baseline:
        run.baseline, run.baseline_dated = bm25_baseline(conversations)

    text = summary(run, args, conversations)
    print(text)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tmp_out = args.out.with_name(args.out.name + ".tmp")
    tmp_out.write_text(markdown(run, args, conversations, command.strip()))
    os.replace(tmp_out, args.out)
    log(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
