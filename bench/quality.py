"""Retrieval-quality benchmark of Slowave MemoryService, over its real gRPC API.

What is measured. For every query of the corpus (bench/corpus.py), the ranked memories that
`Activate` (task = the query, page_size = 10) returns in the query's scope, scored against the
query's gold memories: recall@1/5/10 (a gold memory among the first k), MRR (1/rank of the first
gold memory, 0 when none of the 10 is gold) and the stale-hit rate (share of returned memories
that are old, superseded claims of a changing fact). Results are split by query family
(PARAPHRASE: asks in other words; NAMING: names an exact identifier) and by split (TRAIN queries
give feedback; held-out TEST queries of the same gold memories never do), at round 0 (before any
feedback) and after 1, 3 and 10 rounds of feedback.

How. The script starts its own server (the installed `slowave-server`, on 127.0.0.1:0 and a temp
SQLite file, stopped with SIGTERM at the end), loads each scope through one seeding session
(batch Remember, 100 claims per call, old claims first and current claims last; closed with
Commit), then runs rounds. A round Activates every train query and records the ranking, then
gives honest simulated feedback, one Feedback call per retrieval with coverage COMPLETE (a gold
memory `used`; an old claim `stale`/SUPERSEDED with its current claim as replacement; anything
else `irrelevant`), and Commits each session. Since every ranking of a round is read before any
of that round's feedback is given, "round r" is exactly the quality after r rounds of feedback.
Test queries run at the reported rounds with neutral, implicit coverage only (no learning).
Every commit carries the same outcome summary, so consolidation adds one derived lesson per
scope and nothing more; the script waits for it before measuring, which keeps runs deterministic.

The whole run is done twice: lexical (SLOWAVE_SEMANTIC=off) and with the default semantic channel
(`semantic`: SLOWAVE_SEMANTIC=static); `--modes minilm` adds all-MiniLM-L6-v2 itself. A semantic server that does not start, or that reports the same
retrieval_policy_version as the lexical one (the variable is ignored), is reported as not available.

`--distractors N` stores N more claims in every scope, bench/harness.py's templated claims about
other services (the store bench/scale.py and bench/perf.py grow), interleaved with the corpus'
memories in a fixed seeded order that keeps the corpus' own order (old claims before current
ones): a scope of ~150 claims is an easy one, and an agent's scope grows into the thousands.

    python bench/quality.py            # full run: writes bench/results/quality.{md,png}
    python bench/quality.py --quick    # small corpus, rounds 0/1/3: bench/results/quality-quick.{md,png}
    python bench/quality.py --distractors 2000 --out bench/results/quality-distractors2000
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

from corpus import FAMILIES, SPLITS, Corpus, CorpusParams, MemorySpec, Query, build_corpus
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from slowave.v1 import resources_pb2 as res

BENCH = Path(__file__).resolve().parent
RESULTS = BENCH / "results"
FULL_ROUNDS = (0, 1, 3, 10)
QUICK_ROUNDS = (0, 1, 3)
PAGE_SIZE = 10
BATCH = 100
RPC_TIMEOUT = 60.0
STARTUP_TIMEOUT = 300.0  # a semantic server may load an embedding model first
# Channel selection: "semantic" is the default hybrid channel (static embeddings shipped in the
# package); "minilm" runs all-MiniLM-L6-v2 itself (needs the [semantic] extra, with torch).
MODES = {
    "lexical": {"SLOWAVE_SEMANTIC": "off"},
    "semantic": {"SLOWAVE_SEMANTIC": "static"},
    "minilm": {"SLOWAVE_SEMANTIC": "minilm"},
}
# Every commit's outcome summary: consolidated into one lesson per scope, MATCHED ever after.
SUMMARY = "Retrieval benchmark task closed by the simulated agent."
MEMORY_TYPES = {
    "decision": res.MEMORY_TYPE_DECISION,
    "constraint": res.MEMORY_TYPE_CONSTRAINT,
    "lesson": res.MEMORY_TYPE_LESSON,
    "preference": res.MEMORY_TYPE_PREFERENCE,
    "fact": res.MEMORY_TYPE_FACT,
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------ the server


class ServerUnavailable(Exception):
    """The server did not start (the reason is the end of its log)."""


class ServerProcess:
    """`slowave-server` as a subprocess on a free loopback port and a fresh SQLite file."""

    def __init__(self, workdir: Path, extra_env: dict[str, str]) -> None:
        self.workdir = workdir
        self.log_path = workdir / "server.log"
        env = {k: v for k, v in os.environ.items() if not k.startswith("SLOWAVE_")}
        env.update(
            {
                "SLOWAVE_LISTEN_ADDR": "127.0.0.1:0",
                "SLOWAVE_DATABASE_URL": f"sqlite:///{workdir / 'slowave.db'}",
                "SLOWAVE_METRICS_ADDR": "",  # no metrics endpoint
                "SLOWAVE_SESSION_IDLE_TIMEOUT": "0",  # no reaper: sessions wait for their feedback phase
                "HF_HUB_OFFLINE": "1",
                "TRANSFORMERS_OFFLINE": "1",  # never download a model at run time
                **extra_env,
            }
        )
        self.env = env
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    def __enter__(self) -> ServerProcess:
        self.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Starts the process and waits for its `on port N` log line; stops it again on any failure."""
        with open(self.log_path, "wb") as out:
            self.process = subprocess.Popen(
                [server_binary()], env=self.env, stdout=out, stderr=subprocess.STDOUT, cwd=self.workdir
            )
        try:
            self.port = self._wait_for_port()
            with grpc.insecure_channel(self.address) as channel:
                grpc.channel_ready_future(channel).result(timeout=30)
        except grpc.FutureTimeoutError as exc:
            self.stop()
            raise ServerUnavailable(f"port {self.port} never became ready: {self.log_tail()}") from exc
        except BaseException:
            self.stop()
            raise

    def _wait_for_port(self) -> int:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while time.monotonic() < deadline:
            match = re.search(r"\bon port (\d+)", self.log_text())
            if match:
                return int(match.group(1))
            if self.process.poll() is not None:
                raise ServerUnavailable(f"exited with {self.process.returncode}: {self.log_tail()}")
            time.sleep(0.1)
        raise ServerUnavailable(f"no 'on port N' line within {STARTUP_TIMEOUT:.0f}s: {self.log_tail()}")

    def stop(self) -> None:
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def log_tail(self, lines: int = 3) -> str:
        tail = [line.strip() for line in self.log_text().splitlines() if line.strip()][-lines:]
        return " | ".join(tail) or "(no output)"


def server_binary() -> str:
    beside = Path(sys.executable).parent / "slowave-server"
    found = str(beside) if beside.exists() else shutil.which("slowave-server")
    if not found:
        raise SystemExit("slowave-server is not installed: run `pip install -e .` (or `make install`) first")
    return found


# ------------------------------------------------------------------------------------ seeding


def _timestamp(day: date) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(datetime(day.year, day.month, day.day, 12, tzinfo=UTC))
    return ts


def _commit(stub: pb_grpc.MemoryServiceStub, session_id: str, goal: str, found: bool = True) -> None:
    stub.Commit(
        pb.CommitRequest(
            session_id=session_id,
            final_goal=goal[:1000],
            outcome=res.OUTCOME_SUCCESS if found else res.OUTCOME_PARTIAL,
            outcome_summary=SUMMARY,
            verification=pb.Verification(
                status=res.VERIFICATION_STATUS_UNVERIFIED, summary="Simulated agent of the retrieval benchmark."
            ),
        ),
        timeout=RPC_TIMEOUT,
    )


def _close_neutrally(stub: pb_grpc.MemoryServiceStub, activation: pb.ActivateResponse, goal: str) -> None:
    """Implicit, neutral coverage of whatever was exposed (no learning), then Commit."""
    stub.Feedback(
        pb.FeedbackRequest(retrieval_id=activation.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=RPC_TIMEOUT
    )
    _commit(stub, activation.session_id, goal)


def with_distractors(scope: str, memories: list[MemorySpec], count: int, seed: int) -> list[MemorySpec | str]:
    """The scope's memories with `count` templated claims (bench/harness.py) among them, at seeded
    positions; the memories keep their order."""
    if not count:
        return list(memories)
    from harness import claims  # harness imports this module: import it when asked for

    rng = random.Random(f"{seed}:{scope}")
    out: list[MemorySpec | str] = list(claims(rng, 0, count))
    for position, memory in zip(sorted(rng.sample(range(count + len(memories)), len(memories))), memories):
        out.insert(position, memory)
    return out


def _item(m: MemorySpec | str) -> pb.RememberItem:
    if isinstance(m, str):
        return pb.RememberItem(content=m, type=res.MEMORY_TYPE_FACT)
    return pb.RememberItem(content=m.text, type=MEMORY_TYPES[m.type], occurred_at=_timestamp(m.occurred_at))


def seed_scope(
    stub: pb_grpc.MemoryServiceStub, scope: str, memories: list[MemorySpec | str]
) -> tuple[dict[str, str], str]:
    """Stores the scope's memories (and distractors, given as plain texts) in order through one
    seeding session; returns (key -> id of the corpus' memories, policy)."""
    goal = "Load the benchmark corpus into this project scope"
    act = stub.Activate(pb.ActivateRequest(task=goal, initial_goal=goal, scope=scope), timeout=RPC_TIMEOUT)
    ids: dict[str, str] = {}
    for start in range(0, len(memories), BATCH):
        chunk = memories[start : start + BATCH]
        batch = stub.Remember(
            pb.RememberRequest(session_id=act.session_id, scope=scope, memories=[_item(m) for m in chunk]),
            timeout=RPC_TIMEOUT,
        ).batch
        for m, result in zip(chunk, batch.results):
            if result.HasField("error"):
                what = m if isinstance(m, str) else m.key
                raise RuntimeError(f"remember failed for {what}: {result.error.code} {result.error.message}")
            if not isinstance(m, str):
                ids[m.key] = result.data.memory_id
    _close_neutrally(stub, act, goal)
    return ids, act.retrieval_policy_version


def wait_for_summary_lesson(stub: pb_grpc.MemoryServiceStub, scope: str, timeout: float = 120.0) -> str:
    """Waits until consolidation has turned the seeding commit's summary into a lesson; returns its id."""
    deadline = time.monotonic() + timeout
    while True:
        act = stub.Activate(
            pb.ActivateRequest(task=SUMMARY, initial_goal="wait for consolidation", scope=scope, page_size=PAGE_SIZE),
            timeout=RPC_TIMEOUT,
        )
        _close_neutrally(stub, act, "wait for consolidation")
        lesson = next((m.memory_id for m in act.memories if m.content == SUMMARY), None)
        if lesson:
            return lesson
        if time.monotonic() > deadline:
            raise RuntimeError(f"consolidation produced no lesson in {scope} within {timeout:.0f}s")
        time.sleep(0.25)


# ------------------------------------------------------------------------------------ evaluation


@dataclass
class Outcome:
    """How one query fared in one round."""

    query: str
    family: str
    split: str
    changed_fact: bool
    round: int
    rank: int | None  # 1-based rank of the first gold memory among the returned ones
    returned: int
    stale: int  # returned old claims
    foreign: int  # returned memories that are not part of the corpus (the consolidated summary lesson)
    top: str | None  # content of the first result
    top_signals: tuple[float, float] | None  # (relevance, learned) of the first result
    gold_signals: tuple[float, float] | None  # (relevance, learned) of the first gold result


@dataclass
class FeedbackStats:
    calls: int = 0
    used: int = 0
    irrelevant: int = 0
    stale: int = 0
    retired: int = 0
    rejected: Counter = field(default_factory=Counter)


@dataclass
class _Retrieval:
    query: Query
    response: pb.ActivateResponse


def _signals(memory: res.Memory) -> tuple[float, float]:
    return memory.ranking.relevance, memory.ranking.learned


class Evaluator:
    """Runs rounds of queries against a seeded server and gives honest simulated feedback."""

    def __init__(self, stub: pb_grpc.MemoryServiceStub, corpus: Corpus, ids: dict[str, str]) -> None:
        self.stub, self.corpus, self.ids = stub, corpus, ids
        self.key_of = {v: k for k, v in ids.items()}
        self.old_ids = {ids[m.key] for m in corpus.memories if m.role == "old"}
        self.stats = FeedbackStats()

    def run_round(self, queries: list[Query], round_: int, learn: bool) -> list[Outcome]:
        """Reads every ranking first, then gives the round's feedback and commits."""
        retrievals = [self._activate(q) for q in queries]
        outcomes = [self._score(r, round_) for r in retrievals]
        for r, o in zip(retrievals, outcomes):
            self._feedback(r, learn)
            _commit(self.stub, r.response.session_id, r.query.text, found=o.rank is not None)
        return outcomes

    def _activate(self, q: Query) -> _Retrieval:
        response = self.stub.Activate(
            pb.ActivateRequest(task=q.text, initial_goal=q.text, scope=q.scope, page_size=PAGE_SIZE),
            timeout=RPC_TIMEOUT,
        )
        return _Retrieval(q, response)

    def _score(self, r: _Retrieval, round_: int) -> Outcome:
        gold = {self.ids[k] for k in r.query.gold}
        memories = list(r.response.memories)
        returned = [m.memory_id for m in memories]
        rank = next((i for i, mid in enumerate(returned, 1) if mid in gold), None)
        return Outcome(
            query=r.query.key,
            family=r.query.family,
            split=r.query.split,
            changed_fact=r.query.changed_fact,
            round=round_,
            rank=rank,
            returned=len(returned),
            stale=sum(mid in self.old_ids for mid in returned),
            foreign=sum(mid not in self.key_of for mid in returned),
            top=memories[0].content if memories else None,
            top_signals=_signals(memories[0]) if memories else None,
            gold_signals=_signals(memories[rank - 1]) if rank else None,
        )

    def _feedback(self, r: _Retrieval, learn: bool) -> None:
        entries = [self._judge(m.memory_id, r.query) for m in r.response.memories] if learn else []
        record = self.stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=r.response.retrieval_id, memory_feedback=entries, coverage=pb.COVERAGE_COMPLETE
            ),
            timeout=RPC_TIMEOUT,
        ).record
        s = self.stats
        s.calls += 1
        s.retired += len(record.applied.retired)
        s.rejected.update(f"{x.reason} ({x.field})" for x in record.rejected)
        for e in entries:
            s.used += e.assessment == pb.MEMORY_ASSESSMENT_USED
            s.irrelevant += e.assessment == pb.MEMORY_ASSESSMENT_IRRELEVANT
            s.stale += e.assessment == pb.MEMORY_ASSESSMENT_STALE

    def _judge(self, memory_id: str, q: Query) -> pb.MemoryFeedbackEntry:
        """Honest feedback: the gold is used, an old claim is stale (superseded), the rest irrelevant."""
        key = self.key_of.get(memory_id)
        if key in q.gold:
            return pb.MemoryFeedbackEntry(
                memory_id=memory_id, assessment=pb.MEMORY_ASSESSMENT_USED, effect=res.EFFECT_HELPED
            )
        spec = self.corpus.by_key.get(key) if key else None
        if spec is not None and spec.role == "old":
            current = self.corpus.by_key[spec.replaced_by]
            return pb.MemoryFeedbackEntry(
                memory_id=memory_id,
                assessment=pb.MEMORY_ASSESSMENT_STALE,
                stale_reason=pb.STALE_REASON_SUPERSEDED,
                replacement_memory_id=self.ids[current.key],
                reason=f"Superseded by the newer claim: {current.text}",
            )
        return pb.MemoryFeedbackEntry(memory_id=memory_id, assessment=pb.MEMORY_ASSESSMENT_IRRELEVANT)


# ------------------------------------------------------------------------------------ metrics


@dataclass
class Metrics:
    n: int
    r1: float
    r5: float
    r10: float
    mrr: float
    stale: float  # stale hits / returned results


def metrics_of(outcomes: list[Outcome]) -> Metrics:
    n = len(outcomes)
    ranks = [o.rank for o in outcomes]
    returned = sum(o.returned for o in outcomes)
    return Metrics(
        n=n,
        r1=sum(r is not None and r <= 1 for r in ranks) / n,
        r5=sum(r is not None and r <= 5 for r in ranks) / n,
        r10=sum(r is not None and r <= 10 for r in ranks) / n,
        mrr=sum(1 / r for r in ranks if r) / n,
        stale=sum(o.stale for o in outcomes) / returned if returned else 0.0,
    )


GROUPS = (*FAMILIES, "changed facts")


def group_of(o: Outcome, group: str) -> bool:
    return o.changed_fact if group == "changed facts" else o.family == group


def summarise(outcomes: list[Outcome], rounds: tuple[int, ...]) -> dict[tuple[str, str, int], Metrics]:
    table = {}
    for group in GROUPS:
        for split in SPLITS:
            for r in rounds:
                sel = [o for o in outcomes if group_of(o, group) and o.split == split and o.round == r]
                if sel:
                    table[(group, split, r)] = metrics_of(sel)
    return table


# ------------------------------------------------------------------------------------ one mode


@dataclass
class ModeResult:
    mode: str
    status: str  # "ok", "not available", "failed"
    reason: str = ""
    policy: str = ""
    seconds: float = 0.0
    seed_seconds: float = 0.0
    table: dict = field(default_factory=dict)
    outcomes: list[Outcome] = field(default_factory=list)
    feedback: FeedbackStats = field(default_factory=FeedbackStats)
    round_seconds: dict[int, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def run_mode(
    mode: str, corpus: Corpus, rounds: tuple[int, ...], lexical_policy: str | None, distractors: int = 0
) -> ModeResult:
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"slowave-bench-{mode}-") as tmp:
        server = ServerProcess(Path(tmp), MODES[mode])
        try:
            server.start()
        except ServerUnavailable as exc:
            return ModeResult(mode, "not available", f"the server did not start: {exc}")
        try:
            with grpc.insecure_channel(server.address) as channel:
                stub = pb_grpc.MemoryServiceStub(channel)
                return _evaluate(mode, stub, corpus, rounds, lexical_policy, started, distractors)
        finally:
            server.stop()


def _evaluate(
    mode: str,
    stub: pb_grpc.MemoryServiceStub,
    corpus: Corpus,
    rounds: tuple[int, ...],
    lexical_policy: str | None,
    started: float,
    distractors: int = 0,
) -> ModeResult:
    ids: dict[str, str] = {}
    policy = ""
    for scope in corpus.scopes:
        stored = with_distractors(scope, corpus.scope_memories(scope), distractors, corpus.params.seed)
        scope_ids, policy = seed_scope(stub, scope, stored)
        ids.update(scope_ids)
        if mode != "lexical" and policy == lexical_policy:
            return ModeResult(
                mode,
                "not available",
                f"SLOWAVE_SEMANTIC={MODES[mode]['SLOWAVE_SEMANTIC']} is ignored: the server reports the "
                f"lexical retrieval_policy_version {policy!r}",
                policy,
            )
    for scope in corpus.scopes:
        wait_for_summary_lesson(stub, scope)
    result = ModeResult(mode, "ok", policy=policy, seed_seconds=time.monotonic() - started)
    log(
        f"[{mode}] seeded {len(ids)} memories (and {distractors} distractors per scope) "
        f"in {result.seed_seconds:.1f}s (policy {policy})"
    )

    train = _ordered([q for q in corpus.queries if q.split == "train"], corpus.params.seed)
    test = _ordered([q for q in corpus.queries if q.split == "test"], corpus.params.seed + 1)
    evaluator = Evaluator(stub, corpus, ids)
    for r in range(max(rounds) + 1):
        t0 = time.monotonic()
        if r in rounds:
            result.outcomes += evaluator.run_round(test, r, learn=False)
        measured = evaluator.run_round(train, r, learn=True)
        if r in rounds:
            result.outcomes += measured
        result.round_seconds[r] = time.monotonic() - t0
        log(f"[{mode}] round {r}: {time.monotonic() - t0:.1f}s")
    result.table = summarise(result.outcomes, rounds)
    result.feedback = evaluator.stats
    result.seconds = time.monotonic() - started
    return result


def _ordered(queries: list[Query], seed: int) -> list[Query]:
    """A fixed, seeded order that mixes the scopes."""
    out = sorted(queries, key=lambda q: q.key)
    random.Random(seed).shuffle(out)
    return out


def probe_policy() -> str | None:
    """The retrieval_policy_version of a lexical server (SLOWAVE_SEMANTIC=off), for a semantic-only run."""
    with (
        tempfile.TemporaryDirectory(prefix="slowave-bench-probe-") as tmp,
        ServerProcess(Path(tmp), MODES["lexical"]) as server,
    ):
        with grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            act = stub.Activate(
                pb.ActivateRequest(task="probe", initial_goal="probe", scope="project:probe"), timeout=RPC_TIMEOUT
            )
            _close_neutrally(stub, act, "probe")
            return act.retrieval_policy_version


# ------------------------------------------------------------------------------------ report


def _f(x: float) -> str:
    return f"{x:.3f}"


def mode_table(result: ModeResult, rounds: tuple[int, ...]) -> str:
    if not result.ok:
        return f"**{result.mode}: {result.status}** — {result.reason}\n"
    lines = [
        "| queries | split | round | n | R@1 | R@5 | R@10 | MRR | stale hits |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for group in GROUPS:
        for split in SPLITS:
            for r in rounds:
                m = result.table.get((group, split, r))
                if m:
                    lines.append(
                        f"| {group} | {split} | {r} | {m.n} | {_f(m.r1)} | {_f(m.r5)} | {_f(m.r10)} | "
                        f"{_f(m.mrr)} | {_f(m.stale)} |"
                    )
    return "\n".join(lines) + "\n"


def summary_table(results: list[ModeResult], rounds: tuple[int, ...]) -> str:
    arrow = " → ".join(str(r) for r in rounds)
    header = "| queries | split |" + "".join(f" {r.mode} R@5 ({arrow}) | {r.mode} MRR ({arrow}) |" for r in results)
    lines = [header, "|---|---|" + "---|---|" * len(results)]
    for group in FAMILIES:
        for split in SPLITS:
            cells = []
            for res_ in results:
                if not res_.ok:
                    cells += [res_.status, res_.status]
                    continue
                ms = [res_.table[(group, split, r)] for r in rounds]
                cells += [" → ".join(f"{m.r5:.2f}" for m in ms), " → ".join(f"{m.mrr:.2f}" for m in ms)]
            lines.append(f"| {group} | {split} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def _sig(signals: tuple[float, float] | None) -> str:
    return f"relevance {signals[0]:.3f}, learned {signals[1]:+.2f}" if signals else ""


def examples(result: ModeResult, corpus: Corpus, final_round: int, per_family: int = 4) -> str:
    """A few train queries whose gold is still not first at the last round."""
    queries = {q.key: q for q in corpus.queries}
    lines = []
    for family in FAMILIES:
        misses = sorted(
            (
                o
                for o in result.outcomes
                if o.family == family and o.split == "train" and o.round == final_round and o.rank != 1
            ),
            key=lambda o: o.query,
        )
        for o in random.Random(corpus.params.seed).sample(misses, min(per_family, len(misses))):
            q = queries[o.query]
            got = f"rank {o.rank} ({_sig(o.gold_signals)})" if o.rank else "not returned"
            top = f"“{o.top}” ({_sig(o.top_signals)})" if o.top else "nothing returned"
            lines.append(f"- *{family}* “{q.text}” — gold {got}: “{corpus.by_key[q.gold[0]].text}”; top: {top}")
    return "\n".join(lines) + "\n" if lines else "(none)\n"


def regressions(result: ModeResult, corpus: Corpus, rounds: tuple[int, ...], limit: int = 4) -> str:
    """Queries whose gold ranked worse at the last round than at an earlier one: feedback hurt them."""
    ranks: dict[str, dict[int, int | None]] = {}
    last: dict[str, Outcome] = {}
    for o in result.outcomes:
        ranks.setdefault(o.query, {})[o.round] = o.rank
        if o.round == max(rounds):
            last[o.query] = o
    worse = sorted(
        k for k, by_round in ranks.items() if min((r or 99) for r in by_round.values()) < (by_round[max(rounds)] or 99)
    )
    queries = {q.key: q for q in corpus.queries}
    lines = [
        f"{len(worse)} of {len(ranks)} queries ranked their gold worse at round {max(rounds)} than at an "
        f"earlier round" + (f" ({sum(queries[k].split == 'test' for k in worse)} of them held out)." if worse else ".")
    ]
    for key in worse[:limit]:
        o, q = last[key], queries[key]
        path = " → ".join(str(ranks[key][r] or "—") for r in rounds)
        lines.append(
            f"- [{q.split}] “{q.text}” gold rank by round {path}; gold “{corpus.by_key[q.gold[0]].text}” "
            f"({_sig(o.gold_signals) or 'not returned'}); top “{o.top}” ({_sig(o.top_signals)})"
        )
    return "\n".join(lines) + "\n"


def server_revision() -> str:
    """The commit of the working tree (read-only git), marked `+modified` when server/ has local changes."""
    repo = BENCH.parent
    try:
        head = subprocess.run(
            ["git", "-C", str(repo), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(repo), "status", "--porcelain", "--", "server"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return (head or "unknown") + ("+modified" if dirty else "")


def machine() -> dict[str, str]:
    nproc = subprocess.run(["nproc"], capture_output=True, text=True).stdout.strip() if shutil.which("nproc") else ""
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "nproc": nproc or str(os.cpu_count()),
        "python": platform.python_version(),
        "platform": platform.platform(),
    }


def markdown(
    results: list[ModeResult], corpus: Corpus, rounds: tuple[int, ...], quick: bool, distractors: int = 0
) -> str:
    m = machine()
    stats = corpus.stats()
    options = (" --quick" if quick else "") + (f" --distractors {distractors}" if distractors else "")
    title = (
        "Retrieval quality" + (" (quick)" if quick else "") + (f", {distractors:,} distractors" if distractors else "")
    )
    out = [
        f"# {title}\n",
        f"Generated by `bench/quality.py{options}` (`make bench-quality` runs the full "
        f"benchmark) on {m['date']}, server at commit `{server_revision()}`; machine: nproc {m['nproc']}, "
        f"Python {m['python']}, {m['platform']}.\n",
        *(
            [
                f"Every scope also holds {distractors:,} templated claims about other services "
                "(bench/harness.py), interleaved with the corpus' memories.\n"
            ]
            if distractors
            else []
        ),
        "Metrics per query over the first page (page_size 10) of `Activate` in the query's scope: "
        "R@k = a gold memory among the first k; MRR = 1/rank of the first gold memory (0 if absent); "
        "stale hits = share of returned memories that are old, superseded claims. Round r = after r rounds "
        "of honest feedback on the train queries; test queries (held out, same gold memories) never give feedback.\n",
        "## Summary\n",
        summary_table(results, rounds),
    ]
    for r in results:
        out.append(f"## {r.mode}\n")
        if r.ok:
            per_round = sum(r.round_seconds.values()) / len(r.round_seconds)
            out.append(
                f"retrieval_policy_version `{r.policy}`; {r.seconds:.0f} s in all (seeding {r.seed_seconds:.0f} s, "
                f"{per_round:.0f} s per round on average).\n"
            )
        out.append(mode_table(r, rounds))
    out.append("## Corpus\n")
    out.append(
        "| parameter | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in asdict(corpus.params).items())
    )
    out.append("\n| statistic | value |\n|---|---|\n" + "".join(f"| {k} | {v} |\n" for k, v in stats.items()))
    out.append(
        "\n`content_overlap` = mean share of a query's content words (stop words removed) that occur in its "
        "gold memory.\n"
    )
    out.append("## Feedback given\n")
    for r in results:
        if r.ok:
            f = r.feedback
            foreign = sum(o.foreign for o in r.outcomes)
            out.append(
                f"- {r.mode}: {f.calls} Feedback calls; entries used {f.used}, irrelevant {f.irrelevant}, "
                f"stale {f.stale}; memories retired {f.retired}; rejected entries "
                f"{dict(f.rejected) or 'none'}; results outside the corpus (the consolidated summary "
                f"lesson) {foreign}.\n"
            )
    for r in results:
        if r.ok:
            out.append(f"\n## Still wrong after round {max(rounds)} ({r.mode}, train queries)\n")
            out.append(examples(r, corpus, max(rounds)))
            out.append(f"\n## Made worse by feedback ({r.mode})\n")
            out.append(regressions(r, corpus, rounds))
    return "\n".join(out)


def plot(results: list[ModeResult], rounds: tuple[int, ...], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5), sharex=True)
    colors = {"lexical": "tab:blue", "semantic": "tab:orange", "minilm": "tab:green"}
    styles = {"train": "-", "test": "--"}
    for col, family in enumerate(FAMILIES):
        for row, (metric, label) in enumerate((("r5", "recall@5"), ("mrr", "MRR"))):
            ax = axes[row][col]
            for r in results:
                if not r.ok:
                    continue
                for split in SPLITS:
                    ys = [getattr(r.table[(family, split, x)], metric) for x in rounds]
                    ax.plot(rounds, ys, styles[split], marker="o", color=colors.get(r.mode), label=f"{r.mode} {split}")
            ax.set_title(f"{family} queries: {label}")
            ax.set_ylim(-0.02, 1.02)
            ax.set_xticks(rounds)
            ax.grid(alpha=0.3)
            if row == 1:
                ax.set_xlabel("feedback rounds")
    missing = [f"{r.mode}: {r.status}" for r in results if not r.ok]
    fig.suptitle("Slowave retrieval quality vs feedback rounds" + (f"  ({'; '.join(missing)})" if missing else ""))
    handles, labels = axes[0][0].get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="lower center", ncol=4)
    fig.tight_layout(rect=(0, 0.05, 1, 0.96))
    tmp = path.with_name(path.name + ".tmp")
    fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)
    os.replace(tmp, path)


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


# ------------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description="Slowave retrieval-quality benchmark (see the module docstring).")
    parser.add_argument("--quick", action="store_true", help="3 scopes, ~150 memories, ~60 queries, rounds 0/1/3")
    parser.add_argument(
        "--modes",
        default="lexical,semantic",
        help="comma-separated: lexical, semantic (the default static channel), minilm",
    )
    parser.add_argument(
        "--out", type=Path, help="output path without extension (default bench/results/quality[-quick])"
    )
    parser.add_argument(
        "--distractors",
        type=int,
        default=0,
        help="templated claims about other services stored among each scope's memories (default none)",
    )
    args = parser.parse_args()
    # SIGTERM unwinds like Ctrl-C, so the server subprocess and temp files are always cleaned up.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in MODES for m in modes):
        parser.error(f"--modes takes a comma-separated subset of {', '.join(MODES)}")

    params = CorpusParams.quick() if args.quick else CorpusParams()
    rounds = QUICK_ROUNDS if args.quick else FULL_ROUNDS
    corpus = build_corpus(params)
    log(f"corpus: {corpus.stats()}")

    results: list[ModeResult] = []
    lexical_policy = None
    for mode in modes:
        if mode != "lexical" and lexical_policy is None:
            lexical_policy = probe_policy()
        log(f"[{mode}] starting")
        try:
            result = run_mode(mode, corpus, rounds, lexical_policy, args.distractors)
        except Exception as exc:
            traceback.print_exc()
            result = ModeResult(mode, "failed", f"{type(exc).__name__}: {exc}")
        if mode == "lexical" and result.ok:
            lexical_policy = result.policy
        log(f"[{mode}] {result.status} {result.reason} ({result.seconds:.0f}s)")
        results.append(result)

    report = markdown(results, corpus, rounds, args.quick, args.distractors)
    print(summary_table(results, rounds))
    for r in results:
        print(f"{r.mode}:\n{mode_table(r, rounds)}")
    out = args.out or RESULTS / ("quality-quick" if args.quick else "quality")
    out.parent.mkdir(parents=True, exist_ok=True)
    _write(out.with_suffix(".md"), report)
    plot(results, rounds, out.with_suffix(".png"))
    log(f"wrote {out.with_suffix('.md')} and {out.with_suffix('.png')}")
    return 1 if any(r.status == "failed" for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
