"""Shared pieces of the benchmarks that grow a store and time it over gRPC (scale.py, perf.py).

* The server harness: `ServerProcess` (the installed `slowave-server` as a subprocess on a free
  loopback port; defined in quality.py and re-exported here), `EchoProcess` (a bare grpcio echo
  server in its own process: the ceiling the perf benchmark compares against), `memory_of(pid)`
  (peak and current resident set size from /proc/<pid>/status) and `MemorySampler` (peaks of a
  server's own memory, RssAnon, apart from the memory-mapped database file, RssFile).
* The preload: realistic templated claims (`claims`: services, people, ports, versions, tickets),
  the service-naming task cues that ask about them (`service_cue`), `load` (one seeding session,
  batch Remember of 100 claims per call, closed with Feedback + Commit; returns memories/s), and
  `PreloadStream`, the deterministic sequence of memories that perf.py grows one scope from
  (corpus memories first, then templated claims; memory i is the same whatever the sizes asked).
* `pct`, the percentile both benchmarks report.

    python bench/harness.py echo --workers 16   # the echo server alone (prints "on port N")
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
from concurrent import futures
from dataclasses import astuple, dataclass
from datetime import UTC, date, datetime
from pathlib import Path

import grpc
from google.protobuf.timestamp_pb2 import Timestamp

BENCH = Path(__file__).resolve().parent
sys.path.insert(0, str(BENCH))
from quality import ServerProcess, ServerUnavailable, server_binary, server_revision  # noqa: E402,F401  (re-exported)
from slowave.v1 import memory_service_pb2 as pb  # noqa: E402
from slowave.v1 import memory_service_pb2_grpc as pb_grpc  # noqa: E402
from slowave.v1 import resources_pb2 as res  # noqa: E402

REPO = BENCH.parent
RESULTS = BENCH / "results"

# ------------------------------------------------------------------------------------ templated claims

SERVICES = [
    f"{a}-{b}"
    for a in ("billing", "search", "ledger", "auth", "media", "notify", "report", "ingest", "pricing", "catalog")
    for b in ("api", "worker", "gateway", "cron", "indexer", "web", "sync", "store", "relay", "proxy")
]
PEOPLE = ["Priya Raman", "Jonas Weber", "Ana Lima", "Kenji Sato", "Fatima Noor", "Liam Chen", "Sofia Rossi"]
TEMPLATES = [
    "The {s} service listens on port {p} in the {env} cluster.",
    "Decision: {s} keeps its data in Postgres {v} because of logical replication.",
    "{person} is the on-call owner for {s} this quarter.",
    "Lesson: restarting {s} without draining its queue lost {n} jobs during INC-{t}.",
    "Constraint: {s} must stay below {n} requests per second per tenant.",
    "Preference: the {s} team deploys on {day} mornings only.",
    "{s} pins library version {v}.{n2}.{n3} after the regression tracked in PAY-{t}.",
]
QUERIES = [
    "Which port does {s} use?",
    "Who looks after {s} at the moment?",
    "What database does {s} rely on?",
    "When is {s} usually deployed?",
    "How much traffic can {s} take?",
    "Why was {s} restarted carefully?",
]


def claim(rng: random.Random, note: object) -> str:
    """One templated claim; `note` makes it unique (" (note …)")."""
    return (
        rng.choice(TEMPLATES).format(
            s=rng.choice(SERVICES),
            p=rng.randint(1024, 65000),
            env=rng.choice(["staging", "prod", "eu", "us"]),
            v=rng.randint(9, 17),
            person=rng.choice(PEOPLE),
            n=rng.randint(10, 5000),
            t=rng.randint(100, 9999),
            day=rng.choice(["Monday", "Tuesday", "Thursday"]),
            n2=rng.randint(0, 30),
            n3=rng.randint(0, 30),
        )
        + f" (note {note})"
    )


def claims(rng: random.Random, start: int, count: int) -> list[str]:
    """`count` claims numbered from `start`, drawn from `rng` in order."""
    return [claim(rng, i) for i in range(start, start + count)]


def service_cue(rng: random.Random) -> str:
    """A task cue that names a service and asks about it in other words."""
    return rng.choice(QUERIES).format(s=rng.choice(SERVICES))


# ------------------------------------------------------------------------------------ loading


def timestamp(day: date) -> Timestamp:
    ts = Timestamp()
    ts.FromDatetime(datetime(day.year, day.month, day.day, 12, tzinfo=UTC))
    return ts


def as_item(memory: str | pb.RememberItem) -> pb.RememberItem:
    return memory if isinstance(memory, pb.RememberItem) else pb.RememberItem(content=memory, type=res.MEMORY_TYPE_FACT)


def load(
    stub: pb_grpc.MemoryServiceStub,
    scope: str,
    memories: list[str | pb.RememberItem],
    batch: int = 100,
    check: bool = False,
) -> float:
    """Stores the memories in order through one seeding session (batch Remember, `batch` per call),
    closes it with complete Feedback and a Commit; returns memories/s of the Remember calls alone.
    With `check`, a per-item error raises."""
    session = stub.Activate(pb.ActivateRequest(task="bulk load", initial_goal="load", scope=scope), timeout=60)
    t = time.perf_counter()
    for i in range(0, len(memories), batch):
        response = stub.Remember(
            pb.RememberRequest(
                session_id=session.session_id, scope=scope, memories=[as_item(m) for m in memories[i : i + batch]]
            ),
            timeout=120,
        )
        if check:
            failed = [r.error for r in response.batch.results if r.HasField("error")]
            if failed:
                raise RuntimeError(
                    f"batch Remember refused {len(failed)} item(s): {failed[0].code} {failed[0].message}"
                )
    elapsed = time.perf_counter() - t
    stub.Feedback(pb.FeedbackRequest(retrieval_id=session.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=60)
    stub.Commit(
        pb.CommitRequest(
            session_id=session.session_id,
            final_goal="load",
            outcome=res.OUTCOME_SUCCESS,
            outcome_summary="Bulk load finished.",
            verification=pb.Verification(status=res.VERIFICATION_STATUS_UNVERIFIED, summary="n/a"),
        ),
        timeout=60,
    )
    return len(memories) / elapsed if elapsed > 0 else float("inf")


MEMORY_TYPES = {
    "decision": res.MEMORY_TYPE_DECISION,
    "constraint": res.MEMORY_TYPE_CONSTRAINT,
    "lesson": res.MEMORY_TYPE_LESSON,
    "preference": res.MEMORY_TYPE_PREFERENCE,
    "fact": res.MEMORY_TYPE_FACT,
}


@dataclass(frozen=True)
class PreloadStream:
    """The memories one scope is grown from, in a fixed order: memory i never depends on the sizes.

    First the memories of the retrieval-quality corpus (bench/corpus.py, all its scopes' memories
    stored in this one scope, with their types and dates, shuffled), then templated claims
    (`claim`, FACT), each claim drawn from its own seeded generator.
    """

    seed: int = 20261129
    corpus_scopes: int = 20
    version: int = 1
    """Bump when the stream's content changes: cached stores built from an older stream are not reused."""

    def corpus(self):
        """The retrieval-quality corpus the stream starts with (its queries are realistic task cues)."""
        if not hasattr(self, "_built"):
            from corpus import CorpusParams, build_corpus

            object.__setattr__(self, "_built", build_corpus(CorpusParams(seed=self.seed, scopes=self.corpus_scopes)))
        return self._built  # type: ignore[attr-defined]

    def corpus_part(self) -> list[pb.RememberItem]:
        if not hasattr(self, "_corpus"):
            seen, items = set(), []
            for m in self.corpus().memories:
                key = " ".join(m.text.split()).casefold()
                if key not in seen:
                    seen.add(key)
                    items.append(
                        pb.RememberItem(content=m.text, type=MEMORY_TYPES[m.type], occurred_at=timestamp(m.occurred_at))
                    )
            random.Random(self.seed).shuffle(items)
            object.__setattr__(self, "_corpus", items)
        return self._corpus  # type: ignore[attr-defined]

    def items(self, start: int, count: int) -> list[pb.RememberItem]:
        head = self.corpus_part()
        out = list(head[start : start + count])
        for i in range(max(start, len(head)), start + count):
            out.append(
                pb.RememberItem(content=claim(random.Random(self.seed * 1_000_003 + i), i), type=res.MEMORY_TYPE_FACT)
            )
        return out

    def key(self) -> str:
        """Identifies the stream and the schema it is stored with (the migration files)."""
        digest = hashlib.sha256(repr(astuple(self)).encode())
        corpus_files = [BENCH / "corpus.py", BENCH / "templates.py"]
        migrations = sorted((REPO / "server" / "slowave" / "storage" / "migrations" / "versions").glob("*.py"))
        for path in corpus_files + migrations:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
        return digest.hexdigest()[:16]


def baseline_tree(rev: str, where: Path) -> Path:
    """The `server/` package of commit `rev`, with this checkout's generated stubs (they are built at
    install, never committed); first on PYTHONPATH, it is what `slowave-server` imports (the
    earlier build that bench/conflicts.py and bench/ab.py compare with)."""
    where.mkdir(parents=True)
    archive = subprocess.run(["git", "-C", str(REPO), "archive", rev, "server"], check=True, capture_output=True)
    subprocess.run(["tar", "-x", "-C", str(where)], input=archive.stdout, check=True)
    stubs = REPO / "server" / "slowave" / "v1"
    for stub in stubs.glob("*_pb2*.py*"):
        shutil.copy(stub, where / "server" / "slowave" / "v1" / stub.name)
    return where / "server"


# ------------------------------------------------------------------------------------ measuring


def pct(values: list[float], q: float) -> float:
    """The q-quantile of sorted `values` (nearest rank)."""
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def process_tree(pid: int) -> list[int]:
    """`pid` and its descendants (a `slowave-server` with SLOWAVE_PROCESSES > 1 is a supervisor
    whose children serve)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            todo += [int(c) for c in Path(f"/proc/{p}/task/{p}/children").read_text().split()]
        except OSError:
            pass
    return out


def memory_of(pid: int) -> dict[str, int]:
    """VmHWM (peak resident set) and VmRSS in bytes, from /proc/<pid>/status, summed over the
    process and its descendants (for several processes the sum of the peaks bounds the peak)."""
    out = {"VmHWM": 0, "VmRSS": 0}
    for p in process_tree(pid):
        try:
            lines = Path(f"/proc/{p}/status").read_text().splitlines()
        except OSError:
            continue
        for line in lines:
            name, _, value = line.partition(":")
            if name in out:
                out[name] += int(value.split()[0]) * 1024
    return out


class MemorySampler:
    """Peaks of a process tree's resident memory, split by kind, sampled every `interval` seconds
    from /proc/<pid>/status while the `with` block runs.

    VmHWM alone overstates a SQLite server's memory: the database file is memory-mapped (PRAGMA
    mmap_size), so every page a process reads counts in its resident set as file-backed memory
    (RssFile), the same page-cache pages in every process. RssAnon is what a process holds of its
    own (heap, vectors, caches): the memory that grows with processes and that it cannot give back.
    """

    FIELDS = ("RssAnon", "RssFile", "RssShmem")

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid, self.interval = pid, interval
        self.peak_anon_total = 0  # the largest sum of RssAnon over the tree in one sample
        self.peak_anon_process = 0  # the largest RssAnon of one process in any sample
        self.peak_file_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory-sampler", daemon=True)

    def sample(self) -> None:
        anon_total = file_total = 0
        for p in process_tree(self.pid):
            try:
                lines = Path(f"/proc/{p}/status").read_text().splitlines()
            except OSError:
                continue
            fields = {}
            for line in lines:
                name, _, value = line.partition(":")
                if name in self.FIELDS:
                    fields[name] = int(value.split()[0]) * 1024
            anon_total += fields.get("RssAnon", 0)
            file_total += fields.get("RssFile", 0)
            self.peak_anon_process = max(self.peak_anon_process, fields.get("RssAnon", 0))
        self.peak_anon_total = max(self.peak_anon_total, anon_total)
        self.peak_file_total = max(self.peak_file_total, file_total)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def __enter__(self) -> MemorySampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time so far (all threads) of a process and its descendants, from /proc."""
    total = 0.0
    for p in process_tree(pid):
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


# ------------------------------------------------------------------------------------ echo server

ECHO_METHOD = "/bench.Echo/Echo"


def serve_echo(workers: int, max_concurrent_rpcs: int) -> None:
    """A bare grpcio server: one unary method that returns the request bytes unchanged."""
    handler = grpc.method_handlers_generic_handler(
        "bench.Echo",
        {
            "Echo": grpc.unary_unary_rpc_method_handler(lambda request, _context: request),  # bytes in, bytes out
        },
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=workers), handlers=[handler], maximum_concurrent_rpcs=max_concurrent_rpcs
    )
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    print(f"echo serving on port {port}", flush=True)
    server.wait_for_termination()


class EchoProcess:
    """`serve_echo` in its own process (python bench/harness.py echo …), stopped with SIGTERM."""

    def __init__(self, workdir: Path, workers: int, max_concurrent_rpcs: int) -> None:
        self.log_path = workdir / "echo.log"
        self.args = [
            sys.executable,
            str(Path(__file__).resolve()),
            "echo",
            "--workers",
            str(workers),
            "--max-concurrent-rpcs",
            str(max_concurrent_rpcs),
        ]
        self.process: subprocess.Popen | None = None
        self.port: int | None = None

    def __enter__(self) -> EchoProcess:
        with open(self.log_path, "wb") as out:
            self.process = subprocess.Popen(self.args, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 60
        while self.port is None:
            match = re.search(r"\bon port (\d+)", self.log_path.read_text(errors="replace"))
            if match:
                self.port = int(match.group(1))
            elif self.process.poll() is not None or time.monotonic() > deadline:
                self.__exit__()
                raise ServerUnavailable(
                    f"echo server did not start: {self.log_path.read_text(errors='replace')[-500:]}"
                )
            else:
                time.sleep(0.05)
        return self

    def __exit__(self, *_exc: object) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    echo = sub.add_parser("echo", help="run the bare gRPC echo server")
    echo.add_argument("--workers", type=int, default=16)
    echo.add_argument("--max-concurrent-rpcs", type=int, default=64)
    args = parser.parse_args()
    if args.command == "echo":
        os.environ.setdefault("PYTHONUNBUFFERED", "1")
        serve_echo(args.workers, args.max_concurrent_rpcs)


if __name__ == "__main__":
    main()
