"""`slowave-admin export | import | copy | backup`: moving and keeping a store's data
(docs/operations.md, "Moving and keeping data"). Registered by admin.main."""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from collections.abc import Iterator
from typing import TextIO

from slowave.portability.backup import BackupRefused, backup
from slowave.portability.copy_store import CopyRefused, copy_store
from slowave.portability.export_stream import export
from slowave.portability.import_stream import ImportRefused, import_stream
from slowave.service.context import ServiceContext
from slowave.storage.database import Database
from slowave.storage.portability import Selection


def _fail(message: str) -> None:
    print(f"slowave-admin: {message}", file=sys.stderr)
    raise SystemExit(1)


@contextlib.contextmanager
def _opened(path: str, mode: str) -> Iterator[TextIO]:
    if path == "-":
        # The stream is UTF-8 with \n line ends whatever the locale says.
        stream = sys.stdout if "w" in mode else sys.stdin
        stream.reconfigure(encoding="utf-8", newline="\n")  # type: ignore[union-attr]
        yield stream
        return
    with open(path, mode, encoding="utf-8", newline="\n") as f:
        yield f


def cmd_export(ctx: ServiceContext, args: argparse.Namespace) -> None:
    try:
        selection = Selection(args.tenant, args.scope, vectors=not args.without_vectors)
    except ValueError as exc:
        _fail(str(exc))
        return
    with _opened(args.output, "w") as out:
        counts = export(ctx.db, selection, out)
    # The stream may be standard output: the summary goes to standard error.
    print(f"exported: {sum(counts.values())} rows", file=sys.stderr)


def cmd_import(ctx: ServiceContext, args: argparse.Namespace) -> None:
    try:
        with _opened(args.input, "r") as stream:
            report = import_stream(ctx.db, stream)
    except ImportRefused as exc:
        _fail(f"import refused: {exc}")
        return
    print(f"inserted: {sum(report.inserted.values())}")
    print(f"unchanged: {sum(report.unchanged.values())}")
    for name in sorted(report.inserted):
        print(f"  {name}: {report.inserted[name]}")


def cmd_copy(ctx: ServiceContext, args: argparse.Namespace) -> None:
    target = Database(args.to)
    try:
        report = copy_store(ctx.db, target, ctx.settings.limits, batch=args.batch)
    except CopyRefused as exc:
        _fail(f"copy refused: {exc}")
        return
    finally:
        target.dispose()
    if args.json:
        print(json.dumps({**report.__dict__, "equal": report.equal}, indent=2))
    else:
        print(f"rows: {sum(report.rows.values())}")
        for name, n in report.rows.items():
            print(f"  {name}: {n}")
        print(f"different_rows: {report.different_rows}")
        for line in report.differences:
            print(f"  {line}")
        print(f"catalogs: {report.catalogs}")
        print(f"different_catalogs: {len(report.catalog_differences)}")
        for line in report.catalog_differences:
            print(f"  {line}")
        print(f"copy_seconds: {report.copy_seconds:.1f}\tverify_seconds: {report.verify_seconds:.1f}")
        print("verified: the target equals the source" if report.equal else "NOT VERIFIED: the target differs")
    if not report.equal:
        raise SystemExit(1)


def cmd_backup(ctx: ServiceContext, args: argparse.Namespace) -> None:
    try:
        verdict = backup(ctx.db, args.path)
    except BackupRefused as exc:
        _fail(f"backup refused: {exc}")
        return
    print(f"backup: {args.path}")
    print(f"integrity_check: {verdict}")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write a tenant, a scope or the whole store as a JSON Lines stream")
    p.add_argument("--tenant", help="only this tenant (default: every tenant)")
    p.add_argument("--scope", help="only this scope of --tenant")
    p.add_argument("--without-vectors", action="store_true", help="leave semantic vectors out (embed rebuilds them)")
    p.add_argument("--output", default="-", help="file to write, - for standard output (the default)")
    p.set_defaults(fn=cmd_export)
    p = sub.add_parser("import", help="read an export stream into this store (idempotent, identifiers kept)")
    p.add_argument("--input", default="-", help="file to read, - for standard input (the default)")
    p.set_defaults(fn=cmd_import)
    p = sub.add_parser("copy", help="copy the whole store onto an empty database and verify the copy")
    p.add_argument("--to", required=True, help="SQLAlchemy URL of the target, e.g. postgresql+psycopg://…")
    p.add_argument("--batch", type=int, default=2000, help="rows per insert batch")
    p.add_argument("--json", action="store_true")
    p.set_defaults(fn=cmd_copy)
    p = sub.add_parser("backup", help="online backup of a SQLite store to a new file (PostgreSQL: pg_dump)")
    p.add_argument("path")
    p.set_defaults(fn=cmd_backup)
