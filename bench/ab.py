"""A/B of this checkout's server against another commit's, interleaved, over the real gRPC API.

On a shared VM two runs of `bench/perf.py` of the same code differ by up to a quarter (history.md,
2026-12-05 08:00), more than most changes. This benchmark measures both builds in ONE run: each
build's `slowave-server` (one process, SQLite) grows its own copy of the same scope with the same
batch Remember calls (harness.PreloadStream), gets the same warm-up (long enough, from 20k
memories, for the scope's dense graph to be built in the background), and then one caller runs
full cycles (Activate → Feedback → Commit, perf.py's cycle) against the two servers in alternating
blocks, so that both see the same machine minute by minute. It prints, per build, Activate,
Feedback and Commit p50 / p95 and all server CPU per cycle (every thread, /proc).

The other build is the `server/` tree of `--base` (taken with `git archive`, run by this
environment's Python with this checkout's generated stubs, as bench/conflicts.py does); its own
migrations create its store.

    python bench/ab.py --base 8d52029                 # 100k memories, 20 blocks of 25 cycles each
    python bench/ab.py --base HEAD~3 --size 20000 --blocks 10
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sys
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import PreloadStream, ServerProcess, baseline_tree, cpu_seconds, load, pct, service_cue
from perf import SCOPE, Recorder, cycle
from slowave.v1 import memory_service_pb2_grpc as pb_grpc

RPCS = ("Activate", "Feedback", "Commit")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", required=True, help="the commit to compare this checkout with")
    parser.add_argument("--size", type=int, default=100_000, help="memories in the scope")
    parser.add_argument("--blocks", type=int, default=20, help="measured blocks per build")
    parser.add_argument("--block", type=int, default=25, help="cycles per block")
    parser.add_argument("--warmup", type=float, default=60.0, help="seconds of cycles per build before measuring")
    args = parser.parse_args()

    with contextlib.ExitStack() as stack:
        tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="slowave-ab-")))
        builds = {f"base {args.base}": {"PYTHONPATH": str(baseline_tree(args.base, tmp / "tree"))}, "this checkout": {}}
        servers, stubs = {}, {}
        stream = PreloadStream()
        for name, env in builds.items():
            workdir = tmp / f"server-{len(servers)}"
            workdir.mkdir()
            server = servers[name] = stack.enter_context(ServerProcess(workdir, {"SLOWAVE_PROCESSES": "1", **env}))
            stubs[name] = pb_grpc.MemoryServiceStub(stack.enter_context(grpc.insecure_channel(server.address)))
            started = time.perf_counter()
            for start in range(0, args.size, 10_000):
                load(stubs[name], SCOPE, stream.items(start, min(10_000, args.size - start)), check=True)
            print(f"{name}: {args.size:,} memories stored in {time.perf_counter() - started:.0f} s", flush=True)
        cues = {name: random.Random(20261205) for name in builds}
        summaries = {name: random.Random(20261205) for name in builds}
        for name in builds:
            unrecorded = Recorder(0.0, 0.0, sizes=False)  # an empty window: nothing is recorded
            until = time.monotonic() + args.warmup
            while time.monotonic() < until:
                cycle(stubs[name], unrecorded, service_cue(cues[name]), summaries[name])
        recorders = {name: Recorder(0.0, float("inf"), sizes=False) for name in builds}
        cpu = dict.fromkeys(builds, 0.0)
        order = list(builds)
        for block in range(args.blocks):
            for name in order if block % 2 == 0 else order[::-1]:
                before = cpu_seconds(servers[name].process.pid)
                for _ in range(args.block):
                    cycle(stubs[name], recorders[name], service_cue(cues[name]), summaries[name])
                cpu[name] += cpu_seconds(servers[name].process.pid) - before
        cycles = args.blocks * args.block
        print(f"\n{cycles} cycles per build at {args.size:,} memories, alternating blocks of {args.block}\n")
        print("| build | " + " | ".join(f"{rpc} p50 / p95 (ms)" for rpc in RPCS) + " | server CPU per cycle (ms) |")
        print("|---|" + "---:|" * (len(RPCS) + 1))
        for name in builds:
            ordered = {rpc: sorted(recorders[name].latencies[rpc]) for rpc in RPCS}
            cells = [f"{pct(ordered[rpc], 0.5):.2f} / {pct(ordered[rpc], 0.95):.2f}" for rpc in RPCS]
            print(f"| {name} | " + " | ".join(cells) + f" | {cpu[name] / cycles * 1000:.2f} |")


if __name__ == "__main__":
    main()
