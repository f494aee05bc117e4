"""Erasure's statements: the content of named memories, sessions and scopes removed from every
table that holds it, and the audit record that says it happened (migration 0011). The rules —
what is deleted, what is blanked, in which order — are service.erasure's; each method here is one
kind of change and returns how many rows it changed.

Rows that other rows point at (memories, sessions, ledger rows, cues) are kept with their texts
blanked: a memory's number must never be handed out again (SQLite numbers after the largest), the
ledger's seq order and the learned sums projected from it stay replayable, and a stored catalog
can still be paged. Rows nothing points at (vectors, procedures, knowledge gaps, term statistics)
are deleted.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    Integer,
    String,
    bindparam,
    case,
    delete,
    literal,
    null,
    or_,
    select,
    update,
)
from sqlalchemy import text as sql_text

from slowave.storage import full_text
from slowave.storage import tables as t
from slowave.storage.executor import Executor, PerDialect, any_of, values_of
from slowave.storage.writer_lock import WriterLock

ERASED = "[erased]"
"""What replaces an erased free text that the row must keep non-empty (ledger texts)."""

ERASED_REASON = "erased"
"""The stale_reason of an erased memory: never retrievable, never a stand-in (domain.supersession)."""

_m, _st, _v, _e, _s = t.memories, t.scope_terms, t.memory_vectors, t.source_events, t.sessions
_f, _p, _g, _c, _r = t.feedback_rows, t.procedures, t.knowledge_gaps, t.cues, t.retrievals
_q, _lk, _cur, _audit = t.consolidation_queue, t.session_memory_links, t.cursors, t.erasures
_o = t.occasions
_numbers = values_of("numbers", Integer())
_ids = values_of("ids", String())
_tenant = bindparam("tenant")
_scope = bindparam("scope")

NOT_ERASED = or_(_m.c.stale_reason.is_(None), _m.c.stale_reason != ERASED_REASON)
_MEMORY_COLUMNS = (
    _m.c.number,
    _m.c.scope,
    _m.c.status,
    _m.c.content_hash,
    _m.c.own_terms,
    _m.c.context_terms,
    _m.c.source_kind,
    _m.c.source_session_id,
    _m.c.occasion,
)
_SCOPE_MEMORIES = (
    select(*_MEMORY_COLUMNS).where(_m.c.tenant == _tenant, _m.c.scope == _scope, NOT_ERASED).order_by(_m.c.number)
)
_MEMORIES = (
    select(*_MEMORY_COLUMNS)
    .where(_m.c.tenant == _tenant, any_of(_m.c.number, _numbers), NOT_ERASED)
    .order_by(_m.c.number)
)
# Memories stored after `after` in the same session carry its terms in their session context.
_CONTEXT_HOLDERS = (
    select(_m.c.number, _m.c.scope, _m.c.own_terms, _m.c.context_terms)
    .where(
        _m.c.tenant == _tenant,
        _m.c.scope == _scope,
        _m.c.source_session_id == bindparam("session_id"),
        _m.c.number > bindparam("after"),
        _m.c.context_terms.isnot(None),
        NOT_ERASED,
    )
    .order_by(_m.c.number)
)
_BLANK_MEMORY = (
    update(_m)
    .where(_m.c.number == bindparam("n"))
    .values(
        content="",
        content_norm="",
        content_hash="",
        content_key=None,
        own_terms=None,
        context_terms=None,
        claim_shape=None,
        occurred_at=None,
        occurred_on=None,
        status="retired",
        stale_reason=ERASED_REASON,
        retired_at=bindparam("now"),
        # An active memory is retired as Feedback retires one: later ledger rows count for nothing.
        retired_seq=case((_m.c.retired_seq.is_(None), bindparam("seq")), else_=_m.c.retired_seq),
    )
)
_SET_CONTEXT = update(_m).where(_m.c.number == bindparam("n")).values(context_terms=bindparam("context"))
_OCCASIONS = select(_o.c.number, _o.c.terms).where(any_of(_o.c.number, _numbers)).order_by(_o.c.number)
_SET_OCCASION_TERMS = (
    update(_o)
    .where(_o.c.number == bindparam("n"))
    .values(terms=bindparam("occasion_terms"), revision=_o.c.revision + 1)
)
_DELETE_OCCASIONS = delete(_o).where(_o.c.tenant == _tenant, _o.c.scope == _scope)

_fts, _tsv = full_text.FTS, full_text.TSV
# SQLite's index is contentless: an entry is removed by naming the very words it was indexed with.
_UNINDEX = PerDialect(
    lambda dialect: (
        _fts.insert().values(memories_fts=literal("delete"), rowid=bindparam("n"), words=bindparam("w"))
        if dialect == "sqlite"
        else _tsv.update().where(_tsv.c.number == bindparam("n")).values(content_tsv=null())
    )
)
# Removed entries stay in FTS5's older segments until they are merged; `optimize` merges them all.
_MERGE_INDEX = PerDialect(
    lambda dialect: _fts.insert().values(memories_fts=literal("optimize")) if dialect == "sqlite" else None
)

_DELETE_SCOPE_TERMS = delete(_st).where(_st.c.tenant == _tenant, _st.c.scope == _scope)
_DECREMENT_TERM = (
    update(_st)
    .where(
        _st.c.tenant == bindparam("t_tenant"), _st.c.scope == bindparam("t_scope"), _st.c.term == bindparam("t_term")
    )
    .values(docs=_st.c.docs - bindparam("by"))
)
_PRUNE_TERMS = delete(_st).where(_st.c.tenant == _tenant, _st.c.scope == _scope, _st.c.docs <= 0)
_PRESENT_TERMS = select(_st.c.term).where(
    _st.c.tenant == _tenant, _st.c.scope == _scope, any_of(_st.c.term, values_of("terms", String()))
)

_DELETE_VECTORS = delete(_v).where(any_of(_v.c.number, _numbers))
_BLANK_MEMORY_EVENTS = update(_e).where(any_of(_e.c.memory_number, _numbers), _e.c.content != "").values(content="")
_BLANK_SESSION_EVENTS = update(_e).where(any_of(_e.c.session_id, _ids), _e.c.content != "").values(content="")


def _erased_text(col):
    return case((col.is_(None), null()), else_=literal(ERASED))


_LEDGER_TEXTS = dict(
    reason=_erased_text(_f.c.reason),
    contribution=_erased_text(_f.c.contribution),
    retrieval_quality=_erased_text(_f.c.retrieval_quality),
    missing=null(),
)
_BLANK_SESSION_LEDGER = update(_f).where(any_of(_f.c.session_id, _ids)).values(**_LEDGER_TEXTS)
_BLANK_TARGET_LEDGER = (
    update(_f).where(_f.c.target_kind == bindparam("kind"), any_of(_f.c.target_id, _ids)).values(**_LEDGER_TEXTS)
)

_SCOPE_SESSIONS = select(_s.c.id, _s.c.verification).where(_s.c.tenant == _tenant, _s.c.scope == _scope)
_SESSIONS = select(_s.c.id, _s.c.outcome_summary).where(any_of(_s.c.id, _ids)).order_by(_s.c.id)
_LOCKED_SESSIONS = _SESSIONS.with_for_update()
_SCOPE_SESSION_IDS = select(_s.c.id).where(_s.c.tenant == _tenant, _s.c.scope == _scope)
_LOCK_SESSIONS = select(_s.c.id).where(_s.c.tenant == _tenant, _s.c.scope == _scope).with_for_update()
_BLANK_SESSION = (
    update(_s)
    .where(_s.c.id == bindparam("sid"))
    .values(
        task="",
        initial_goal="",
        task_context=bindparam("empty", type_=JSON),
        final_goal=None,
        outcome_summary=None,
        verification=bindparam("verif", type_=JSON),
        procedure_id=None,
    )
)
_BLANK_SUMMARY = update(_s).where(_s.c.id == bindparam("sid")).values(outcome_summary=None)
_BLANK_LINKS = update(_lk).where(any_of(_lk.c.session_id, _ids)).values(summary_hash="")
_BLANK_MEMORY_LINKS = update(_lk).where(any_of(_lk.c.memory_number, _numbers)).values(summary_hash="")
# Queued consolidations of the scope's sessions would turn their (erased) summaries into lessons.
_DROP_QUEUED = update(_q).where(any_of(_q.c.session_id, _ids), _q.c.done_at.is_(None)).values(done_at=bindparam("now"))

_DELETE_PROCEDURES = delete(_p).where(_p.c.tenant == _tenant, _p.c.scope == _scope)
_DELETE_GAPS = delete(_g).where(_g.c.tenant == _tenant, _g.c.scope == _scope)
# A stored catalog may name the deleted procedures: its further pages can no longer be served.
_DELETE_CURSORS = delete(_cur).where(
    _cur.c.retrieval_id.in_(select(_r.c.id).where(_r.c.tenant == _tenant, _r.c.scope == _scope))
)

_SCOPE_CUES = (
    select(_r.c.cue_number).where(_r.c.tenant == _tenant, _r.c.scope == _scope, _r.c.cue_number.isnot(None)).distinct()
)
_CUES_ELSEWHERE = (
    select(_r.c.cue_number)
    .where(_r.c.tenant == _tenant, _r.c.scope != _scope, any_of(_r.c.cue_number, _numbers))
    .distinct()
)
_CUE_ROWS = select(_c.c.number, _c.c.terms).where(any_of(_c.c.number, _numbers)).order_by(_c.c.number)
_TENANT_CUES = select(_c.c.number, _c.c.terms).where(_c.c.tenant == _tenant).order_by(_c.c.number)
_SET_CUE_TERMS = update(_c).where(_c.c.number == bindparam("n")).values(terms=bindparam("cue_terms"))
# The key hash is the cue text's digest: a guess could be confirmed against it.
_BLANK_CUE = update(_c).where(_c.c.number == bindparam("n")).values(terms="", key_hash=bindparam("key"))

_TENANT_SCOPES = [
    select(table.c.scope).where(table.c.tenant == _tenant).distinct() for table in (_m, _s, _p, _g, _r, _st)
]
_MAX_SEQ = select(_f.c.seq).order_by(_f.c.seq.desc()).limit(1)
_AUDIT = select(_audit).order_by(_audit.c.id)


class ErasureStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    # -------------------------------------------------------------- reads

    def scopes_of_tenant(self, tenant: str) -> list[str]:
        found: set[str] = set()
        for stmt in _TENANT_SCOPES:
            found.update(scope for (scope,) in self.ex.rows(stmt, {"tenant": tenant}))
        return sorted(found)

    def memories_of_scope(self, tenant: str, scope: str) -> list[Any]:
        return self.ex.rows(_SCOPE_MEMORIES, {"tenant": tenant, "scope": scope})

    def memories(self, tenant: str, numbers: Sequence[int]) -> list[Any]:
        return self.ex.rows(_MEMORIES, {"tenant": tenant, "numbers": list(numbers)}) if numbers else []

    def context_holders(self, tenant: str, scope: str, session_id: str, after: int) -> list[Any]:
        params = {"tenant": tenant, "scope": scope, "session_id": session_id, "after": after}
        return self.ex.rows(_CONTEXT_HOLDERS, params)

    def sessions_of_scope(self, tenant: str, scope: str, *, lock: bool) -> list[Any]:
        if lock:
            self.ex.rows(_LOCK_SESSIONS, {"tenant": tenant, "scope": scope})
        return self.ex.rows(_SCOPE_SESSIONS, {"tenant": tenant, "scope": scope})

    def sessions(self, ids: Iterable[str], *, lock: bool = False) -> list[Any]:
        ids = sorted(set(ids))
        return self.ex.rows(_LOCKED_SESSIONS if lock else _SESSIONS, {"ids": ids}) if ids else []

    def session_ids_of_scope(self, tenant: str, scope: str) -> list[str]:
        return [i for (i,) in self.ex.rows(_SCOPE_SESSION_IDS, {"tenant": tenant, "scope": scope})]

    def present_terms(self, tenant: str, scope: str, terms: Iterable[str]) -> set[str]:
        wanted = sorted(set(terms))
        if not wanted:
            return set()
        return {w for (w,) in self.ex.rows(_PRESENT_TERMS, {"tenant": tenant, "scope": scope, "terms": wanted})}

    def cues_of_scope(self, tenant: str, scope: str) -> tuple[list[Any], set[int]]:
        """The cues of the scope's retrievals, and which of them other scopes' retrievals share."""
        numbers = [n for (n,) in self.ex.rows(_SCOPE_CUES, {"tenant": tenant, "scope": scope})]
        if not numbers:
            return [], set()
        shared = {n for (n,) in self.ex.rows(_CUES_ELSEWHERE, {"tenant": tenant, "scope": scope, "numbers": numbers})}
        return self.ex.rows(_CUE_ROWS, {"numbers": numbers}), shared

    def cues_of_tenant(self, tenant: str) -> list[Any]:
        return self.ex.rows(_TENANT_CUES, {"tenant": tenant})

    def max_seq(self) -> int:
        return self.ex.scalar(_MAX_SEQ) or 0

    def audit_records(self) -> list[Any]:
        return self.ex.rows(_AUDIT)

    # -------------------------------------------------------------- writes

    def secure_delete(self, on: bool) -> None:
        """SQLite overwrites freed content with zeros while on (this connection only)."""
        if self.ex.dialect == "sqlite":
            self.ex.run(sql_text(f"PRAGMA secure_delete={'ON' if on else 'OFF'}"))

    def unindex(self, entries: Sequence[dict[str, Any]]) -> None:
        """Removes full-text entries (n: memory number, w: the words it was indexed with)."""
        if entries:
            self.ex.run_many(_UNINDEX, list(entries))

    def reindex(self, entries: Sequence[dict[str, Any]]) -> None:
        if entries:
            self.ex.run_many(full_text.INDEX_WORDS, list(entries))

    def merge_index(self) -> None:
        self.ex.run(_MERGE_INDEX)

    def blank_memories(self, numbers: Sequence[int], now: datetime, seq: int) -> int:
        rows = [{"n": n, "now": now, "seq": seq} for n in numbers]
        if rows:
            self.ex.run_many(_BLANK_MEMORY, rows)
        return len(rows)

    def set_context(self, number: int, context: str | None) -> None:
        self.ex.run(_SET_CONTEXT, {"n": number, "context": context})

    def occasions(self, numbers: Iterable[int]) -> list[Any]:
        nums = sorted(set(numbers))
        return self.ex.rows(_OCCASIONS, {"numbers": nums}) if nums else []

    def set_occasion_terms(self, number: int, terms: str) -> None:
        self.ex.run(_SET_OCCASION_TERMS, {"n": number, "occasion_terms": terms})

    def delete_occasions(self, tenant: str, scope: str) -> int:
        return self.ex.run(_DELETE_OCCASIONS, {"tenant": tenant, "scope": scope})

    def delete_scope_terms(self, tenant: str, scope: str) -> int:
        return self.ex.run(_DELETE_SCOPE_TERMS, {"tenant": tenant, "scope": scope})

    def decrement_terms(self, tenant: str, scope: str, counts: dict[str, int]) -> int:
        rows = [{"t_tenant": tenant, "t_scope": scope, "t_term": term, "by": by} for term, by in sorted(counts.items())]
        if rows:
            self.ex.run_many(_DECREMENT_TERM, rows)
        return self.ex.run(_PRUNE_TERMS, {"tenant": tenant, "scope": scope})

    def delete_vectors(self, numbers: Sequence[int]) -> int:
        return self.ex.run(_DELETE_VECTORS, {"numbers": list(numbers)}) if numbers else 0

    def blank_memory_events(self, numbers: Sequence[int]) -> int:
        return self.ex.run(_BLANK_MEMORY_EVENTS, {"numbers": list(numbers)}) if numbers else 0

    def blank_session_events(self, ids: Sequence[str]) -> int:
        return self.ex.run(_BLANK_SESSION_EVENTS, {"ids": list(ids)}) if ids else 0

    def blank_session_ledger(self, ids: Sequence[str]) -> int:
        return self.ex.run(_BLANK_SESSION_LEDGER, {"ids": list(ids)}) if ids else 0

    def blank_target_ledger(self, kind: str, ids: Sequence[str]) -> int:
        return self.ex.run(_BLANK_TARGET_LEDGER, {"kind": kind, "ids": list(ids)}) if ids else 0

    def blank_session(self, session_id: str, verification: dict[str, Any] | None) -> None:
        self.ex.run(_BLANK_SESSION, {"sid": session_id, "empty": {}, "verif": verification})

    def blank_summary(self, session_id: str) -> None:
        self.ex.run(_BLANK_SUMMARY, {"sid": session_id})

    def blank_links(self, ids: Sequence[str]) -> int:
        return self.ex.run(_BLANK_LINKS, {"ids": list(ids)}) if ids else 0

    def blank_memory_links(self, numbers: Sequence[int]) -> int:
        return self.ex.run(_BLANK_MEMORY_LINKS, {"numbers": list(numbers)}) if numbers else 0

    def drop_queued(self, ids: Sequence[str], now: datetime) -> int:
        return self.ex.run(_DROP_QUEUED, {"ids": list(ids), "now": now}) if ids else 0

    def delete_procedures(self, tenant: str, scope: str) -> int:
        return self.ex.run(_DELETE_PROCEDURES, {"tenant": tenant, "scope": scope})

    def delete_gaps(self, tenant: str, scope: str) -> int:
        return self.ex.run(_DELETE_GAPS, {"tenant": tenant, "scope": scope})

    def delete_cursors(self, tenant: str, scope: str) -> int:
        return self.ex.run(_DELETE_CURSORS, {"tenant": tenant, "scope": scope})

    def set_cue_terms(self, number: int, terms: str) -> None:
        self.ex.run(_SET_CUE_TERMS, {"n": number, "cue_terms": terms})

    def blank_cue(self, number: int) -> None:
        self.ex.run(_BLANK_CUE, {"n": number, "key": f"erased:{number}"})

    def record(self, **values: Any) -> int:
        """Appends the audit record; returns its id."""
        return self.ex.insert(_audit, values)


def reclaim(engine: Any, sqlite_path: str | None, tables: Sequence[str], attempts: int = 20) -> list[str]:
    """Makes the erased bytes unreadable from the store's files, after the erasure committed.

    SQLite: VACUUM rewrites the file from its live rows (secure_delete zeroes what it frees), then
    a TRUNCATE checkpoint copies the rewritten pages into the file and empties the write-ahead log,
    whose older frames still held the erased pages. Both run on a connection of their own under the
    store's writer lock, so the server's writers wait instead of failing; the checkpoint is retried
    while a reader of the server still holds an older snapshot. PostgreSQL: VACUUM of the touched
    tables (dead tuples become reusable space; see docs/operations.md for what it cannot reach).
    Returns what was done, for the report."""
    if sqlite_path is None:
        done = []
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            for name in sorted(set(tables) & set(t.metadata.tables)):  # the index is memories' column
                connection.exec_driver_sql(f'VACUUM (ANALYZE) "{name}"')
                done.append(f"VACUUM {name}")
        return done
    lock = WriterLock(f"{sqlite_path}-lock")
    if not lock.acquire(timeout=300):
        raise TimeoutError("the store's writer lock stayed busy; the erasure is committed, run erase again to reclaim")
    try:
        connection = sqlite3.connect(f"file:{sqlite_path}?mode=rw", uri=True, isolation_level=None, timeout=60)
        try:
            connection.execute("PRAGMA secure_delete=ON")
            connection.execute("VACUUM")
            for _ in range(attempts):
                ((busy, _in_log, _copied),) = connection.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
                if not busy:
                    return ["VACUUM", "wal_checkpoint(TRUNCATE)"]
                time.sleep(0.25)
        finally:
            connection.close()
    finally:
        lock.release()
    raise TimeoutError("readers kept the write-ahead log busy; the erasure is committed, run erase again to reclaim")
