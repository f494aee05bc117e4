"""Where an Activate's CPU goes, stage by stage, with and without the semantic channel (in-process).

bench/scale.py compares the hybrid and lexical-only servers over gRPC (issue 12: hybrid ≤ 1.2× the
lexical-only p50); this script says which stages make the difference. It grows scale.py's store
(the same templated claims, 100 per batch Remember, through a `slowave-server` of its own), copies
it once per mode, opens each copy in a process of its own as the server would (defaults, or
SLOWAVE_SEMANTIC=off) with the upkeep a server runs beside its requests (the full-text index
merged, the write-ahead log checkpointed), waits for the dense graph, and runs the same
service-question cues through `service.activate.activate` on one thread. Each stage is timed by
`time.thread_time` (CPU of this thread) around the function that does it, so the figures are CPU
per Activate, not wall time; nothing crosses gRPC. The stages are found by name: a rename in the
service shows here as an error.

    python bench/activate_stages.py                 # 100k memories, 600 Activates per mode
    python bench/activate_stages.py --size 20000 --activates 300
"""

from __future__ import annotations

import argparse
import functools
import json
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import grpc

sys.path.insert(0, str(Path(__file__).resolve().parent))
from harness import ServerProcess, claims, load, server_revision, service_cue
from slowave import dense_graph_files
from slowave.api import blas
from slowave.config import Settings
from slowave.domain import retrieval as domain_retrieval
from slowave.embedding import load_semantic_channel
from slowave.service import activate as activate_module
from slowave.service import retrieval as service_retrieval
from slowave.service.commands import ActivateCommand
from slowave.service.context import ServiceContext
from slowave.storage.database import Database
from slowave.storage.index_merger import IndexMerger
from slowave.v1 import memory_service_pb2_grpc as pb_grpc

SCOPE, TENANT = "project:scale", "local"
_MISSING = object()
MODES = {"lexical-only": "off", "hybrid": "static"}
# (label, owner, attribute): the stages timed, outermost first.
STAGES = (
    ("whole Activate", None, None),
    ("embedding the cue", "semantic", "embed_query"),
    ("dense candidates", "index", "similarities"),
    ("what the cue names (for_cue)", domain_retrieval.CandidateScoring, "for_cue"),
    ("relevance and admission", domain_retrieval.CandidateScoring, "admitted"),
    ("occasions", domain_retrieval.CandidateScoring, "in_occasions"),
    ("version pairs", service_retrieval, "version_pairs"),
    ("reading and ranking candidates (all of the above but embedding)", service_retrieval, "_admitted_memories"),
    ("serving the page", activate_module, "serve_page"),
)


def timed(spent: dict[str, int], label: str, fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        started = time.thread_time_ns()
        try:
            return fn(*args, **kwargs)
        finally:
            spent[label] = spent.get(label, 0) + time.thread_time_ns() - started

    return wrapper


def grow(where: Path, size: int) -> Path:
    with ServerProcess(where, {"SLOWAVE_PROCESSES": "1"}) as server, grpc.insecure_channel(server.address) as channel:
        rate = load(pb_grpc.MemoryServiceStub(channel), SCOPE, claims(random.Random(20261129), 0, size))
    print(f"store: {size:,} memories at {rate:,.0f}/s", flush=True)
    return where / "slowave.db"


def measure(store: Path, mode: str, activates: int, graph_timeout: float) -> dict[str, float]:
    settings = Settings(database_url=f"sqlite:///{store}", semantic=MODES[mode])
    db = Database(settings.database_url, settings.pool)
    db.migrate()
    # The store's upkeep as a server runs it from its start: the full-text index merged into one
    # segment (the grown store has a dozen, which made the lexical lookup of these cues a third
    # slower; Activates add none) and the write-ahead log checkpointed, so that the Activates' own
    # writes do not pile up in it.
    IndexMerger(db).merge()
    checkpointer = db.background_checkpoints(settings.wal_checkpoint_seconds)
    ctx = ServiceContext(db=db, settings=settings, semantic=load_semantic_channel(settings.semantic))
    if ctx.semantic is not None:
        ctx.semantic.index.files = dense_graph_files.for_store(settings, db)
        blas.one_thread()  # as the server runs it

    def run(rng: random.Random, n: int) -> None:
        for _ in range(n):
            cmd = ActivateCommand(
                task=service_cue(rng),
                initial_goal="look up",
                scope=SCOPE,
                page_size=10,
                continuity_id=None,
                task_context={},
                semantic_context=None,
            )
            activate_module.activate(ctx, TENANT, cmd)

    run(random.Random(0), 100)  # reads the vectors and starts the graph's build
    if ctx.semantic is not None:
        # The dense graph is built in the background from 20k vectors; the steady state is measured.
        # (The index has no public view of its graph's progress; a benchmark may look inside.)
        deadline = time.monotonic() + graph_timeout
        entry = ctx.semantic.index._scopes.get((TENANT, SCOPE))
        while entry is not None and entry.size >= ctx.semantic.index.ann_min_rows and entry.ann_rows < entry.size:
            if time.monotonic() > deadline:
                raise SystemExit(f"the dense graph was not built within {graph_timeout:.0f} s")
            time.sleep(0.5)
        print(f"{mode}: dense graph of {entry.ann_rows if entry else 0:,} vectors", flush=True)
    run(random.Random(0), 300)  # warm caches

    spent: dict[str, int] = {}
    originals = []
    for label, owner, attribute in STAGES[1:]:
        target = {"semantic": ctx.semantic, "index": ctx.semantic.index if ctx.semantic else None}.get(owner, owner)
        if target is None:
            continue
        # What to put back: a class's own descriptor (a classmethod stays one), or nothing for an
        # instance, whose method comes from its class.
        originals.append((target, attribute, vars(target).get(attribute, _MISSING)))
        setattr(target, attribute, timed(spent, label, getattr(target, attribute)))
    started = time.thread_time_ns()
    try:
        run(random.Random(5), activates)
    finally:
        for target, attribute, original in reversed(originals):
            if original is _MISSING:
                delattr(target, attribute)
            else:
                setattr(target, attribute, original)
        if checkpointer is not None:
            checkpointer.stop()
        db.dispose()
    spent["whole Activate"] = time.thread_time_ns() - started
    return {label: ns / activates / 1e6 for label, ns in spent.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=int, default=100_000, help="memories in the scope")
    parser.add_argument("--activates", type=int, default=600, help="timed Activates per mode")
    parser.add_argument("--graph-timeout", type=float, default=600.0, help="seconds to wait for the dense graph")
    parser.add_argument("--measure", choices=MODES, help=argparse.SUPPRESS)  # one mode, in a process of its own
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.measure:
        print(json.dumps(measure(args.store, args.measure, args.activates, args.graph_timeout)))
        return
    figures = {}
    with tempfile.TemporaryDirectory(prefix="slowave-stages-") as tmp:
        grown = Path(tmp) / "grown"
        grown.mkdir()
        built = grow(grown, args.size)
        for mode in MODES:
            # Each mode in a fresh process, as each server is: the caches of the rules (parsed claims,
            # term profiles, subjects) are per process, and one mode must not warm them for the other.
            copy = Path(tmp) / f"{mode}.db"
            shutil.copy(built, copy)
            out = subprocess.run(
                [sys.executable, __file__, "--measure", mode, "--store", str(copy)]
                + ["--activates", str(args.activates), "--graph-timeout", str(args.graph_timeout)],
                check=True,
                stdout=subprocess.PIPE,
                text=True,
            ).stdout.splitlines()
            if out[:-1]:
                print("\n".join(out[:-1]), flush=True)
            figures[mode] = json.loads(out[-1])
    print(
        f"\nCPU per Activate (ms), {args.size:,} memories, {args.activates} Activates per mode, one thread, "
        f"code of `{server_revision()}`\n"
    )
    print("| stage | " + " | ".join(MODES) + " |")
    print("|---|" + "---:|" * len(MODES))
    for label, _, _ in STAGES:
        cells = [f"{figures[m][label]:.3f}" if label in figures[m] else "—" for m in MODES]
        print(f"| {label} | " + " | ".join(cells) + " |")
    whole = {m: figures[m]["whole Activate"] for m in MODES}
    print(f"\nhybrid ÷ lexical-only: {whole['hybrid'] / whole['lexical-only']:.2f}×")


if __name__ == "__main__":
    main()
