"""`slowave-admin erase` and `slowave-admin erasures`: erasure of a scope, of memories or of a
whole tenant (service.erasure), and its audit records (docs/operations.md "Erasure")."""

from __future__ import annotations

import argparse
import getpass
import json
import socket
import sys

from slowave import dense_graph_files
from slowave.domain.errors import StorageUnavailable
from slowave.domain.identifiers import memory_number
from slowave.service.context import ServiceContext
from slowave.service.erasure import ErasureTarget, erase


def _actor() -> str:
    try:
        user = getpass.getuser()
    except (KeyError, OSError):  # no user name for the uid (a container)
        user = "unknown"
    return f"{user}@{socket.gethostname()}"[:256]


def cmd_erase(ctx: ServiceContext, args: argparse.Namespace) -> None:
    numbers = []
    for mid in args.memory or []:
        n = memory_number(mid)
        if n is None:
            print(f"not a memory id (sch_N): {mid}", file=sys.stderr)
            raise SystemExit(2)
        numbers.append(n)
    target = ErasureTarget(args.tenant, args.scope, tuple(sorted(set(numbers))), args.all)
    # The audit record names what was erased and how: the options, never --reason's own text twice.
    named = f"--scope {args.scope}" if args.scope else "--all" if args.all else "--memory " + " ".join(args.memory)
    command = f"erase --tenant {args.tenant} {named}"[:256]
    try:
        report = erase(
            ctx.db,
            target,
            now=ctx.clock.now(),
            command=command,
            actor=_actor(),
            reason=args.reason,
            dry_run=args.dry_run,
            graphs=dense_graph_files.for_store(ctx.settings, ctx.db),
        )
    except (LookupError, StorageUnavailable, TimeoutError) as exc:
        # Nothing was erased unless the message says the erasure is committed (reclaiming failed).
        print(str(exc), file=sys.stderr)
        raise SystemExit(1) from exc
    counts = dict(sorted(report.counts.items()))
    if args.json:
        print(
            json.dumps(
                {
                    "dry_run": report.dry_run,
                    "audit_id": report.audit_id,
                    "counts": counts,
                    "reclaimed": report.reclaimed,
                    "graph_files_deleted": report.graph_files_deleted,
                }
            )
        )
        return
    print(f"dry_run: {'true' if report.dry_run else 'false'}")
    for key, n in counts.items():
        if n:
            print(f"{key}: {n}")
    if report.audit_id is not None:
        print(f"audit_id: {report.audit_id}")
    for step in report.reclaimed:
        print(f"reclaimed: {step}")
    if report.graph_files_deleted:
        print(f"saved dense graphs deleted: {report.graph_files_deleted}")


def cmd_erasures(ctx: ServiceContext, args: argparse.Namespace) -> None:
    with ctx.db.transaction() as uow:
        rows = uow.erasure.audit_records()
    records = [
        {
            "id": r.id,
            "erased_at": r.erased_at.isoformat(),
            "command": r.command,
            "actor": r.actor,
            "tenant": r.tenant,
            "scope": r.scope,
            "memory_ids": r.memory_ids,
            "reason": r.reason,
            "counts": r.counts,
        }
        for r in rows
        if args.tenant is None or r.tenant == args.tenant
    ]
    if args.json:
        print(json.dumps(records, indent=2))
        return
    for rec in records:
        print(
            f"id: {rec['id']}\terased_at: {rec['erased_at']}\ttenant: {rec['tenant']}\tcommand: {rec['command']}\t"
            f"actor: {rec['actor']}\treason: {rec['reason'] or '-'}"
        )


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("erase", help="remove the content of a scope, of memories or of a tenant everywhere it lives")
    p.add_argument("--tenant", required=True)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--scope", help="every memory, session, procedure and gap of the scope")
    which.add_argument("--memory", nargs="+", metavar="sch_N", help="these memories (and what was derived from them)")
    which.add_argument("--all", action="store_true", help="every scope of the tenant, and its cues")
    p.add_argument("--reason", help="why (a ticket or request id) for the audit record; never the erased content")
    p.add_argument("--dry-run", action="store_true", help="count what would change, change nothing")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_erase)
    p = sub.add_parser("erasures", help="the audit records of past erasures (no content)")
    p.add_argument("--tenant")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_erasures)
