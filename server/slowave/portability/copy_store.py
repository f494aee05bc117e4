"""`slowave-admin copy --to URL`: the whole store (every tenant) onto an empty database, then proof
that the copy is the store: every row of every table compared, and a fixed set of retrievals
ranked on both gives the same catalogs.

The source is read in one snapshot, so a server may keep running on it; what it writes after the
snapshot is not copied (stop it, or copy again, before switching over). The target is migrated by
this slowave and must hold no rows. It is written one table per transaction: a copy that fails
leaves a partial target, which a second copy refuses (drop and recreate the database first).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import select

from slowave.config import RetrievalLimits
from slowave.domain.relevance import Cue
from slowave.service.retrieval import build_catalog, known_cue_number
from slowave.storage import portability as p
from slowave.storage import tables as t
from slowave.storage.database import Database
from slowave.storage.executor import Executor
from slowave.storage.unit_of_work import UnitOfWork

_EVERYTHING = p.Selection()
_SHOWN_DIFFERENCES = 20


class CopyRefused(Exception):
    """The copy cannot start; nothing was written."""


@dataclass
class CopyReport:
    rows: dict[str, int] = field(default_factory=dict)
    differences: list[str] = field(default_factory=list)
    """Rows that differ between source and target (the first few, described)."""
    different_rows: int = 0
    catalogs: int = 0
    """Retrievals ranked on both stores."""
    catalog_differences: list[str] = field(default_factory=list)
    copy_seconds: float = 0.0
    verify_seconds: float = 0.0

    @property
    def equal(self) -> bool:
        return self.different_rows == 0 and not self.catalog_differences


def copy_store(
    source: Database,
    target: Database,
    limits: RetrievalLimits | None = None,
    *,
    batch: int = 2000,
    scopes: int = 50,
    cues_per_scope: int = 6,
) -> CopyReport:
    target.migrate()
    with p.snapshot(target) as ex:
        filled = {name: n for name, n in p.table_counts(ex).items() if n}
        if filled:
            raise CopyRefused(f"the target database is not empty ({filled}): copy onto an empty database only")
    report = CopyReport()
    started = time.monotonic()
    with p.snapshot(source) as src:
        revision = p.schema_revision(src)
        if revision != p.head_revision():
            raise CopyRefused(f"the source is at schema revision {revision!r}: migrate it first")
        for tbl in p.TABLES:
            rows = p.read_rows(src, tbl, _EVERYTHING, batch)
            n = 0
            with p.writing(target) as writer:
                while chunk := [p.decode(tbl, r) for r in itertools.islice(rows, batch)]:
                    writer.insert(tbl, chunk)
                    n += len(chunk)
            report.rows[tbl.name] = n
        with p.writing(target) as writer:
            writer.reset_sequences()
        report.copy_seconds = time.monotonic() - started
        started = time.monotonic()
        with p.snapshot(target) as dst:
            _compare_rows(src, dst, report)
            cues = fixed_cues(src, scopes, cues_per_scope)
            report.catalogs = len(cues)
            limits = limits or RetrievalLimits()
            before, after = catalogs(src, cues, limits), catalogs(dst, cues, limits)
            for cue, a, b in zip(cues, before, after):
                if a != b:
                    report.catalog_differences.append(f"tenant {cue[0]!r} scope {cue[1]!r} cue {cue[2][:60]!r}")
        report.verify_seconds = time.monotonic() - started
    return report


def _compare_rows(src: Executor, dst: Executor, report: CopyReport) -> None:
    for tbl in p.TABLES:
        pairs = itertools.zip_longest(p.read_rows(src, tbl, _EVERYTHING), p.read_rows(dst, tbl, _EVERYTHING))
        for a, b in pairs:
            if a == b:
                continue
            report.different_rows += 1
            if len(report.differences) < _SHOWN_DIFFERENCES:
                key = p.key_of(tbl, a if a is not None else b)  # type: ignore[arg-type]
                what = "missing in the target" if b is None else "only in the target" if a is None else "differs"
                report.differences.append(f"{tbl.name} {key!r}: {what}")


_m, _s = t.memories, t.sessions
_SCOPES = select(_m.c.tenant, _m.c.scope).where(_m.c.status == "active").distinct().order_by(_m.c.tenant, _m.c.scope)


def fixed_cues(ex: Executor, scopes: int, per_scope: int) -> list[tuple[str, str, str, dict]]:
    """Cues that exercise every part of retrieval on the store's own data: the tasks of a scope's
    earliest sessions (cues learned evidence is kept under) and the texts of its oldest and newest
    active memories (the containment floor and full-text matches), for its first scopes."""
    cues: list[tuple[str, str, str, dict]] = []
    for tenant, scope in ex.rows(_SCOPES.limit(scopes)):
        half = max(1, per_scope // 2)
        tasks = ex.rows(
            select(_s.c.task, _s.c.task_context)
            .where(_s.c.tenant == tenant, _s.c.scope == scope)
            .order_by(_s.c.started_at, _s.c.id)
            .limit(half)
        )
        active = (_m.c.tenant == tenant, _m.c.scope == scope, _m.c.status == "active")
        oldest = ex.rows(select(_m.c.content).where(*active).order_by(_m.c.number).limit(half))
        newest = ex.rows(select(_m.c.content).where(*active).order_by(_m.c.number.desc()).limit(half))
        cues += [(tenant, scope, task, context or {}) for task, context in tasks]
        cues += [(tenant, scope, content, {}) for (content,) in [*oldest, *newest]]
    return cues


def catalogs(ex: Executor, cues: list[tuple[str, str, str, dict]], limits: RetrievalLimits) -> Iterator[dict[str, Any]]:
    """The catalog Activate would freeze for each cue (lexical channel), read as Activate reads it,
    without writing: a cue the store has never seen ranks under no evidence of its own."""
    uow = UnitOfWork(ex.connection)
    for tenant, scope, task, context in cues:
        cue = Cue(task, "")
        yield build_catalog(uow, tenant, scope, cue, known_cue_number(uow, tenant, cue), context, limits).to_json()
