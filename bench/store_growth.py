"""What an agent's task cycle leaves in the store, table by table, over the real gRPC API.

A `slowave-server` with `make serve`'s defaults (SQLite) on a fresh file; one scope preloaded with
`--memories` of harness.py's templated claims (one seeding session, batch Remember); then
`--cycles` task cycles, each an Activate of a service question (page_size 10), complete Feedback
(every shown memory covered, implicitly) and a Commit. The bytes of every table and index are read
from SQLite's `dbstat` (pages in use, write-ahead log included) once the preload's and the cycles'
consolidation has settled, before and after the cycles; the report gives bytes per cycle by table,
largest first. What a store keeps and why: docs/operations.md "What a store keeps".

    python bench/store_growth.py                          # 2,000 memories, 2,000 cycles
    python bench/store_growth.py --memories 20000 --cycles 500 --out /tmp/growth.md
"""

from __future__ import annotations

import argparse
import random
import sqlite3
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ServerProcess, claims, load, server_revision, service_cue
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import memory_service_pb2_grpc as pb_grpc
from slowave.v1 import resources_pb2 as res

SCOPE = "project:growth"
DEFAULT_OUT = Path(__file__).resolve().parent / "results" / "store-growth.md"


def table_bytes(db: Path) -> dict[str, int]:
    """Bytes of the pages each table and index uses (dbstat), as a reader sees the file now."""
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
        return dict(c.execute("SELECT name, sum(pgsize) FROM dbstat GROUP BY name").fetchall())


def settled(db: Path, timeout: float = 120.0) -> None:
    """Waits (polling) until no consolidation is queued: its episodes and lessons belong to the cycle."""
    deadline = time.monotonic() + timeout
    while True:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as c:
            pending = c.execute("SELECT count(*) FROM consolidation_queue WHERE done_at IS NULL").fetchone()[0]
        if not pending:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"consolidation did not settle within {timeout:.0f} s")
        time.sleep(0.2)


def cycle(stub: pb_grpc.MemoryServiceStub, rng: random.Random) -> int:
    a = stub.Activate(pb.ActivateRequest(task=service_cue(rng), initial_goal="look up", scope=SCOPE, page_size=10))
    stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, coverage=pb.COVERAGE_COMPLETE))
    stub.Commit(
        pb.CommitRequest(
            session_id=a.session_id,
            final_goal="look up",
            outcome=res.OUTCOME_SUCCESS,
            outcome_summary="Looked it up.",
            verification=pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary="Checked."),
        )
    )
    return len(a.memories)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=2000, help="claims preloaded into the scope")
    parser.add_argument("--cycles", type=int, default=2000, help="Activate → Feedback → Commit cycles")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help=f"Markdown report (default {DEFAULT_OUT})")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="slowave-growth-") as tmp:
        workdir = Path(tmp)
        db = workdir / "slowave.db"
        with ServerProcess(workdir, {}) as server, grpc.insecure_channel(server.address) as channel:
            stub = pb_grpc.MemoryServiceStub(channel)
            load(stub, SCOPE, claims(random.Random(1), 0, args.memories))
            settled(db)
            before = table_bytes(db)
            rng, shown, started = random.Random(2), 0, time.perf_counter()
            for _ in range(args.cycles):
                shown += cycle(stub, rng)
            seconds = time.perf_counter() - started
            settled(db)
            after = table_bytes(db)
    grown = {name: after.get(name, 0) - before.get(name, 0) for name in after.keys() | before.keys()}
    total = sum(grown.values())
    lines = [
        "# What a task cycle leaves in the store",
        "",
        f"Command: `python bench/store_growth.py --memories {args.memories} --cycles {args.cycles}`  ",
        f"Date: {datetime.now(UTC):%Y-%m-%d %H:%M} UTC  ",
        f"Git commit: `{server_revision()}`  ",
        "Server: own `slowave-server`, `make serve` defaults (SQLite)",
        "",
        f"{args.cycles:,} cycles (Activate of a service question, page_size 10 → complete Feedback → Commit) "
        f"on one scope of {args.memories:,} templated claims, {shown / args.cycles:.1f} memories a page, "
        f"{args.cycles / seconds:.0f} cycles/s at one caller. Bytes of the pages each table and index uses "
        "(SQLite's dbstat), after consolidation settled, before and after the cycles.",
        "",
        f"**{total / args.cycles:,.0f} bytes a cycle** in all.",
        "",
        "| table or index | bytes a cycle | share |",
        "|---|---:|---:|",
    ]
    for name, grew in sorted(grown.items(), key=lambda kv: -kv[1]):
        if grew:
            lines.append(f"| `{name}` | {grew / args.cycles:,.0f} | {grew / total:.0%} |")
    report = "\n".join(lines) + "\n"
    print(report)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(report, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
