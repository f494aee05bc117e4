"""`slowave-admin`: operator commands on the configured database (not an RPC).

Output is for people; each value is printed under the name the contract gives it.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys

from slowave import admin_erasure, admin_portability, admin_tenancy
from slowave.config import Settings
from slowave.domain.session_state import SessionState
from slowave.service.consolidation import consolidate_pending
from slowave.service.context import ServiceContext
from slowave.service.learning_replay import replay_learning
from slowave.storage.database import Database


def _ctx(settings: Settings, semantic: bool = False) -> ServiceContext:
    channel = None
    if semantic:
        from slowave.embedding import load_semantic_channel

        channel = load_semantic_channel(settings.semantic)
    return ServiceContext(db=Database(settings.database_url), settings=settings, semantic=channel)


def cmd_migrate(ctx: ServiceContext, _args: argparse.Namespace) -> None:
    ctx.db.migrate()
    print("schema is up to date")


def cmd_consolidate(ctx: ServiceContext, _args: argparse.Namespace) -> None:
    print(f"consolidated: {consolidate_pending(ctx)}")


def cmd_embed(ctx: ServiceContext, args: argparse.Namespace) -> None:
    """Backfills vectors of memories stored while the semantic channel was off (or another encoder)."""
    from slowave.embedding import load_semantic_channel
    from slowave.service.vector_backfill import embed_missing, prune_other_encoders

    # The configured encoder (SLOWAVE_SEMANTIC), or the default one where it is off.
    channel = load_semantic_channel(ctx.settings.semantic if ctx.settings.semantic != "off" else True)
    assert channel is not None
    ctx = dataclasses.replace(ctx, semantic=channel)
    print(f"embedded: {embed_missing(ctx, args.batch)}")
    if args.prune:
        print(f"pruned: {prune_other_encoders(ctx)}")


def cmd_learning_replay(ctx: ServiceContext, args: argparse.Namespace) -> None:
    """Recomputes every learned sum from the ledger; exits 1 when the stored state differs (and
    was not repaired)."""
    report = replay_learning(ctx, repair=args.repair)
    if args.json:
        print(json.dumps({"cue_sums": report.cue_sums, "differences": report.differences, "repaired": report.repaired}))
    else:
        print(f"cue_sums: {report.cue_sums}")
        print(f"differences: {len(report.differences)}")
        for line in report.differences:
            print(f"  {line}")
        if report.repaired:
            print("repaired: the stored state now equals the ledger's replay")
    if report.differences and not report.repaired:
        sys.exit(1)


def cmd_knowledge_gaps(ctx: ServiceContext, args: argparse.Namespace) -> None:
    with ctx.db.transaction() as uow:
        gaps = uow.gaps.list(args.tenant, args.scope, include_closed=args.all)
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "tenant": g.tenant,
                        "scope": g.scope,
                        "text": g.text,
                        "occurrences": g.occurrences,
                        "open": g.open,
                        "last_seen_at": g.last_seen_at.isoformat(),
                    }
                    for g in gaps
                ],
                indent=2,
            )
        )
        return
    if not gaps:
        print("no open knowledge gaps")
    for g in gaps:
        state = "open" if g.open else "closed"
        print(
            f"occurrences: {g.occurrences}\tstate: {state}\tscope: {g.scope}\tlast_seen_at: {g.last_seen_at.isoformat()}\ttext: {g.text}"
        )


def cmd_sessions(ctx: ServiceContext, args: argparse.Namespace) -> None:
    with ctx.db.transaction() as uow:
        rows = uow.sessions.list(args.tenant, args.state, args.limit)
    for s in rows:
        print(
            f"session_id: {s.id}\tstate: {s.state.upper()}\tscope: {s.scope}\toutcome: {s.outcome or '-'}\t"
            f"last_activity_at: {s.last_activity_at.isoformat()}"
        )


def cmd_session(ctx: ServiceContext, args: argparse.Namespace) -> None:
    with ctx.db.transaction() as uow:
        s = uow.sessions.get_any(args.session_id)
        if s is None:
            print(f"session {args.session_id} not found", file=sys.stderr)
            raise SystemExit(1)
        trajectory = uow.events.of_session(s.id, kind="trajectory")
    verification = s.verification or {}
    record = {
        "session_id": s.id,
        "state": s.state.upper(),
        "scope": s.scope,
        "started_at": s.started_at.isoformat(),
        "last_activity_at": s.last_activity_at.isoformat(),
        "ended_at": s.ended_at.isoformat() if s.ended_at else None,
        "outcome": s.outcome,
        "feedback_status": s.feedback_status,
        "final_goal": s.final_goal,
        "outcome_summary": s.outcome_summary,
        "verification": verification or None,
        "procedure_id": s.procedure_id,
        "trajectory": [
            {
                "position": e.position,
                "kind": e.entry_kind,
                "status": e.entry_status,
                "summary": e.content,
                "agent_reported": True,
            }
            for e in trajectory
        ],
    }
    if args.json:
        print(json.dumps(record, indent=2))
        return
    for key, value in record.items():
        if key != "trajectory":
            print(f"{key}: {value if value is not None else '-'}")
    print(f"trajectory: {len(trajectory)} entries")
    for e in record["trajectory"]:
        print(
            f"  position: {e['position']}\tkind: {e['kind']}\tstatus: {e['status']}\tagent_reported: true\tsummary: {e['summary']}"
        )


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="slowave-admin", description=__doc__)
    parser.add_argument("--database-url", help="overrides SLOWAVE_DATABASE_URL")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("migrate", help="create or upgrade the schema").set_defaults(fn=cmd_migrate)
    sub.add_parser("consolidate", help="run queued consolidation now").set_defaults(fn=cmd_consolidate)
    p = sub.add_parser("embed", help="backfill semantic vectors of memories that have none (needs [semantic])")
    p.add_argument("--batch", type=int, default=256)
    p.add_argument(
        "--prune",
        action="store_true",
        help="then delete the vectors of other encoders (an older model's), once no server runs it",
    )
    p.set_defaults(fn=cmd_embed)
    p = sub.add_parser("learning-replay", help="recompute learned evidence from the ledger and report differences")
    p.add_argument("--repair", action="store_true", help="write the replayed state over the stored one")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_learning_replay)
    p = sub.add_parser("knowledge-gaps", help="open knowledge gaps, newest first")
    p.add_argument("--tenant", default="local")
    p.add_argument("--scope")
    p.add_argument("--all", action="store_true", help="include closed gaps")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_knowledge_gaps)
    p = sub.add_parser("sessions", help="list sessions with their state")
    p.add_argument("--tenant")
    p.add_argument("--state", choices=[s.value for s in SessionState])
    p.add_argument("--limit", type=int, default=50)
    p.set_defaults(fn=cmd_sessions)
    p = sub.add_parser("session", help="one session: state, times, outcome, trajectory")
    p.add_argument("session_id")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_session)
    admin_tenancy.register(sub)
    admin_portability.register(sub)
    admin_erasure.register(sub)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    if args.database_url:
        settings = Settings(**{**settings.__dict__, "database_url": args.database_url})
    # Consolidated lessons get their vectors when the service runs with the semantic channel.
    ctx = _ctx(settings, semantic=settings.semantic != "off" and args.command == "consolidate")
    try:
        if args.command != "migrate":
            ctx.db.migrate()
        args.fn(ctx, args)
    finally:
        ctx.db.dispose()


if __name__ == "__main__":
    main()
