"""Moving a grown SQLite store onto PostgreSQL: `slowave-admin copy --to` at 100k memories.

Builds a SQLite store through the real gRPC API with `slowave-server` (the `make serve` defaults,
so every memory has its vector): --memories templated claims spread over --scopes scopes (batch
Remember), then per scope --sessions sessions that Activate, give Feedback on what they were
shown (one `used`, the rest covered implicitly) and Commit, so the store has a ledger, exposures,
learned evidence and closed sessions. Stops the server, starts a throwaway PostgreSQL cluster from
the machine's binaries (or takes --to URL, which must be an empty database), and times
`slowave-admin copy --to`, whose own verification compares every row of every table and the
catalogs of a fixed set of cues on both stores. Prints the rows, the times and the verdict.

    python bench/copy_store.py                         # 100k memories, 10 scopes
    python bench/copy_store.py --memories 10000 --to postgresql+psycopg://user@host/empty
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(ROOT))
from harness import ServerProcess, claims, load, service_cue  # noqa: E402
from slowave.v1 import memory_service_pb2 as pb  # noqa: E402
from slowave.v1 import memory_service_pb2_grpc as pb_grpc  # noqa: E402
from slowave.v1 import resources_pb2 as res  # noqa: E402


def build(workdir: Path, memories: int, scopes: int, sessions: int) -> tuple[str, int]:
    """The SQLite store; returns its URL and the ledger rows written."""
    rng = random.Random(20261202)
    per_scope = memories // scopes
    with ServerProcess(workdir, {}) as server:
        stub = pb_grpc.MemoryServiceStub(grpc.insecure_channel(server.address))
        started = time.monotonic()
        for s in range(scopes):
            load(stub, f"project:copy-{s}", claims(rng, s * per_scope, per_scope), check=True)
        print(f"loaded {per_scope * scopes} memories in {time.monotonic() - started:.0f} s", flush=True)
        rows = 0
        for s in range(scopes):
            scope = f"project:copy-{s}"
            for _ in range(sessions):
                act = stub.Activate(
                    pb.ActivateRequest(task=service_cue(rng), initial_goal="look up", scope=scope), timeout=60
                )
                shown = [
                    pb.MemoryFeedbackEntry(memory_id=m.memory_id, assessment=pb.MEMORY_ASSESSMENT_USED)
                    for m in act.memories[:1]
                ]
                record = stub.Feedback(
                    pb.FeedbackRequest(
                        retrieval_id=act.retrieval_id, memory_feedback=shown, coverage=pb.COVERAGE_COMPLETE
                    ),
                    timeout=60,
                ).record
                rows += len(record.accepted_event_ids)
                stub.Commit(
                    pb.CommitRequest(
                        session_id=act.session_id,
                        final_goal="done",
                        outcome=res.OUTCOME_SUCCESS,
                        outcome_summary="Looked it up.",
                        verification=pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary="Checked."),
                    ),
                    timeout=60,
                )
    return f"sqlite:///{workdir / 'slowave.db'}", rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--memories", type=int, default=100_000)
    parser.add_argument("--scopes", type=int, default=10)
    parser.add_argument("--sessions", type=int, default=30, help="feedback sessions per scope")
    parser.add_argument("--to", help="an empty target database (default: a throwaway PostgreSQL cluster)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="slowave-copy-") as tmp:
        source, ledger = build(Path(tmp), args.memories, args.scopes, args.sessions)
        cluster = None
        target = args.to
        if target is None:
            from tests.postgres import PostgresCluster, find_bindir

            bindir = find_bindir()
            if bindir is None:
                raise SystemExit("no PostgreSQL binaries: give --to URL")
            cluster = PostgresCluster(bindir).start()
            target = cluster.new_database()
        try:
            env = {**os.environ, "SLOWAVE_DATABASE_URL": source, "SLOWAVE_SEMANTIC": "off"}
            started = time.monotonic()
            out = subprocess.run(
                [sys.executable, "-m", "slowave.admin", "copy", "--to", target, "--json"],
                env=env,
                capture_output=True,
                text=True,
            )
            wall = time.monotonic() - started
        finally:
            if cluster is not None:
                cluster.destroy()
    if out.returncode not in (0, 1) or not out.stdout.strip():
        raise SystemExit(f"copy failed ({out.returncode}): {out.stderr}")
    report = json.loads(out.stdout)
    total = sum(report["rows"].values())
    print(f"ledger rows written through Feedback: {ledger}")
    print(f"rows copied: {total} ({', '.join(f'{k} {v}' for k, v in report['rows'].items() if v)})")
    print(
        f"copy {report['copy_seconds']:.1f} s, verification {report['verify_seconds']:.1f} s "
        f"(every row compared, {report['catalogs']} catalogs), command wall time {wall:.1f} s"
    )
    print(f"different rows: {report['different_rows']}, different catalogs: {len(report['catalog_differences'])}")
    print("VERIFIED: every row equal, the same catalogs" if report["equal"] else "NOT VERIFIED")
    if not report["equal"]:
        raise SystemExit(1)


if __name__ == "__main__":
    main()
