"""Activate latency against store size, over the real gRPC API (retrieval scale check).

Starts two `slowave-server`s (SQLite, loopback): one with the defaults that `make serve` uses
(hybrid retrieval) and one lexical-only (SLOWAVE_SEMANTIC=off), grows ONE scope in each to 1k,
10k and 100k memories with the same batch Remember calls (100 claims per call, realistic
templated claims: services, people, ports, versions, tickets; the load rate includes embedding),
and at each size measures closed-loop Activate latency (concurrency 1) for queries that name a
service and ask about it in other words, alternating between the servers in blocks so that both
see the same machine. Prints p50/p95/p99, the load rate and the ratio of the p50s; writes
bench/results/scale.md.

    python bench/scale.py            # 1k, 10k, 100k
    python bench/scale.py --sizes 1000 10000
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import random
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import RESULTS, ServerProcess, claims, load, pct, server_revision, service_cue
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc


def measure(stub: pb_grpc.MemoryServiceStub, scope: str, rng: random.Random, n: int) -> list[float]:
    latencies = []
    for _ in range(n):
        task = service_cue(rng)
        t = time.perf_counter()
        stub.Activate(pb.ActivateRequest(task=task, initial_goal="look up", scope=scope), timeout=60)
        latencies.append((time.perf_counter() - t) * 1000)
    return sorted(latencies)


MODES = {"default": {}, "lexical-only": {"SLOWAVE_SEMANTIC": "off"}}


def policy_of(stub: pb_grpc.MemoryServiceStub, scope: str) -> str:
    return stub.Activate(
        pb.ActivateRequest(task="policy probe", initial_goal="probe", scope=scope), timeout=60
    ).retrieval_policy_version


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--block", type=int, default=25, help="queries per server before switching")
    parser.add_argument(
        "--warmup",
        type=float,
        default=60.0,
        help="seconds of queries per server after each load, before measuring: from 20k "
        "vectors a scope's dense graph is built in the background after the first "
        "query (~30 s at 100k here), and the steady state is measured",
    )
    args = parser.parse_args()
    rows = []
    with contextlib.ExitStack() as stack:
        stubs, policies = {}, {}
        for mode, env in MODES.items():
            tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix=f"slowave-scale-{mode}-"))
            server = stack.enter_context(ServerProcess(Path(tmp), env))
            stubs[mode] = pb_grpc.MemoryServiceStub(grpc.insecure_channel(server.address))
        scope, have = "project:scale", 0
        claim_rng = random.Random(20261129)
        for mode, stub in stubs.items():
            measure(stub, scope, random.Random(1), 20)  # warm up the channel and the server
            policies[mode] = policy_of(stub, scope)
        for size in sorted(args.sizes):
            batch = claims(claim_rng, have, size - have)
            rates = {mode: load(stub, scope, batch) for mode, stub in stubs.items()}
            have = size
            for stub in stubs.values():
                deadline = time.monotonic() + (args.warmup if size >= 20_000 else 0)
                measure(stub, scope, random.Random(0), 20)
                while time.monotonic() < deadline:
                    measure(stub, scope, random.Random(0), 20)
            lat: dict[str, list[float]] = {mode: [] for mode in stubs}
            cue_rngs = {mode: random.Random(size) for mode in stubs}  # the same cues for both
            while len(lat["default"]) < args.queries:
                for mode, stub in stubs.items():
                    lat[mode] += measure(stub, scope, cue_rngs[mode], min(args.block, args.queries - len(lat[mode])))
            row = {"size": size}
            for mode in stubs:
                ordered = sorted(lat[mode])
                row[mode] = (
                    rates[mode],
                    pct(ordered, 0.5),
                    pct(ordered, 0.95),
                    pct(ordered, 0.99),
                    statistics.mean(ordered),
                )
            rows.append(row)
            d, lx = row["default"], row["lexical-only"]
            print(
                f"{size:>7} memories  default: load {d[0]:6.0f}/s  Activate p50 {d[1]:6.2f} p95 {d[2]:6.2f} "
                f"p99 {d[3]:6.2f} ms | lexical-only: load {lx[0]:6.0f}/s  p50 {lx[1]:6.2f} p95 {lx[2]:6.2f} "
                f"p99 {lx[3]:6.2f} ms | p50 ratio {d[1] / lx[1]:.2f}x",
                flush=True,
            )
    RESULTS.mkdir(exist_ok=True)
    lines = [
        "# Activate latency against store size",
        "",
        f"Generated by `bench/scale.py` on {datetime.now(UTC):%Y-%m-%d %H:%M} UTC at commit "
        f"`{server_revision()}`; machine: {platform.machine()}, Python {platform.python_version()}; SQLite, one scope, "
        f"closed loop at concurrency 1 over loopback gRPC, {args.queries} queries per size and server, "
        f"alternating in blocks of {args.block}, after {args.warmup:.0f} s of warm-up queries per server at sizes "
        "from 20k (the dense graph's background build).",
        "",
        f"- default (`make serve`): `{policies['default']}`",
        f"- lexical-only (SLOWAVE_SEMANTIC=off): `{policies['lexical-only']}`",
        "",
        "| memories in the scope | server | batch Remember (memories/s) | Activate p50 (ms) | p95 (ms) | p99 (ms) | mean (ms) |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        for mode in MODES:
            r, a, b, c, m = row[mode]
            lines.append(f"| {row['size']:,} | {mode} | {r:,.0f} | {a:.2f} | {b:.2f} | {c:.2f} | {m:.2f} |")
    lines += [
        "",
        "| memories | default p50 ÷ lexical-only p50 |",
        "|---:|---:|",
        *(f"| {row['size']:,} | {row['default'][1] / row['lexical-only'][1]:.2f} |" for row in rows),
    ]
    (RESULTS / "scale.md").write_text("\n".join(lines) + "\n")
    print(f"wrote {RESULTS / 'scale.md'}")


if __name__ == "__main__":
    main()
