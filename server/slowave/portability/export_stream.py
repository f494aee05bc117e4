"""`slowave-admin export`: a store, a tenant or a scope as a versioned JSON Lines stream.

Line 1 is the header (format name and version, the schema's Alembic revision, the source dialect,
the selection and its tables); then one `row` record per row, table by table in dependency order
and within a table in primary-key order; last an `end` record with the rows per table, so that a
truncated stream is refused rather than half imported. Keys are sorted and nothing depends on the
time of the export, so the same rows always give the same bytes.
"""

from __future__ import annotations

import json
from typing import Any, TextIO

from slowave.storage import portability as p
from slowave.storage.database import Database

FORMAT = "slowave-export"
FORMAT_VERSION = 1
"""Raised on any change that an importer of the previous version would misread (a table or
column added, removed or re-encoded); importers refuse versions they do not know."""


def line(record: dict[str, Any]) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + "\n"


def export(db: Database, selection: p.Selection, out: TextIO) -> dict[str, int]:
    """Writes the stream of one consistent snapshot; returns the rows written per table."""
    counts: dict[str, int] = {}
    with p.snapshot(db) as ex:
        tables = selection.tables()
        out.write(
            line(
                {
                    "kind": "header",
                    "format": FORMAT,
                    "format_version": FORMAT_VERSION,
                    "schema_revision": p.schema_revision(ex),
                    "source_dialect": ex.dialect,
                    "selection": selection.as_json(),
                    "tables": [tbl.name for tbl in tables],
                }
            )
        )
        for tbl in tables:
            n = 0
            for row in p.read_rows(ex, tbl, selection):
                out.write(line({"kind": "row", "table": tbl.name, "row": row}))
                n += 1
            counts[tbl.name] = n
        out.write(line({"kind": "end", "rows": counts}))
    return counts
