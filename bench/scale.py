"""Activate latency against store size, over the real gRPC API (retrieval scale check).

Starts its own `slowave-server` (SQLite, loopback), grows ONE scope to 1k, 10k and 100k memories
with batch Remember (100 claims per call, realistic templated claims: services, people, ports,
versions, tickets), and at each size measures closed-loop Activate latency (concurrency 1) for
queries that name a service and ask about it in other words. Prints p50/p95/p99 and the load rate;
writes bench/results/scale.md.

    python bench/scale.py            # 1k, 10k, 100k
    python bench/scale.py --sizes 1000 10000
"""
from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quality import ServerProcess  # noqa: E402  (the benchmark's server harness)

from slowave.v1 import memory_service_pb2 as pb  # noqa: E402
from slowave.v1 import memory_service_pb2_grpc as pb_grpc  # noqa: E402
from slowave.v1 import resources_pb2 as res  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"
SERVICES = [f"{a}-{b}" for a in ("billing", "search", "ledger", "auth", "media", "notify", "report", "ingest",
                                 "pricing", "catalog") for b in ("api", "worker", "gateway", "cron", "indexer",
                                                                 "web", "sync", "store", "relay", "proxy")]
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
    "Which port does {s} use?", "Who looks after {s} at the moment?", "What database does {s} rely on?",
    "When is {s} usually deployed?", "How much traffic can {s} take?", "Why was {s} restarted carefully?",
]


def claims(rng: random.Random, start: int, count: int) -> list[str]:
    out = []
    for i in range(start, start + count):
        out.append(rng.choice(TEMPLATES).format(
            s=rng.choice(SERVICES), p=rng.randint(1024, 65000), env=rng.choice(["staging", "prod", "eu", "us"]),
            v=rng.randint(9, 17), person=rng.choice(PEOPLE), n=rng.randint(10, 5000), t=rng.randint(100, 9999),
            day=rng.choice(["Monday", "Tuesday", "Thursday"]), n2=rng.randint(0, 30), n3=rng.randint(0, 30),
        ) + f" (note {i})")
    return out


def load(stub: pb_grpc.MemoryServiceStub, scope: str, contents: list[str]) -> float:
    session = stub.Activate(pb.ActivateRequest(task="bulk load", initial_goal="load", scope=scope), timeout=60)
    t = time.perf_counter()
    for i in range(0, len(contents), 100):
        stub.Remember(pb.RememberRequest(session_id=session.session_id, scope=scope, memories=[
            pb.RememberItem(content=c, type=res.MEMORY_TYPE_FACT) for c in contents[i:i + 100]]), timeout=120)
    elapsed = time.perf_counter() - t
    stub.Feedback(pb.FeedbackRequest(retrieval_id=session.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=60)
    stub.Commit(pb.CommitRequest(session_id=session.session_id, final_goal="load", outcome=res.OUTCOME_SUCCESS,
                                 outcome_summary="Bulk load finished.", verification=pb.Verification(
                                     status=res.VERIFICATION_STATUS_UNVERIFIED, summary="n/a")), timeout=60)
    return len(contents) / elapsed


def measure(stub: pb_grpc.MemoryServiceStub, scope: str, rng: random.Random, n: int) -> list[float]:
    latencies = []
    for _ in range(n):
        task = rng.choice(QUERIES).format(s=rng.choice(SERVICES))
        t = time.perf_counter()
        stub.Activate(pb.ActivateRequest(task=task, initial_goal="look up", scope=scope), timeout=60)
        latencies.append((time.perf_counter() - t) * 1000)
    return sorted(latencies)


def pct(values: list[float], q: float) -> float:
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=300)
    args = parser.parse_args()
    rng = random.Random(20261129)
    rows = []
    with tempfile.TemporaryDirectory(prefix="slowave-scale-") as tmp, ServerProcess(Path(tmp), {}) as server:
        stub = pb_grpc.MemoryServiceStub(grpc.insecure_channel(server.address))
        scope, have = "project:scale", 0
        measure(stub, scope, rng, 20)  # warm up the channel and the server
        for size in sorted(args.sizes):
            rate = load(stub, scope, claims(rng, have, size - have))
            have = size
            lat = measure(stub, scope, rng, args.queries)
            rows.append((size, rate, pct(lat, 0.5), pct(lat, 0.95), pct(lat, 0.99), statistics.mean(lat)))
            print(f"{size:>7} memories  load {rate:7.0f}/s  Activate p50 {rows[-1][2]:6.2f} ms  "
                  f"p95 {rows[-1][3]:6.2f} ms  p99 {rows[-1][4]:6.2f} ms", flush=True)
    RESULTS.mkdir(exist_ok=True)
    lines = [
        "# Activate latency against store size", "",
        f"Generated by `bench/scale.py` on {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC; machine: "
        f"{platform.machine()}, Python {platform.python_version()}; SQLite, lexical retrieval, one scope, "
        f"closed loop at concurrency 1 over loopback gRPC, {args.queries} queries per size.", "",
        "| memories in the scope | batch Remember (memories/s) | Activate p50 (ms) | p95 (ms) | p99 (ms) | mean (ms) |",
        "|---:|---:|---:|---:|---:|---:|",
        *(f"| {s:,} | {r:,.0f} | {a:.2f} | {b:.2f} | {c:.2f} | {m:.2f} |" for s, r, a, b, c, m in rows),
    ]
    (RESULTS / "scale.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'scale.md'}")


if __name__ == "__main__":
    main()
