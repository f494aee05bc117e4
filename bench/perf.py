"""Performance benchmark of Slowave MemoryService over its real gRPC API, against a bare gRPC echo.

What it does. Grows ONE scope to each store size (default 1k, 10k, 100k memories) with batch
Remember (harness.PreloadStream: the retrieval-quality corpus's memories, then templated claims),
starts `slowave-server` as its own process on a copy of that store, and drives closed-loop load
from SEPARATE client processes (multiprocessing, spawn: no client shares the server's GIL) at each
concurrency (default 1 and 16 callers; each caller issues its next call when the previous one
returns). Phases per size, each with a warm-up whose calls are not counted:

* cycle     Activate(task cue) -> Feedback (first memory `used`, coverage COMPLETE: everything
            exposed is covered) -> Commit (fixed outcome summaries, 2-step trajectory). Activate,
            Feedback and Commit latency; cycles/s and RPC calls/s of the full cycle.
* recall    per session: Activate, 8 x Recall(cue) -> one batch Feedback -> Commit. Recall latency.
* remember  per session: Activate, 10 x Remember (scalar form, a new claim each) -> Feedback ->
            Commit. Remember (single) latency.
* batch     per session: Activate, 20 x Remember (batch form, 100 new claims each). Memories/s.

Read phases run before write phases, so the retrieval figures are taken at the preloaded size; the
write phases then add their memories to the same (throwaway) copy. The server's peak resident set
(VmHWM from /proc/<pid>/status) is read after the last phase of each size, and its own memory
(RssAnon) apart from the mapped database file (RssFile) is sampled through the phases.

The ceiling. In the same run and with the same client machinery, a bare grpcio server (its own
process, the same thread-pool size, one unary method echoing its request bytes, payload = the mean
size of a cycle call's request and response) is driven at the same concurrencies; every figure is
also given as a ratio to it.

Task cues are drawn from the retrieval-quality corpus (bench/corpus.py: paraphrase and naming
queries of its gold memories, which are all in the store from 10k on) and from scale.py's
service questions, one third each; the mix is documented in the report.

Stores. On SQLite each preloaded size is kept under bench/.cache/perf/ (git-ignored), keyed by the
preload stream, the corpus code and the schema migrations, and reused by later runs (the preload's
batch Remember rate is then the one measured when the store was built, and marked so); `--fresh`
rebuilds; a cached store is brought up to date with the current embedding model first
(`slowave-admin embed`). From 20k memories the scope's dense graph is built once by a server of its
own and saved beside the cached store (SLOWAVE_GRAPH_DIR); each measuring server gets a copy and
loads it, as a restarted server does, instead of building it (≈ 40 s at 100k) while measured. `--postgres URL` runs on a PostgreSQL server (the benchmark creates and drops its own
databases there); `--postgres auto` starts a throwaway cluster from the machine's binaries
(tests/postgres.py). PostgreSQL stores are not cached.

    python bench/perf.py                 # full run: writes bench/results/perf.{md,png}
    python bench/perf.py --quick         # 1k and 5k, short phases: bench/results/perf-quick.{md,png}
    python bench/perf.py --postgres auto
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import uuid
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import grpc

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from harness import (  # noqa: E402
    ECHO_METHOD,
    REPO,
    RESULTS,
    EchoProcess,
    MemorySampler,
    PreloadStream,
    ServerProcess,
    claim,
    cpu_seconds,
    load,
    memory_of,
    pct,
    service_cue,
)
from slowave.config import DEFAULT_SEMANTIC, Settings, cpu_count  # noqa: E402
from slowave.dense_graph_files import GraphFiles  # noqa: E402
from slowave.dense_index import ANN_MIN_ROWS  # noqa: E402
from slowave.embedding import load_semantic_channel  # noqa: E402
from slowave.v1 import memory_service_pb2 as pb  # noqa: E402
from slowave.v1 import memory_service_pb2_grpc as pb_grpc  # noqa: E402
from slowave.v1 import resources_pb2 as res  # noqa: E402

CACHE = BENCH / ".cache" / "perf"
SCOPE = "project:perf"
RPCS = ("Activate", "Recall", "Remember", "BatchRemember", "Feedback", "Commit")
LABELS = {"BatchRemember": "Remember (batch of 100)", "Remember": "Remember (single)"}
KINDS = ("cycle", "recall", "remember", "batch")
RECALLS_PER_SESSION = 8
REMEMBERS_PER_SESSION = 10
BATCHES_PER_SESSION = 20
BATCH = 100
RPC_TIMEOUT = 120.0
# Every commit carries one of these: consolidation turns each into one lesson once, so the scope
# does not grow with the number of cycles.
SUMMARIES = (
    "The answer was in the project memory and the task was completed.",
    "The lookup found the relevant notes; the change was made as planned.",
    "The task was finished after checking the recorded decision.",
    "Completed the task using the on-call notes of the service.",
)
# Issue 15's acceptance (the CPU budget measured in the handler, at one caller).
TARGETS_TEXT = {
    "p50": "Activate p50 ≤ 5 ms",
    "p99": "Activate p99 ≤ 15 ms",
    "growth": "Activate p50 growth ≤ 1.2×",
    "cycle": "full-cycle calls/s ≥ 15 % of the bare echo",
    "batch": "batch Remember ≥ 3,000 memories/s",
    "cpu": "CPU per RPC in the handler: Activate ≤ 2.5 ms, Feedback and Commit ≤ 1.5 ms",
    "rss": "server RSS ≤ 300 MB per process",
}


def log(message: str) -> None:
    print(message, flush=True)


# ==================================================================================== client side
# Runs in the client processes (spawned: a fresh interpreter, its own GIL).


@dataclass
class ClientSpec:
    kind: str  # cycle | recall | remember | batch | echo
    address: str
    threads: int
    warmup: float
    seconds: float
    cues: list[str]
    proc: int
    tag: str
    payload: int = 0


class Recorder:
    """Latencies (ms) of the calls that START inside the measured window, per RPC."""

    def __init__(self, begin: float, end: float, sizes: bool) -> None:
        self.begin, self.end, self.sizes = begin, end, sizes
        self.latencies: dict[str, list[float]] = defaultdict(list)
        self.bytes: dict[str, list[int]] = defaultdict(lambda: [0, 0])  # request, response bytes
        self.errors: Counter = Counter()
        self.units = 0  # cycles (cycle) or memories stored (batch) started in the window
        self.calls_after_end = 0

    def inside(self, t: float) -> bool:
        return self.begin <= t < self.end

    def call(self, name: str | None, method, request, timeout: float = RPC_TIMEOUT):
        t = time.perf_counter()
        try:
            response = method(request, timeout=timeout)
        except grpc.RpcError as err:
            if name and self.inside(t):
                self.errors[f"{name} {err.code().name}"] += 1
            raise
        if name and self.inside(t):
            self.latencies[name].append((time.perf_counter() - t) * 1000)
            if self.sizes:
                b = self.bytes[name]
                if isinstance(request, bytes):
                    b[0] += len(request)
                    b[1] += len(response)
                else:
                    b[0] += request.ByteSize()
                    b[1] += response.ByteSize()
        return response


def _commit(
    stub: pb_grpc.MemoryServiceStub, rec: Recorder, name: str | None, session_id: str, cue: str, rng: random.Random
) -> None:
    rec.call(
        name,
        stub.Commit,
        pb.CommitRequest(
            session_id=session_id,
            final_goal=cue,
            outcome=res.OUTCOME_SUCCESS,
            outcome_summary=rng.choice(SUMMARIES),
            verification=pb.Verification(
                status=res.VERIFICATION_STATUS_VERIFIED, summary="Checked by the perf client."
            ),
            trajectory=[
                pb.TrajectoryEntry(
                    kind=pb.TRAJECTORY_KIND_ACTION,
                    summary=f"Investigated: {cue}"[:1000],
                    status=pb.TRAJECTORY_STATUS_SUCCEEDED,
                ),
                pb.TrajectoryEntry(
                    kind=pb.TRAJECTORY_KIND_OBSERVATION,
                    summary="The notes answered the question.",
                    status=pb.TRAJECTORY_STATUS_SUCCEEDED,
                ),
            ],
        ),
    )


def _close(
    stub: pb_grpc.MemoryServiceStub,
    rec: Recorder,
    retrieval_ids: list[str],
    session_id: str,
    cue: str,
    rng: random.Random,
) -> None:
    """Complete feedback for every retrieval of the session (one batch call), then Commit; not timed."""
    rec.call(
        None,
        stub.Feedback,
        pb.FeedbackRequest(
            items=[pb.FeedbackItem(retrieval_id=r, coverage=pb.COVERAGE_COMPLETE) for r in retrieval_ids]
        ),
    )
    _commit(stub, rec, None, session_id, cue, rng)


def _activate(stub: pb_grpc.MemoryServiceStub, rec: Recorder, name: str | None, cue: str) -> pb.ActivateResponse:
    return rec.call(name, stub.Activate, pb.ActivateRequest(task=cue, initial_goal=cue, scope=SCOPE))


def cycle(stub: pb_grpc.MemoryServiceStub, rec: Recorder, cue: str, rng: random.Random) -> None:
    """The cycle phase's unit: Activate(task cue) -> Feedback (first memory `used`, coverage
    COMPLETE) -> Commit (bench/ab.py runs it too)."""
    a = _activate(stub, rec, "Activate", cue)
    entries = (
        [
            pb.MemoryFeedbackEntry(
                memory_id=a.memories[0].memory_id, assessment=pb.MEMORY_ASSESSMENT_USED, effect=res.EFFECT_HELPED
            )
        ]
        if a.memories
        else []
    )
    rec.call(
        "Feedback",
        stub.Feedback,
        pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=entries, coverage=pb.COVERAGE_COMPLETE),
    )
    _commit(stub, rec, "Commit", a.session_id, cue, rng)


def _worker(spec: ClientSpec, tid: int, channel: grpc.Channel, rec: Recorder, go: threading.Event) -> None:
    rng = random.Random(f"{spec.tag}/{spec.proc}/{tid}")
    stub = pb_grpc.MemoryServiceStub(channel)
    echo = channel.unary_unary(ECHO_METHOD)
    payload = os.urandom(spec.payload) if spec.kind == "echo" else b""
    go.wait()
    n = 0
    while time.perf_counter() < rec.end:
        cue = rng.choice(spec.cues)
        started = time.perf_counter()
        try:
            if spec.kind == "echo":
                rec.call("Echo", echo, payload)
                continue
            if spec.kind == "cycle":
                cycle(stub, rec, cue, rng)
                rec.units += rec.inside(started)
                continue
            a = _activate(stub, rec, None, cue)
            retrievals = [a.retrieval_id]
            if spec.kind == "recall":
                for _ in range(RECALLS_PER_SESSION):
                    if time.perf_counter() >= rec.end:
                        break
                    r = rec.call(
                        "Recall",
                        stub.Recall,
                        pb.RecallRequest(session_id=a.session_id, scope=SCOPE, query=rng.choice(spec.cues)),
                    )
                    retrievals.append(r.retrieval_id)
            elif spec.kind == "remember":
                for _ in range(REMEMBERS_PER_SESSION):
                    if time.perf_counter() >= rec.end:
                        break
                    n += 1
                    rec.call(
                        "Remember",
                        stub.Remember,
                        pb.RememberRequest(
                            session_id=a.session_id,
                            scope=SCOPE,
                            content=claim(rng, f"{spec.tag}-{spec.proc}-{tid}-{n}"),
                            type=res.MEMORY_TYPE_FACT,
                        ),
                    )
            elif spec.kind == "batch":
                for _ in range(BATCHES_PER_SESSION):
                    if time.perf_counter() >= rec.end:
                        break
                    items = []
                    for _ in range(BATCH):
                        n += 1
                        items.append(
                            pb.RememberItem(
                                content=claim(rng, f"{spec.tag}-{spec.proc}-{tid}-{n}"), type=res.MEMORY_TYPE_FACT
                            )
                        )
                    t = time.perf_counter()
                    rec.call(
                        "BatchRemember",
                        stub.Remember,
                        pb.RememberRequest(session_id=a.session_id, scope=SCOPE, memories=items),
                    )
                    rec.units += BATCH * rec.inside(t)
            _close(stub, rec, retrievals, a.session_id, cue, rng)
        except grpc.RpcError:
            time.sleep(0.01)  # counted by the recorder; the session is abandoned


def client_process(spec: ClientSpec, barrier, results) -> None:
    """One client process: `spec.threads` closed-loop callers, each on a connection of its own.

    One channel shared by the callers is one TCP connection, and the kernel's SO_REUSEPORT
    balancing hands a connection, not a call, to a server process: every call then reached the
    same one of several server processes (measured: 1,063 CPU ticks against 6 for the other),
    so the figures for several processes were one process's. Agents connect from many
    backends, or through a mesh that spreads calls; a channel per caller, with a subchannel pool
    of its own (grpc.use_local_subchannel_pool: channels to one address otherwise share their
    connection), gives each caller its connection."""
    try:
        channels = [
            grpc.insecure_channel(spec.address, options=[("grpc.use_local_subchannel_pool", 1)])
            for _ in range(spec.threads)
        ]
        for channel in channels:
            grpc.channel_ready_future(channel).result(timeout=60)
        go = threading.Event()
        recorders: list[Recorder] = []
        threads = []
        for tid, channel in enumerate(channels):
            rec = Recorder(0.0, 0.0, sizes=True)
            recorders.append(rec)
            threads.append(threading.Thread(target=_worker, args=(spec, tid, channel, rec, go), daemon=True))
        for t in threads:
            t.start()
        barrier.wait(timeout=300)
        begin = time.perf_counter() + spec.warmup
        for rec in recorders:
            rec.begin, rec.end = begin, begin + spec.seconds
        go.set()
        for t in threads:
            t.join()
        merged: dict = {
            "latencies": defaultdict(list),
            "bytes": defaultdict(lambda: [0, 0]),
            "errors": Counter(),
            "units": 0,
        }
        for rec in recorders:
            for k, v in rec.latencies.items():
                merged["latencies"][k] += v
            for k, (a, b) in rec.bytes.items():
                merged["bytes"][k][0] += a
                merged["bytes"][k][1] += b
            merged["errors"].update(rec.errors)
            merged["units"] += rec.units
        for channel in channels:
            channel.close()
        results.put(
            {
                "latencies": dict(merged["latencies"]),
                "bytes": dict(merged["bytes"]),
                "errors": dict(merged["errors"]),
                "units": merged["units"],
            }
        )
    except BaseException:
        barrier.abort()
        results.put({"failure": traceback.format_exc()})


# ==================================================================================== phases


@dataclass
class PhaseResult:
    kind: str
    concurrency: int
    seconds: float
    latencies: dict[str, list[float]]
    bytes: dict[str, list[int]]
    errors: dict[str, int]
    units: int
    wall: float = 0.0  # seconds the phase took, spawning and draining included
    server_cpu: float = 0.0  # the server processes' mean CPU use while the clients ran (cores)
    server_cpu_s: float = 0.0  # their CPU seconds over the phase (warm-up and drain included)
    handler_cpu: dict[str, float] = field(default_factory=dict)  # RPC -> mean CPU s in its handler
    handled: int = 0  # RPCs the server completed in the phase (warm-up included), from its metrics

    def cpu_ms_per_call(self) -> float:
        """All server CPU (every thread and process) over the phase per RPC served in it."""
        return 1000 * self.server_cpu_s / self.handled if self.handled else 0.0

    def calls_per_s(self, rpc: str | None = None) -> float:
        if rpc is None:
            return sum(len(v) for v in self.latencies.values()) / self.seconds
        return len(self.latencies.get(rpc, [])) / self.seconds

    def summary(self, rpc: str) -> dict | None:
        values = sorted(self.latencies.get(rpc, []))
        if not values:
            return None
        return {
            "n": len(values),
            "p50": pct(values, 0.50),
            "p95": pct(values, 0.95),
            "p99": pct(values, 0.99),
            "mean": statistics.fmean(values),
            "calls_s": len(values) / self.seconds,
        }

    def mean_bytes(self, rpc: str) -> tuple[float, float]:
        """Mean request and response size of the timed calls of `rpc`."""
        n = len(self.latencies.get(rpc, []))
        a, b = self.bytes.get(rpc, (0, 0))
        return (a / n, b / n) if n else (0.0, 0.0)

    def mean_call_bytes(self) -> float:
        """Mean of (request + response) / 2 over the timed calls."""
        total = sum(a + b for a, b in self.bytes.values())
        calls = sum(len(self.latencies.get(k, [])) for k in self.bytes)
        return total / 2 / calls if calls else 0.0


def phase_seconds(kind: str, args: argparse.Namespace) -> float:
    """The measured window of a phase. A batch of 100 takes 1–3 s at 16 callers on a 100k store, and
    a batch counts where it starts, so a short window holds two or three per caller and the rate
    moves by a third with one batch more or less: the batch phase gets at least --batch-seconds."""
    return max(args.seconds, args.batch_seconds) if kind == "batch" else args.seconds


def run_phase(
    ctx,
    kind: str,
    address: str,
    concurrency: int,
    args: argparse.Namespace,
    cues: list[str],
    tag: str,
    warmup: float | None = None,
    payload: int = 0,
    server_pid: int | None = None,
    metrics_port: int | None = None,
) -> PhaseResult:
    """Spawns the client processes, releases them together, merges what they measured."""
    t0 = time.perf_counter()
    seconds = phase_seconds(kind, args)
    procs = max(1, min(args.client_procs, concurrency))
    shares = [concurrency // procs + (i < concurrency % procs) for i in range(procs)]
    barrier, results = ctx.Barrier(procs + 1), ctx.Queue()
    warm = args.warmup if warmup is None else warmup
    children = [
        ctx.Process(
            target=client_process,
            daemon=True,
            args=(ClientSpec(kind, address, n, warm, seconds, cues, i, tag, payload), barrier, results),
        )
        for i, n in enumerate(shares)
    ]
    for c in children:
        c.start()
    try:
        barrier.wait(timeout=300)
    except threading.BrokenBarrierError:
        pass  # a child failed: its report says why
    cpu0, t_go = (cpu_seconds(server_pid) if server_pid else 0.0), time.perf_counter()
    scrape0 = rpc_cpu(metrics_port) if metrics_port else {}
    merged = PhaseResult(kind, concurrency, seconds, defaultdict(list), defaultdict(lambda: [0, 0]), Counter(), 0)
    failures = []
    for out in _collect(results, children, deadline=time.monotonic() + warm + seconds + 900):
        if "failure" in out:
            failures.append(out["failure"])
            continue
        for k, v in out["latencies"].items():
            merged.latencies[k] += v
        for k, (a, b) in out["bytes"].items():
            merged.bytes[k][0] += a
            merged.bytes[k][1] += b
        merged.errors.update(out["errors"])
        merged.units += out["units"]
    for c in children:
        c.join(timeout=60)
    if failures:
        raise RuntimeError(f"a client process of phase {kind} failed:\n{failures[0]}")
    merged.latencies, merged.bytes, merged.errors = dict(merged.latencies), dict(merged.bytes), dict(merged.errors)
    merged.wall = time.perf_counter() - t0
    if server_pid:
        merged.server_cpu_s = cpu_seconds(server_pid) - cpu0
        merged.server_cpu = merged.server_cpu_s / (time.perf_counter() - t_go)
    if metrics_port:
        scrape1 = rpc_cpu(metrics_port)
        for method, (total, count) in scrape1.items():
            t0_, c0_ = scrape0.get(method, (0.0, 0.0))
            if count > c0_:
                merged.handler_cpu[method] = (total - t0_) / (count - c0_)
                merged.handled += int(count - c0_)
    return merged


def rpc_cpu(metrics_port: int) -> dict[str, tuple[float, float]]:
    """Per method: (sum, count) of the server's `slowave_rpc_cpu_seconds` histogram (every process's,
    aggregated by the one scrape)."""
    import urllib.request

    from prometheus_client.parser import text_string_to_metric_families

    with urllib.request.urlopen(f"http://127.0.0.1:{metrics_port}/metrics", timeout=30) as r:
        text = r.read().decode()
    out: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
    for family in text_string_to_metric_families(text):
        if family.name != "slowave_rpc_cpu_seconds":
            continue
        for sample in family.samples:
            method = sample.labels.get("grpc_method", "")
            if sample.name.endswith("_sum"):
                out[method][0] += sample.value
            elif sample.name.endswith("_count"):
                out[method][1] += sample.value
    return {k: (v[0], v[1]) for k, v in out.items()}


def _collect(results, children: list, deadline: float) -> list[dict]:
    """One report per child; a child that exits without one (killed) or the deadline fails the phase."""
    import queue

    reports: list[dict] = []
    while len(reports) < len(children):
        try:
            reports.append(results.get(timeout=1.0))
            continue
        except queue.Empty:
            pass
        if time.monotonic() > deadline:
            raise RuntimeError("client processes did not report before the deadline")
        if all(c.exitcode is not None for c in children):
            try:
                reports.append(results.get(timeout=5.0))
            except queue.Empty:
                codes = [c.exitcode for c in children]
                raise RuntimeError(f"a client process exited without a report (exit codes {codes})") from None
    return reports


def describe_phase(p: PhaseResult) -> str:
    parts = []
    for rpc in (*RPCS, "Echo"):
        s = p.summary(rpc)
        if s:
            parts.append(
                f"{LABELS.get(rpc, rpc)} p50 {s['p50']:.2f} p95 {s['p95']:.2f} p99 {s['p99']:.2f} ms "
                f"({s['calls_s']:.0f}/s)"
            )
    if p.kind == "cycle":
        parts.append(f"{p.units / p.seconds:.1f} cycles/s, {p.calls_per_s():.0f} calls/s")
    if p.kind == "batch":
        parts.append(f"{p.units / p.seconds:,.0f} memories/s")
    if p.server_cpu:
        parts.append(f"server CPU {p.server_cpu:.2f} cores")
    if p.handler_cpu:
        per = ", ".join(f"{m} {1000 * v:.2f}" for m, v in sorted(p.handler_cpu.items()))
        parts.append(f"CPU ms/RPC in handler: {per}; all server CPU {p.cpu_ms_per_call():.2f} ms/RPC")
    if p.errors:
        parts.append(f"errors {p.errors}")
    return f"  {p.kind:<8} c={p.concurrency:<3} " + "; ".join(parts) + f" [{p.wall:.0f} s]"


# ==================================================================================== stores


@dataclass
class Preload:
    size: int
    start: int  # the size it was grown from
    rate: float  # batch Remember memories/s while growing it
    seconds: float
    server_vmhwm: int
    when: str
    cached: bool = False


def server_env(
    args: argparse.Namespace, url: str, processes: int = 1, metrics: bool = False, graphs: Path | None = None
) -> dict[str, str]:
    return {
        **({"SLOWAVE_GRAPH_DIR": str(graphs)} if graphs is not None else {}),
        "SLOWAVE_DATABASE_URL": url,
        "SLOWAVE_MAX_WORKERS": str(args.workers),
        "SLOWAVE_MAX_CONCURRENT_RPCS": str(args.max_concurrent_rpcs),
        "SLOWAVE_PROCESSES": str(processes),
        "SLOWAVE_METRICS_ADDR": "127.0.0.1:0" if metrics else "",
    }


def grow(args: argparse.Namespace, stream: PreloadStream, url: str, have: int, size: int, workdir: Path) -> Preload:
    """Grows the scope of the store at `url` from `have` to `size` memories through a server of its own."""
    workdir.mkdir(parents=True, exist_ok=True)
    items = stream.items(have, size - have)
    with ServerProcess(workdir, server_env(args, url)) as server, grpc.insecure_channel(server.address) as channel:
        t = time.perf_counter()
        rate = load(pb_grpc.MemoryServiceStub(channel), SCOPE, items, batch=BATCH, check=True)
        seconds = time.perf_counter() - t
        hwm = memory_of(server.process.pid)["VmHWM"]
    return Preload(size, have, rate, seconds, hwm, f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC")


def _copy_sqlite(src: Path, dst: Path) -> None:
    for suffix in ("-wal", "-shm"):
        Path(f"{dst}{suffix}").unlink(missing_ok=True)
    shutil.copyfile(src, dst)
    if Path(f"{src}-wal").exists():
        shutil.copyfile(f"{src}-wal", f"{dst}-wal")


class SqliteStores:
    """One SQLite file per preloaded size: under bench/.cache/perf (reused across runs) or a temp dir."""

    backend = "SQLite"

    def __init__(self, args: argparse.Namespace, stream: PreloadStream, tmp: Path) -> None:
        self.args, self.stream, self.tmp = args, stream, tmp
        self.key = stream.key()
        self.built: set[int] = set()
        self.dir = tmp / "stores" if args.no_cache else CACHE
        self.dir.mkdir(parents=True, exist_ok=True)
        if not args.no_cache:
            ignore = BENCH / ".cache" / ".gitignore"
            if not ignore.exists():
                ignore.write_text("# benchmark caches (bench/perf.py): never committed\n*\n")
            stale = [p for p in self.dir.iterdir() if not p.name.startswith(self.key)]
            for p in stale:
                shutil.rmtree(p) if p.is_dir() else p.unlink()
            if stale:
                log(f"removed {len(stale)} cached file(s) of an older preload stream or schema from {self.dir}")

    def _db(self, size: int) -> Path:
        return self.dir / f"{self.key}-{size}.db"

    def _meta(self, size: int) -> Path:
        return self.dir / f"{self.key}-{size}.json"

    def ensure(self, size: int) -> Preload:
        if self._db(size).exists() and self._meta(size).exists() and not self.args.fresh:
            self._embed(size)
            return Preload(**{**json.loads(self._meta(size).read_text()), "cached": True})
        smaller = sorted(s for s in self._sizes() if s < size)
        base = smaller[-1] if smaller else 0
        work = self.tmp / f"grow-{size}"
        work.mkdir(parents=True, exist_ok=True)
        db = work / "store.db"
        if base:
            _copy_sqlite(self._db(base), db)
        log(f"preloading {size:,} memories (from {base:,}) …")
        info = grow(self.args, self.stream, f"sqlite:///{db}", base, size, work)
        part = self.dir / f".{self._db(size).name}.part"
        _copy_sqlite(db, part)
        os.replace(part, self._db(size))
        self._meta(size).write_text(json.dumps({k: v for k, v in info.__dict__.items() if k != "cached"}))
        shutil.rmtree(work, ignore_errors=True)
        return info

    def _embed(self, size: int) -> None:
        """A store cached before the embedding model changed holds vectors of the old model; a
        server would embed every memory again when it starts (≈ 25 s at 100k) and build the graph
        of the new vectors while it is measured. `slowave-admin embed` brings the cached file up to
        date once (a no-op when it is)."""
        started = time.perf_counter()
        env = {**os.environ, "SLOWAVE_DATABASE_URL": f"sqlite:///{self._db(size)}"}
        admin = Path(sys.executable).with_name("slowave-admin")
        done = subprocess.run([str(admin), "embed"], env=env, capture_output=True, text=True, check=True)
        count = int(re.search(r"embedded: (\d+)", done.stdout).group(1)) if "embedded" in done.stdout else 0
        if count:
            log(
                f"  embedded {count:,} memories of the cached store with the current model in {time.perf_counter() - started:.0f} s"
            )

    def graph_is_current(self, size: int, path: Path) -> bool:
        """The saved graph covers exactly the cached store's vectors (not one a measuring server of
        an earlier version of this script saved after its phases had added memories), and was built
        with the graph parameters of this version (a server discards any other and builds its own
        while the phases run)."""
        from slowave.dense_index import graph_parameters

        with open(path, "rb") as f:
            header = json.loads(f.readline())
        if any(header.get(k) != v for k, v in graph_parameters(header.get("ndim", 0)).items()):
            return False
        rows = header.get("rows")
        with sqlite3.connect(f"file:{self._db(size)}?mode=ro", uri=True) as con:
            have = con.execute("SELECT count(*) FROM memory_vectors WHERE encoder_id = ?", (_encoder_id(),)).fetchone()[
                0
            ]
        return rows == have

    def _sizes(self) -> list[int]:
        """Sizes with a usable store: in the cache, or built by this run (--fresh)."""
        out = []
        for p in self.dir.glob(f"{self.key}-*.db"):
            size = int(p.stem.rsplit("-", 1)[1])
            if self._meta(size).exists() and (not self.args.fresh or size in self.built):
                out.append(size)
        return out

    def graph_dir(self, size: int) -> Path:
        """Where the measuring servers of a size save and load the scope's dense graph: a server
        restarted on its store loads it (slowave.dense_graph_files) instead of building it for
        ≈ 40 s at 100k while the phases run; a graph that does not match the store is built anew."""
        return self.dir / f"{self.key}-{size}.graphs"

    def working(self, size: int, workdir: Path) -> str:
        self.built.add(size)
        _copy_sqlite(self._db(size), workdir / "work.db")
        return f"sqlite:///{workdir / 'work.db'}"

    def release(self, url: str) -> None:
        path = Path(url.removeprefix("sqlite:///"))
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)

    def close(self) -> None:
        pass


class PostgresStores:
    """PostgreSQL: one base database grown in place; each size is measured on a TEMPLATE copy of it."""

    backend = "PostgreSQL"

    def __init__(self, args: argparse.Namespace, stream: PreloadStream, tmp: Path) -> None:
        from sqlalchemy.engine import make_url

        self.args, self.stream, self.tmp = args, stream, tmp
        self.cluster = None
        if args.postgres == "auto":
            sys.path.insert(0, str(REPO))
            from tests.postgres import PostgresCluster, find_bindir

            bindir = find_bindir()
            if bindir is None:
                raise SystemExit("--postgres auto: no PostgreSQL binaries found (apt-get install postgresql)")
            self.cluster = PostgresCluster(bindir).start()
            self.admin_url = make_url(self.cluster.url("postgres"))
            log(f"started a throwaway PostgreSQL cluster ({bindir}) on port {self.cluster.port}")
        else:
            self.admin_url = make_url(args.postgres)
        self.version = self._exec("SHOW server_version")
        self.base = self._create(f"slowave_perf_base_{uuid.uuid4().hex[:8]}")
        self.have = 0
        self.databases: list[str] = [self.base]

    def _conninfo(self, database: str | None = None) -> dict:
        u = self.admin_url
        return {
            k: v
            for k, v in {
                "host": u.host or "127.0.0.1",
                "port": u.port,
                "user": u.username,
                "password": u.password,
                "dbname": database or u.database or "postgres",
            }.items()
            if v
        }

    def _exec(self, sql: str) -> str | None:
        import psycopg

        with psycopg.connect(**self._conninfo(), autocommit=True) as conn:
            cursor = conn.execute(sql)
            row = cursor.fetchone() if cursor.description else None
            return row[0] if row else None

    def _create(self, name: str, template: str | None = None) -> str:
        self._exec(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else ""))
        return name

    def _url(self, name: str) -> str:
        return self.admin_url.set(drivername="postgresql+psycopg", database=name).render_as_string(hide_password=False)

    def ensure(self, size: int) -> Preload:
        if size < self.have:
            raise SystemExit("PostgreSQL stores grow in place: give the sizes in ascending order")
        log(f"preloading {size:,} memories (from {self.have:,}) …")
        info = grow(self.args, self.stream, self._url(self.base), self.have, size, self.tmp / f"grow-{size}")
        self.have = size
        return info

    def graph_dir(self, size: int) -> Path:
        """Shared by this run's measuring servers of a size (see SqliteStores.graph_dir)."""
        return self.tmp / f"graphs-{size}"

    def graph_is_current(self, size: int, path: Path) -> bool:
        return True  # built by this run from the size's base database, which phases never change

    def working(self, size: int, workdir: Path) -> str:
        name = self._create(f"slowave_perf_{size}_{uuid.uuid4().hex[:8]}", template=self.base)
        self.databases.append(name)
        return self._url(name)

    def release(self, url: str) -> None:
        name = url.rsplit("/", 1)[1]
        self._exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self.databases.remove(name)

    def close(self) -> None:
        for name in list(self.databases):
            try:
                self._exec(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            except Exception as exc:
                log(f"could not drop {name}: {exc}")
        if self.cluster is not None:
            self.cluster.destroy()


# ==================================================================================== the run


@dataclass
class SizeResult:
    size: int
    preload: Preload
    phases: dict[tuple[str, int], PhaseResult] = field(default_factory=dict)
    vmhwm: int = 0
    vmrss: int = 0
    anon_peak_total: int = 0  # the largest sum of RssAnon over the server's processes
    anon_peak_process: int = 0  # the largest RssAnon of one server process
    file_peak_total: int = 0  # the largest sum of RssFile (mostly the memory-mapped database)
    added: int = 0  # memories the write phases stored on top of the preload
    policy: str = ""
    processes: int = 1


def cue_mix(stream: PreloadStream, count: int = 3000) -> tuple[list[str], list[tuple[str, int, int, list[str]]]]:
    """Task cues: one third each corpus paraphrase queries, corpus naming queries, service questions."""
    corpus = stream.corpus()
    pools = {
        "corpus paraphrase query (other words than its gold memory)": sorted(
            {q.text for q in corpus.queries if q.family == "paraphrase"}
        ),
        "corpus naming query (names an identifier: ticket, port, date, version, person)": sorted(
            {q.text for q in corpus.queries if q.family == "naming"}
        ),
    }
    rng = random.Random(stream.seed)
    services = [service_cue(rng) for _ in range(count)]
    pools["service question (bench/scale.py's mix: a service name and common words of the templated claims)"] = sorted(
        set(services)
    )
    cues, mix = [], []
    names = list(pools)
    for i in range(count):
        cues.append(rng.choice(pools[names[i % len(names)]]))
    for name in names:
        used = [c for i, c in enumerate(cues) if i % len(names) == names.index(name)]
        mix.append((name, len(pools[name]), len(used), random.Random(1).sample(pools[name], 2)))
    rng.shuffle(cues)
    return cues, mix


def _encoder_id() -> str | None:
    channel = load_semantic_channel(DEFAULT_SEMANTIC)
    return channel.encoder.encoder_id if channel is not None else None


def prepare_graph(args: argparse.Namespace, stores, size: int, workdir: Path) -> None:
    """From ANN_MIN_ROWS vectors a scope is served by a dense graph built in the background after its
    first query (≈ 40 s at 100k): a server measured meanwhile would be measured building it. Unless
    the size's graph dir holds a current graph of the model, one server is started on a copy of the
    store, asked once, and stopped once it has saved the graph; each measuring server gets a copy
    of the dir and loads it, as a restarted server does."""
    encoder_id = _encoder_id()
    if size < ANN_MIN_ROWS or encoder_id is None:
        return
    graphs = stores.graph_dir(size)
    path = GraphFiles(graphs).path(Settings.tenant, SCOPE, encoder_id)
    if path.exists():
        if stores.graph_is_current(size, path):
            return
        path.unlink()
    workdir.mkdir(parents=True, exist_ok=True)
    url = stores.working(size, workdir)
    started = time.perf_counter()
    try:
        with ServerProcess(workdir, server_env(args, url, 1, graphs=graphs)) as server:
            with grpc.insecure_channel(server.address) as channel:
                pb_grpc.MemoryServiceStub(channel).Activate(
                    pb.ActivateRequest(task="prepare the dense graph", initial_goal="prepare", scope=SCOPE),
                    timeout=RPC_TIMEOUT,
                )
            deadline = time.monotonic() + 600
            while not path.exists() and time.monotonic() < deadline:
                time.sleep(0.5)
    finally:
        stores.release(url)
    log(
        f"  dense graph of the {size:,} store built and saved for the measuring servers in {time.perf_counter() - started:.0f} s"
    )


def measure_size(
    ctx, args: argparse.Namespace, stores, size: int, preload: Preload, cues: list[str], tmp: Path, processes: int
) -> SizeResult:
    workdir = tmp / f"measure-{size}-p{processes}"
    workdir.mkdir(parents=True, exist_ok=True)
    url = stores.working(size, workdir)
    result = SizeResult(size, preload, processes=processes)
    try:
        t0 = time.perf_counter()
        # A copy of the prepared graphs: a measuring server saves its graph again as its phases add
        # memories, and a graph over more rows than the cached store holds never loads again.
        graphs = workdir / "graphs"
        if stores.graph_dir(size).exists():
            shutil.copytree(stores.graph_dir(size), graphs, dirs_exist_ok=True)
        with ServerProcess(workdir, server_env(args, url, processes, metrics=True, graphs=graphs)) as server:
            # The supervisor logs its metrics port once every process serves, which may be after
            # the first one accepts connections.
            deadline = time.monotonic() + 60
            while (
                match := re.search(r"metrics port (\d+)", server.log_text())
            ) is None and time.monotonic() < deadline:
                time.sleep(0.1)
            metrics_port = int(match.group(1)) if match else None
            log(
                f"  {processes} server process(es) up in {time.perf_counter() - t0:.1f} s "
                f"(pid {server.process.pid}, metrics port {metrics_port})"
            )
            with grpc.insecure_channel(server.address) as channel:
                probe = pb_grpc.MemoryServiceStub(channel).Activate(
                    pb.ActivateRequest(task=cues[0], initial_goal="probe", scope=SCOPE), timeout=RPC_TIMEOUT
                )
                result.policy = probe.retrieval_policy_version  # (the probe session stays open: no reaper)
            first = True
            with MemorySampler(server.process.pid) as sampler:
                for kind in KINDS:
                    for c in args.concurrency:
                        tag = f"s{size}-{kind}-c{c}"
                        phase = run_phase(
                            ctx,
                            kind,
                            server.address,
                            c,
                            args,
                            cues,
                            tag,
                            warmup=args.warmup * 2 if first else None,
                            server_pid=server.process.pid,
                            metrics_port=metrics_port,
                        )
                        first = False
                        result.phases[(kind, c)] = phase
                        if kind == "remember":
                            result.added += len(phase.latencies.get("Remember", []))
                        if kind == "batch":
                            result.added += phase.units
                        log(describe_phase(phase))
            mem = memory_of(server.process.pid)
            result.vmhwm, result.vmrss = mem["VmHWM"], mem["VmRSS"]
            result.anon_peak_total, result.anon_peak_process = sampler.peak_anon_total, sampler.peak_anon_process
            result.file_peak_total = sampler.peak_file_total
            log(
                f"  server VmHWM {mb(result.vmhwm)} MB, VmRSS {mb(result.vmrss)} MB; peaks: RssAnon "
                f"{mb(result.anon_peak_total)} MB in all, {mb(result.anon_peak_process)} MB in one process, "
                f"RssFile {mb(result.file_peak_total)} MB"
            )
    finally:
        stores.release(url)
    return result


def measure_echo(ctx, args: argparse.Namespace, payload: int, tmp: Path) -> tuple[dict[int, PhaseResult], int]:
    phases = {}
    with EchoProcess(tmp, args.workers, args.max_concurrent_rpcs) as echo:
        for c in args.concurrency:
            phases[c] = run_phase(
                ctx,
                "echo",
                echo.address,
                c,
                args,
                ["-"],
                f"echo-c{c}",
                payload=payload,
                warmup=args.warmup * 2 if c == args.concurrency[0] else None,
                server_pid=echo.process.pid,
            )
            log(describe_phase(phases[c]))
        hwm = memory_of(echo.process.pid)["VmHWM"]
    return phases, hwm


# ==================================================================================== report


def mb(n: int) -> str:
    return f"{n / 2**20:,.0f}"


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}×" if b else "–"


def percent(a: float, b: float) -> str:
    return f"{100 * a / b:.0f} %" if b else "–"


def size_label(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 and n >= 1000 else f"{n:,}"


def verdict(ok: bool) -> str:
    return "**pass**" if ok else "**miss**"


def targets(
    sizes: list[SizeResult], echo: dict[int, PhaseResult], c_low: int, quick: bool
) -> list[tuple[str, str, str]]:
    """(target, measured, pass/miss) rows; evaluated at the largest size measured."""
    big = sizes[-1]
    at = size_label(big.size) + (
        " (quick run; the targets are stated for 100k)" if quick or big.size != 100_000 else ""
    )
    rows = []
    act = big.phases[("cycle", c_low)].summary("Activate")
    rows.append((f"{TARGETS_TEXT['p50']} at {at}, c={c_low}", f"{act['p50']:.2f} ms", verdict(act["p50"] <= 5)))
    rows.append((f"{TARGETS_TEXT['p99']} at {at}, c={c_low}", f"{act['p99']:.2f} ms", verdict(act["p99"] <= 15)))
    if len(sizes) >= 2:
        prev = sizes[-2].phases[("cycle", c_low)].summary("Activate")
        g = act["p50"] / prev["p50"]
        rows.append(
            (
                f"{TARGETS_TEXT['growth']} from {size_label(sizes[-2].size)} to {size_label(big.size)}, c={c_low}",
                f"{prev['p50']:.2f} → {act['p50']:.2f} ms = {g:.2f}×",
                verdict(g <= 1.2),
            )
        )
    for c, e in echo.items():
        if c != max(echo):
            continue  # the target is stated for many callers
        cyc = big.phases[("cycle", c)]
        share = cyc.calls_per_s() / e.calls_per_s("Echo")
        rows.append(
            (
                f"{TARGETS_TEXT['cycle']} at {at}, c={c}",
                f"{cyc.calls_per_s():,.0f} vs {e.calls_per_s('Echo'):,.0f} calls/s = {100 * share:.0f} %",
                verdict(share >= 0.15),
            )
        )
    if big.preload.size > big.preload.start:
        p = big.preload
        note = f", store built {p.when}, reused from the cache" if p.cached else ""
        rows.append(
            (
                f"{TARGETS_TEXT['batch']}: preload {size_label(p.start) if p.start else '0'} → "
                f"{size_label(p.size)}, one client, batches of {BATCH}{note}",
                f"{p.rate:,.0f} memories/s",
                verdict(p.rate >= 3000),
            )
        )
    for c in echo:
        b = big.phases[("batch", c)]
        rows.append(
            (
                f"{TARGETS_TEXT['batch']}: batch phase at {at}, c={c}",
                f"{b.units / b.seconds:,.0f} memories/s",
                verdict(b.units / b.seconds >= 3000),
            )
        )
    cpu = big.phases[("cycle", c_low)].handler_cpu
    if cpu:
        budget = {"Activate": 2.5, "Feedback": 1.5, "Commit": 1.5}
        rows.append(
            (
                f"{TARGETS_TEXT['cpu']} at {at}, c={c_low}",
                " / ".join(f"{m} {1000 * cpu.get(m, 0):.2f} ms" for m in budget),
                verdict(all(1000 * cpu.get(m, 0) <= b for m, b in budget.items())),
            )
        )
    rows.append(
        (
            f"{TARGETS_TEXT['rss']} at {at} (peak of one process's own memory, RssAnon, over all phases; "
            "the memory-mapped database is shared page cache, reported apart)",
            f"{mb(big.anon_peak_process)} MB (VmHWM over {big.processes} processes {mb(big.vmhwm)} MB)",
            verdict(0 < big.anon_peak_process <= 300 * 2**20),
        )
    )
    return rows


def report(
    args: argparse.Namespace,
    stores,
    sizes: list[SizeResult],
    echo: dict[int, PhaseResult],
    echo_hwm: int,
    payload: int,
    mix: list,
    elapsed: float,
) -> str:
    c_low = min(args.concurrency)
    lines = [
        "# Slowave performance: per-RPC latency, cycle throughput, batch Remember, server memory",
        "",
        f"Generated by `bench/perf.py{' --quick' if args.quick else ''}` on "
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC in {elapsed / 60:.1f} min; machine: {platform.machine()}, "
        f"{os.cpu_count()} cores, Python {platform.python_version()}, grpcio {grpc.__version__}; "
        f"store: {stores.backend}{' ' + stores.version if getattr(stores, 'version', None) else ''}; "
        f"retrieval policy `{sizes[-1].policy}`. Server: `slowave-server` in its own process, "
        f"{args.workers} RPC threads (SLOWAVE_MAX_WORKERS), max {args.max_concurrent_rpcs} concurrent RPCs, "
        f"loopback. Clients: closed loop, {args.client_procs} client process(es) at most (spawned, one channel each, "
        f"callers spread over them), {args.warmup:g} s warm-up (doubled for the first phase of a server) then "
        f"{args.seconds:g} s measured per phase ({phase_seconds('batch', args):g} s for batch Remember); "
        "a call counts when it starts inside the window.",
        "",
        "## Targets",
        "",
        "| target | measured | result |",
        "|---|---|---|",
        *(f"| {t} | {m} | {v} |" for t, m, v in targets(sizes, echo, c_low, args.quick)),
        "",
        "## Latency per RPC (ms)",
        "",
        f"The ratio columns divide by the bare echo's percentile at the same concurrency (payload {payload:,} bytes "
        "each way).",
        "",
        "| memories | c | RPC | calls | calls/s | p50 | p95 | p99 | mean | p50 / echo | p99 / echo | bytes in / out |",
        "|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    phase_of = {
        "Activate": "cycle",
        "Feedback": "cycle",
        "Commit": "cycle",
        "Recall": "recall",
        "Remember": "remember",
        "BatchRemember": "batch",
    }
    for s in sizes:
        for c in args.concurrency:
            e = echo[c].summary("Echo")
            for rpc in RPCS:
                phase = s.phases[(phase_of[rpc], c)]
                x = phase.summary(rpc)
                if x:
                    size_in, size_out = phase.mean_bytes(rpc)
                    lines.append(
                        f"| {s.size:,} | {c} | {LABELS.get(rpc, rpc)} | {x['n']:,} | {x['calls_s']:,.1f} | "
                        f"{x['p50']:.2f} | {x['p95']:.2f} | {x['p99']:.2f} | {x['mean']:.2f} | "
                        f"{ratio(x['p50'], e['p50'])} | {ratio(x['p99'], e['p99'])} | "
                        f"{size_in:,.0f} / {size_out:,.0f} |"
                    )
    for c in args.concurrency:
        e = echo[c].summary("Echo")
        size_in, size_out = echo[c].mean_bytes("Echo")
        lines.append(
            f"| echo | {c} | bare gRPC echo | {e['n']:,} | {e['calls_s']:,.1f} | {e['p50']:.2f} | {e['p95']:.2f} | "
            f"{e['p99']:.2f} | {e['mean']:.2f} | 1.00× | 1.00× | {size_in:,.0f} / {size_out:,.0f} |"
        )
    lines += [
        "",
        "## Throughput",
        "",
        "Full cycle = Activate → Feedback (first memory `used`, coverage COMPLETE) → Commit; its calls/s counts "
        "all three RPCs. Percentages are of the bare echo's calls/s at the same concurrency. Server CPU: the server "
        "process's user + system CPU time over the phase's wall time (warm-up and drain included); the machine has 2 cores, "
        "and the server's Python code runs on about one at a time (the GIL), SQLite and gRPC's C core adding to it.",
        "",
        "| memories | c | cycles/s | cycle calls/s | % of echo | server CPU in the cycle phase (cores) | Recall calls/s "
        "| % of echo | Remember (single) calls/s | % of echo | batch Remember memories/s | batch calls/s | % of echo |",
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        for c in args.concurrency:
            ec = echo[c].calls_per_s("Echo")
            cyc, rec, rem, bat = (s.phases[(k, c)] for k in KINDS)
            lines.append(
                f"| {s.size:,} | {c} | {cyc.units / cyc.seconds:,.1f} | {cyc.calls_per_s():,.0f} | "
                f"{percent(cyc.calls_per_s(), ec)} | {cyc.server_cpu:.2f} | {rec.calls_per_s('Recall'):,.0f} | "
                f"{percent(rec.calls_per_s('Recall'), ec)} | {rem.calls_per_s('Remember'):,.0f} | "
                f"{percent(rem.calls_per_s('Remember'), ec)} | {bat.units / bat.seconds:,.0f} | "
                f"{bat.calls_per_s('BatchRemember'):,.1f} | {percent(bat.calls_per_s('BatchRemember'), ec)} |"
            )
    for c in args.concurrency:
        lines.append(
            f"| echo | {c} | | {echo[c].calls_per_s('Echo'):,.0f} | 100 % | {echo[c].server_cpu:.2f} | | | | | | | |"
        )
    lines += [
        "",
        "## Preload and server memory",
        "",
        f"Preload: one client, one seeding session, batch Remember of {BATCH} memories per call over gRPC, growing "
        "the scope from the previous size. Server memory: the measuring server's VmHWM (peak resident set, summed "
        "over its processes) after all phases of its size, and, sampled every 0.2 s over the phases, the peaks of "
        "its own memory (RssAnon: heap, vectors, caches) and of its file-backed pages (RssFile: mostly the SQLite "
        "database, which every process maps into memory, so the same page-cache pages count once per process); "
        f"the bare echo server peaked at {mb(echo_hwm)} MB.",
        "",
        "| memories | preload | batch Remember while preloading (memories/s) | loading server VmHWM (MB) "
        "| measuring server VmHWM (MB) | × echo | VmRSS at end (MB) | peak RssAnon, all processes / one (MB) "
        "| peak RssFile, all processes (MB) | memories the write phases added (timed calls) |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for s in sizes:
        p = s.preload
        how = (
            f"cached, built {p.when}" if p.cached else "this run"
        ) + f": {p.start:,} → {p.size:,} in {p.seconds:.0f} s"
        lines.append(
            f"| {s.size:,} | {how} | {p.rate:,.0f} | {mb(p.server_vmhwm)} | {mb(s.vmhwm)} | "
            f"{ratio(s.vmhwm, echo_hwm)} | {mb(s.vmrss)} | {mb(s.anon_peak_total)} / {mb(s.anon_peak_process)} "
            f"| {mb(s.file_peak_total)} | {s.added:,} |"
        )
    errors = [(s.size, k, c, p.errors) for s in sizes for (k, c), p in s.phases.items() if p.errors]
    errors += [("echo", "echo", c, p.errors) for c, p in echo.items() if p.errors]
    lines += ["", "## Errors", ""]
    lines += [f"* {size} {k} c={c}: {e}" for size, k, c, e in errors] or ["None: every timed call succeeded."]
    lines += [
        "",
        "## Workload",
        "",
        "Store: ONE scope (`project:perf`) grown with the memories of the retrieval-quality corpus (bench/corpus.py: "
        "20 projects' decisions, constraints, lessons, preferences and facts, old and current claims of changing "
        "facts; shuffled) followed by templated claims (services, people, ports, versions, tickets; FACT), "
        "so every size is a prefix of the next.",
        "",
        "Task cues (Activate tasks and Recall queries), drawn uniformly from this mix:",
        "",
        "| family | distinct cues | share of the drawn cues | examples |",
        "|---|---:|---:|---|",
        *(
            f"| {name} | {n:,} | {100 * used / sum(m[2] for m in mix):.0f} % | {' / '.join(repr(x) for x in ex)} |"
            for name, n, used, ex in mix
        ),
        "",
        f"Phases per size, in this order, each at concurrency {', '.join(map(str, args.concurrency))}: "
        "**cycle** (Activate → Feedback → Commit, all timed; commits carry one of 4 fixed outcome summaries and a "
        f"2-step trajectory), **recall** (per session Activate, {RECALLS_PER_SESSION} timed Recalls, one batch "
        f"Feedback, Commit), **remember** (per session {REMEMBERS_PER_SESSION} timed single Remembers of new "
        f"claims), **batch** (per session {BATCHES_PER_SESSION} timed batch Remembers of {BATCH} new claims). "
        "Read phases come first, so Activate and Recall are measured at the preloaded size; the write phases "
        "grow the throwaway copy by the memories counted above.",
        "",
        "Echo ceiling: a bare grpcio server (`bench/harness.py echo`) in its own process, the same thread-pool "
        "size and concurrent-RPC limit, one unary method returning its request bytes; the payload is the mean "
        f"of request and response size over the cycle's calls at the largest size ({payload:,} bytes).",
    ]
    return "\n".join(lines) + "\n"


def plot(sizes: list[SizeResult], echo: dict[int, PhaseResult], args: argparse.Namespace, path: Path) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is not installed (pip install -e '.[bench]'): no plot")
        return False
    phase_of = {
        "Activate": "cycle",
        "Feedback": "cycle",
        "Commit": "cycle",
        "Recall": "recall",
        "Remember": "remember",
        "BatchRemember": "batch",
    }
    fig, axes = plt.subplots(2, 3, figsize=(15, 8.5), sharex=True)
    xs = [s.size for s in sizes]
    colors = {"p50": "tab:blue", "p95": "tab:orange", "p99": "tab:red"}
    styles = dict(zip(args.concurrency, ("-", "--", ":", "-.")))
    for ax, rpc in zip(axes.flat, RPCS):
        for c in args.concurrency:
            for q, color in colors.items():
                ys = []
                for s in sizes:
                    x = s.phases[(phase_of[rpc], c)].summary(rpc)
                    ys.append(x[q] if x else float("nan"))
                ax.plot(xs, ys, styles[c], color=color, marker="o", ms=3, label=f"{q}, c={c}")
            e = echo[c].summary("Echo")
            ax.axhline(e["p50"], color="grey", linestyle=styles[c], lw=0.8, label=f"echo p50, c={c}")
        if rpc == "Activate":
            ax.axhline(5, color="green", lw=0.8, alpha=0.6, label="target p50 5 ms")
            ax.axhline(20, color="darkred", lw=0.8, alpha=0.6, label="target p99 20 ms")
        ax.set_title(LABELS.get(rpc, rpc))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xticks(xs, [size_label(x) for x in xs])
        ax.minorticks_off()
        ax.grid(True, alpha=0.3)
        ax.set_ylabel("latency (ms)")
    for ax in axes[-1]:
        ax.set_xlabel("memories in the scope")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
    fig.suptitle(
        "Slowave per-RPC latency against store size (closed loop, "
        f"{' / '.join(f'c={c}' for c in args.concurrency)} callers; grey: bare gRPC echo p50)"
    )
    fig.tight_layout(rect=(0, 0.09, 1, 0.97))
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def processes_section(every: list[SizeResult], echo: dict[int, PhaseResult], args, default: int) -> str:
    """Each size with each process count: the figures of issue 15's table, plus CPU per RPC."""
    c_low, c_high = args.concurrency[0], args.concurrency[-1]
    lines = [
        "",
        "## Server processes",
        "",
        f"SLOWAVE_PROCESSES per row (the tables above use {default}, the default: one per core). CPU ms per "
        "RPC: the serving thread's CPU inside the handler (`slowave_rpc_cpu_seconds`, the server's own histogram, "
        "every process's in one scrape), and all the server's CPU (every thread of every process, /proc) over the "
        "RPCs it served in the phase.",
        "",
        f"| memories | processes | batch Remember memories/s (c={c_high}) | Activate p50 / p95 / p99 ms (c={c_low}) "
        f"| full cycle calls/s (c={c_high}) | share of echo | CPU ms in handler: Activate / Feedback / Commit "
        f"| all server CPU ms per cycle RPC (c={c_high}) | server CPU cores (cycle, c={c_high}) |",
        "|---:|---:|---:|---|---:|---:|---|---:|---:|",
    ]
    for r in every:
        cyc_low, cyc_high = r.phases.get(("cycle", c_low)), r.phases.get(("cycle", c_high))
        batch = r.phases.get(("batch", c_high))
        a = cyc_low.summary("Activate") if cyc_low else None
        cpu = cyc_high.handler_cpu if cyc_high else {}
        lines.append(
            f"| {r.size:,} | {r.processes} | {batch.units / batch.seconds if batch else 0:,.0f} | "
            + (f"{a['p50']:.2f} / {a['p95']:.2f} / {a['p99']:.2f}" if a else "–")
            + f" | {cyc_high.calls_per_s() if cyc_high else 0:,.0f} | "
            + (percent(cyc_high.calls_per_s(), echo[c_high].calls_per_s("Echo")) if cyc_high else "–")
            + " | "
            + " / ".join(f"{1000 * cpu[m]:.2f}" if m in cpu else "–" for m in ("Activate", "Feedback", "Commit"))
            + f" | {cyc_high.cpu_ms_per_call() if cyc_high else 0:.2f} | {cyc_high.server_cpu if cyc_high else 0:.2f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="1k and 5k, 1 s warm-up, 3 s phases")
    parser.add_argument("--sizes", type=int, nargs="+", help="store sizes (default 1000 10000 100000)")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--seconds", type=float, help="measured seconds per phase (default 15)")
    parser.add_argument("--warmup", type=float, help="warm-up seconds per phase (default 2)")
    parser.add_argument(
        "--batch-seconds",
        type=float,
        help="measured seconds of the batch Remember phase at least (default 15; --quick 3)",
    )
    parser.add_argument(
        "--client-procs",
        type=int,
        default=1,
        help="client processes per phase at most (callers are spread over them; 1 gave the highest echo "
        "ceiling on 2 cores)",
    )
    parser.add_argument("--workers", type=int, default=16, help="server RPC threads (echo gets the same)")
    parser.add_argument("--max-concurrent-rpcs", type=int, default=64)
    parser.add_argument(
        "--postgres", metavar="URL|auto", help="PostgreSQL server URL, or `auto` for a throwaway cluster"
    )
    parser.add_argument("--fresh", action="store_true", help="rebuild the cached SQLite stores")
    parser.add_argument("--no-cache", action="store_true", help="build the stores in a temp dir, keep nothing")
    parser.add_argument("--output", help="file stem under bench/results (default perf, or perf-quick)")
    parser.add_argument(
        "--processes",
        type=int,
        nargs="+",
        default=[1, 2],
        help="server process counts measured at each size (SLOWAVE_PROCESSES); the report's main tables "
        "and targets use the default, one per core",
    )
    args = parser.parse_args()
    args.sizes = sorted(set(args.sizes or ([1000, 5000] if args.quick else [1000, 10000, 100000])))
    args.seconds = args.seconds or (3.0 if args.quick else 15.0)
    args.batch_seconds = args.batch_seconds or (3.0 if args.quick else 15.0)
    args.warmup = args.warmup if args.warmup is not None else (1.0 if args.quick else 2.0)
    args.concurrency = sorted(set(args.concurrency))
    stem = args.output or ("perf-quick" if args.quick else "perf")

    started = time.perf_counter()
    ctx = mp.get_context("spawn")
    stream = PreloadStream()
    cues, mix = cue_mix(stream)
    args.processes = sorted(set(args.processes))
    default_processes = cpu_count() if cpu_count() in args.processes else args.processes[-1]
    every: list[SizeResult] = []
    with tempfile.TemporaryDirectory(prefix="slowave-perf-") as tmp_name:
        tmp = Path(tmp_name)
        stores = (PostgresStores if args.postgres else SqliteStores)(args, stream, tmp)
        try:
            for size in args.sizes:
                preload = stores.ensure(size)
                log(
                    f"{size:,} memories: preload {'cached (built ' + preload.when + ')' if preload.cached else 'done'}"
                    f", batch Remember {preload.rate:,.0f} memories/s"
                )
                prepare_graph(args, stores, size, tmp / f"prepare-{size}")
                for processes in args.processes:
                    every.append(measure_size(ctx, args, stores, size, preload, cues, tmp, processes))
        finally:
            stores.close()
        sizes = [r for r in every if r.processes == default_processes]
        big = sizes[-1].phases
        payload = round(statistics.fmean([big[("cycle", c)].mean_call_bytes() for c in args.concurrency]))
        log(f"bare gRPC echo, payload {payload:,} bytes:")
        echo, echo_hwm = measure_echo(ctx, args, payload, tmp)
    elapsed = time.perf_counter() - started
    text = report(args, stores, sizes, echo, echo_hwm, payload, mix, elapsed)
    text += processes_section(every, echo, args, default_processes)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{stem}.md").write_text(text)
    drew = plot(sizes, echo, args, RESULTS / f"{stem}.png")
    targets_block = text.split("## Targets", 1)[1].split("## Latency", 1)[0]
    log("\nTargets:" + targets_block.rstrip())
    log(f"\nwrote {RESULTS / (stem + '.md')}" + (f" and {stem}.png" if drew else "") + f" in {elapsed / 60:.1f} min")


if __name__ == "__main__":
    main()
