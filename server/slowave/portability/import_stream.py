"""`slowave-admin import`: reads an export stream back into a store, in one transaction.

Rows keep their identifiers (memory numbers behind `sch_N`, event numbers, ledger seqs, session
and retrieval ids). Each row is compared with the target's row of the same primary key: absent, it
is inserted; equal, it is left alone (so importing twice changes nothing); different, the import is
refused and nothing is written — identifiers are never remapped. A row whose key is free but which
collides with another row on a unique key (a second active copy of a claim, a ledger event id) is
refused the same way. Rows the target has and the stream lacks are kept.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Table
from sqlalchemy.exc import IntegrityError

from slowave.portability.export_stream import FORMAT, FORMAT_VERSION
from slowave.storage import portability as p
from slowave.storage.database import Database
from slowave.storage.executor import SQLiteIntegrityError

_BATCH = 1000


class ImportRefused(Exception):
    """The stream cannot be imported; nothing was written."""


@dataclass
class ImportReport:
    inserted: dict[str, int] = field(default_factory=dict)
    unchanged: dict[str, int] = field(default_factory=dict)


def _records(lines: Iterable[str]) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ImportRefused(f"line {number} is not JSON: {exc}") from exc
        if not isinstance(record, dict) or "kind" not in record:
            raise ImportRefused(f"line {number} is not a record of the export format")
        yield number, record


def _newer(version: object) -> bool:
    return isinstance(version, int) and version > FORMAT_VERSION


def check_header(header: dict[str, Any]) -> p.Selection:
    if header.get("kind") != "header" or header.get("format") != FORMAT:
        raise ImportRefused(f"not a {FORMAT} stream (its first line is no {FORMAT} header)")
    version = header.get("format_version")
    if version != FORMAT_VERSION:
        raise ImportRefused(
            f"format version {version!r} is not supported: this slowave reads version {FORMAT_VERSION}"
            + (" (written by a newer slowave: upgrade this one)" if _newer(version) else "")
        )
    revision, head = header.get("schema_revision"), p.head_revision()
    if revision != head:
        if revision not in p.known_revisions():
            why = "a newer schema than this slowave knows: upgrade slowave, then import"
        else:
            why = "an older schema: import it into a store migrated to that revision, migrate it, and export again"
        raise ImportRefused(f"the stream is of schema revision {revision!r}, this store is at {head!r} ({why})")
    sel = header.get("selection") or {}
    return p.Selection(sel.get("tenant"), sel.get("scope"), bool(sel.get("vectors", True)))


def import_stream(db: Database, lines: Iterable[str]) -> ImportReport:
    records = _records(lines)
    first = next(records, None)
    if first is None:
        raise ImportRefused("the stream is empty")
    selection = check_header(first[1])
    order = [p.BY_NAME[name] for name in first[1].get("tables", []) if name in p.BY_NAME]
    if len(order) != len(first[1].get("tables", [])):
        raise ImportRefused("the header names a table this schema does not have")
    report = ImportReport()
    try:
        with p.writing(db) as writer:
            _import(writer, selection, order, records, report)
            writer.reset_sequences()
    except (IntegrityError, SQLiteIntegrityError) as exc:
        raise ImportRefused(f"a row collides with one the store already has (nothing was imported): {exc}") from exc
    return report


def _import(
    writer: p.RowWriter,
    selection: p.Selection,
    order: list[Table],
    records: Iterator[tuple[int, dict[str, Any]]],
    report: ImportReport,
) -> None:
    def flush(tbl: Table, rows: list[dict[str, Any]]) -> None:
        if len(tbl.primary_key.columns) == 1 and rows:
            (col,) = tbl.primary_key.columns
            taken = writer.taken(tbl, [r[col.name] for r in rows])
            if taken:
                raise ImportRefused(
                    f"the store already uses {tbl.name} key {taken[0]!r} for another row outside the stream's "
                    "selection (identifiers are kept, never remapped; nothing was imported)"
                )
        writer.insert(tbl, rows)

    position, current, existing = -1, None, {}
    pending: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for number, record in records:
        if record["kind"] == "end":
            if current is not None:
                flush(current, pending)
            if record.get("rows") != {tbl.name: counts.get(tbl.name, 0) for tbl in order}:
                raise ImportRefused("the end record's row counts differ from the rows read: the stream is damaged")
            if next(records, None) is not None:
                raise ImportRefused(f"records follow the end record (line {number})")
            return
        if record["kind"] != "row":
            raise ImportRefused(f"line {number}: unknown record kind {record['kind']!r}")
        name = record.get("table")
        tbl = p.BY_NAME.get(name)  # type: ignore[arg-type]
        if tbl is None or tbl not in order:
            raise ImportRefused(f"line {number}: table {name!r} is not one the header announced")
        if tbl is not current:
            if order.index(tbl) < position:
                raise ImportRefused(f"line {number}: table {name} out of order")
            if current is not None:
                flush(current, pending)
                pending = []
            position, current = order.index(tbl), tbl
            existing = writer.existing(tbl, selection)
        row = record.get("row")
        if not isinstance(row, dict):
            raise ImportRefused(f"line {number}: a row record without a row")
        try:
            decoded = p.decode(tbl, row)
        except (ValueError, TypeError) as exc:
            raise ImportRefused(f"line {number}: {exc}") from exc
        counts[name] = counts.get(name, 0) + 1  # type: ignore[index]
        key = p.key_of(tbl, row)
        found = existing.get(key)
        if found is not None:
            if found != row:
                raise ImportRefused(
                    f"line {number}: the store already has a different {name} row with key {key!r} "
                    "(identifiers are kept, never remapped; nothing was imported)"
                )
            report.unchanged[name] = report.unchanged.get(name, 0) + 1  # type: ignore[index]
            continue
        pending.append(decoded)
        report.inserted[name] = report.inserted.get(name, 0) + 1  # type: ignore[index]
        if len(pending) >= _BATCH:
            flush(tbl, pending)
            pending = []
    raise ImportRefused("the stream ends without its end record: it is truncated")
