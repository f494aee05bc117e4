"""Activate latency against the length of the cue, over the real gRPC API.

An agent's task is the user's request verbatim (up to 4 KiB), and its `semantic_context` may add
4 KiB more: a pasted log, a document, the notes of an earlier task. bench/perf.py and
bench/scale.py ask short questions; this asks long ones.

Starts `slowave-server` with `make serve`'s defaults (SQLite, hybrid retrieval) and grows two
scopes to --size memories with bench/harness.py's templated claims: `project:notes-last` as harness
writes them (each ends with its own "(note N)", so no two end alike) and `project:notes-first` with the
note moved to the front ("Note N: …": no two begin alike, and many end alike, "… in the prod
cluster."). At each scope it measures closed-loop Activate latency at one caller for cues of
three kinds: `question`, a short question naming a service (the baseline); `prose`, text that no
memory quotes (docstrings of Python's standard library); and `quoting`, claims of the scope itself
joined up, as an agent pasting its notes would. Cues of more than 4 KiB put the rest in
`semantic_context`. With --baseline-rev the same runs against that commit's `server/` tree
(bench/harness.baseline_tree) in a server of its own, the two servers measured in alternating
blocks so that both see the same machine. With --postgres both run on a throwaway PostgreSQL
cluster (tests/postgres.py) instead. Writes bench/results/long-cues.md.

    python bench/long_cues.py                          # 100k memories per scope
    python bench/long_cues.py --size 20000 --baseline-rev fdfd442
"""

from __future__ import annotations

import argparse
import contextlib
import platform
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import REPO, RESULTS, ServerProcess, baseline_tree, claim, load, pct, server_revision, service_cue
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc

TASK_BYTES = 4096  # the contract's limit of `task`; the rest of a longer cue goes to semantic_context
SEED = 20261206
KINDS = ("question", "prose", "quoting")
SCOPES = ("project:notes-last", "project:notes-first")


def scope_claims(scope: str, size: int) -> list[str]:
    """The scope's claims in the order they are stored (the same for every server and run)."""
    rng = random.Random(SEED)
    out = []
    for i in range(size):
        text = claim(rng, i)
        if scope == "project:notes-first":  # "Note 7: The search-api service listens on …"
            text = f"Note {i}: " + text.removesuffix(f" (note {i})")
        out.append(text)
    return out


def prose() -> str:
    """Docstrings of a few standard-library modules: English that no memory quotes."""
    import argparse as a
    import collections as c
    import json as j
    import logging as g
    import subprocess as s
    import threading as t

    texts = []
    for module in (a, c, j, g, s, t):
        docs = [module.__doc__] + [getattr(getattr(module, n), "__doc__", None) for n in sorted(dir(module))]
        texts += [d for d in docs if isinstance(d, str)]
    return " ".join(" ".join(texts).split())


def cut(text: str, length: int) -> str:
    """At most `length` bytes of `text` (UTF-8), ending at a word."""
    data = text.encode()
    return data[:length].decode(errors="ignore").rsplit(" ", 1)[0] if len(data) > length else text


def cue(kind: str, length: int, rng: random.Random, stored: list[str], text: str) -> tuple[str, str | None]:
    """(task, semantic_context) of one cue."""
    if kind == "question":
        whole = service_cue(rng)
    elif kind == "prose":
        start = rng.randrange(len(text) - 2 * length)
        whole = cut(text[start:], length)
    else:
        parts, total = [], 0
        while total < length:
            parts.append(stored[rng.randrange(len(stored))])
            total += len(parts[-1]) + 1
        whole = cut(" ".join(parts), length)
    task = cut(whole, TASK_BYTES)
    rest = cut(whole[len(task) :].strip(), TASK_BYTES)
    return task, rest or None


def activate(stub: pb_grpc.MemoryServiceStub, scope: str, task: str, context: str | None) -> float:
    request = pb.ActivateRequest(task=task, initial_goal="look up", scope=scope)
    if context:
        request.semantic_context = context
    t = time.perf_counter()
    stub.Activate(request, timeout=120)
    return (time.perf_counter() - t) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="memories per scope")
    parser.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 8192], help="cue bytes")
    parser.add_argument("--queries", type=int, default=40, help="Activates per server, scope, kind and length")
    parser.add_argument("--block", type=int, default=10, help="Activates per server before switching")
    parser.add_argument("--warmup", type=float, default=45.0, help="seconds of questions per scope after loading")
    parser.add_argument("--baseline-rev", help="also measure this commit's server/ tree, in the same run")
    parser.add_argument(
        "--postgres", action="store_true", help="on a throwaway PostgreSQL cluster from the machine's binaries"
    )
    parser.add_argument("--out", type=Path, default=RESULTS / "long-cues.md")
    args = parser.parse_args()
    text = prose()
    stored = {scope: scope_claims(scope, args.size) for scope in SCOPES}
    results: dict[tuple[str, str, str, int], list[float]] = {}
    with contextlib.ExitStack() as stack:
        cluster = postgres_cluster(stack) if args.postgres else None
        stubs: dict[str, pb_grpc.MemoryServiceStub] = {}
        for name in ("this", "baseline") if args.baseline_rev else ("this",):
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix=f"slowave-long-cues-{name}-")))
            env = {"PYTHONPATH": str(baseline_tree(args.baseline_rev, tmp / "tree"))} if name == "baseline" else {}
            if cluster is not None:
                env["SLOWAVE_DATABASE_URL"] = cluster.new_database()
            server = stack.enter_context(ServerProcess(tmp, env))
            stubs[name] = pb_grpc.MemoryServiceStub(stack.enter_context(grpc.insecure_channel(server.address)))
        for name, stub in stubs.items():
            for scope in SCOPES:
                rate = load(stub, scope, stored[scope], check=True)
                print(f"{name}: {scope} grown to {args.size:,} memories at {rate:,.0f}/s", flush=True)
        for scope in SCOPES:
            rng, deadline = random.Random(1), time.monotonic() + args.warmup
            while time.monotonic() < deadline:  # the dense graph is built in the background meanwhile
                for stub in stubs.values():
                    activate(stub, scope, service_cue(rng), None)
        for scope in SCOPES:
            for kind in KINDS:
                for length in args.lengths if kind != "question" else [0]:
                    cues_rng = random.Random(f"{scope}/{kind}/{length}")
                    cues = [cue(kind, length, cues_rng, stored[scope], text) for _ in range(args.queries)]
                    for start in range(0, len(cues), args.block):
                        for name, stub in stubs.items():
                            got = [activate(stub, scope, t, c) for t, c in cues[start : start + args.block]]
                            results.setdefault((name, scope, kind, length), []).extend(got)
                    row = {n: sorted(results[(n, scope, kind, length)]) for n in stubs}
                    print(
                        f"{scope} {kind} {length} B: "
                        + "; ".join(f"{n} p50 {pct(v, 0.5):.1f} p95 {pct(v, 0.95):.1f} ms" for n, v in row.items()),
                        flush=True,
                    )
    args.out.write_text(report(args, results, list(stubs)))
    print(f"wrote {args.out}")


def postgres_cluster(stack: contextlib.ExitStack):
    """A throwaway PostgreSQL cluster (tests/postgres.py), removed when the run ends."""
    sys.path.insert(0, str(REPO))
    from tests.postgres import PostgresCluster, find_bindir

    bindir = find_bindir()
    if bindir is None:
        raise SystemExit("--postgres: no PostgreSQL binaries found (apt-get install postgresql)")
    cluster = PostgresCluster(bindir).start()
    stack.callback(cluster.destroy)
    return cluster


def report(args: argparse.Namespace, results: dict, servers: list[str]) -> str:
    rev = server_revision()
    names = {"this": f"`{rev}`", "baseline": f"`{args.baseline_rev}`"}
    lines = [
        "# Activate latency against the length of the cue",
        "",
        f"Command: `python bench/long_cues.py {' '.join(sys.argv[1:])}`  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC; machine: {platform.machine()}, Python "
        f"{platform.python_version()}; code: {', '.join(names[s] for s in servers)}  ",
        f"Store: {'PostgreSQL' if args.postgres else 'SQLite'}, `make serve` defaults otherwise; two scopes of {args.size:,} templated claims each "
        "(see the script's docstring); closed loop, one caller, client wall time per Activate.",
        "",
        "| scope | cue | bytes | " + " | ".join(f"{names[s]} p50 / p95 (ms)" for s in servers) + " |",
        "|---|---|---:|" + "---|" * len(servers),
    ]
    for scope, kind, length in sorted(
        {k[1:] for k in results}, key=lambda k: (SCOPES.index(k[0]), KINDS.index(k[1]), k[2])
    ):
        cells = []
        for s in servers:
            v = sorted(results[(s, scope, kind, length)])
            cells.append(f"{pct(v, 0.5):.1f} / {pct(v, 0.95):.1f}")
        lines.append(f"| {scope} | {kind} | {length or 'short'} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
