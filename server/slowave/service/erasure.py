"""Erasure (docs/operations.md "Erasure"): the content of a scope, of named memories or of a whole
tenant removed from everywhere it lives, in one transaction, with an audit record that holds no
content.

The ledger is append-only by contract (behaviour §10.5); erasure is its one deliberate, audited
exception: ledger rows keep their ids, targets, assessments and seq order — so learning replays to
the same sums — and lose their free texts (reason, contribution, retrieval_quality, missing).

What each kind of erasure touches:

- a memory: its row (kept, blanked and retired `erased`: its number is never reused and stored
  catalogs can still be paged), its full-text entry, its term statistics, its vectors, the source
  events that stored it, the free texts of the ledger rows about it, the session context of the
  memories stored after it in the same session (they were indexed with its terms), the outcome
  summary a consolidated lesson was made from, and the cue terms that no remaining memory of the
  scope holds;
- a scope: all of its memories as above, plus its sessions' tasks, goals, contexts, outcome
  summaries, verification summaries and trajectories, every ledger text of its sessions, its
  procedures, knowledge gaps and term statistics, its queued consolidations, its cursors, and
  the cues of its retrievals (blanked when no other scope used them, else stripped of its words);
- a tenant (`--all`): every scope it has, and all of its cues.

Saved dense graphs (dense_graph_files) hold quantised vectors of the memories, so the erased
scopes' graphs are deleted once the erasure is committed; the next start builds them anew.

In-process caches need nothing: the vector cache (dense_index.VectorIndex) may still hold an erased
memory's vector until the process restarts (and does not save it again: a graph is saved only when
the database holds every vector it covers), but every candidate is re-read from the memories table,
where an erased memory is never retrievable; term profiles are cached by text, and no erased text
is read again.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from slowave.dense_graph_files import GraphFiles
from slowave.domain.claim_identity import claim_hash
from slowave.domain.identifiers import memory_id
from slowave.domain.relevance import (
    TOTAL_CONTEXT_WORDS_TERM,
    TOTAL_DOCS_TERM,
    TOTAL_OCCASION_WORDS_TERM,
    TOTAL_WORDS_TERM,
    context_term,
)
from slowave.storage.database import Database
from slowave.storage.erasure import reclaim
from slowave.storage.memories import TERM_CHARS
from slowave.storage.search_terms import index_text, scope_key
from slowave.storage.unit_of_work import UnitOfWork


@dataclass(frozen=True)
class ErasureTarget:
    tenant: str
    scope: str | None = None
    memories: tuple[int, ...] = ()
    everything: bool = False


@dataclass
class ErasureReport:
    counts: Counter[str] = field(default_factory=Counter)
    """Rows changed, by "table: change" (what the audit record keeps)."""
    audit_id: int | None = None
    dry_run: bool = False
    reclaimed: list[str] = field(default_factory=list)
    scopes: set[str] = field(default_factory=set)
    """The scopes whose content was erased."""
    graph_files_deleted: int = 0


class _DryRun(Exception):
    """Rolls the erasure back after counting what it would change."""


def erase(
    db: Database,
    target: ErasureTarget,
    *,
    now: datetime,
    command: str,
    actor: str,
    reason: str | None = None,
    dry_run: bool = False,
    graphs: GraphFiles | None = None,
) -> ErasureReport:
    """Erases in one unit of work (a dry run performs it and rolls it back, so its counts are exact),
    then reclaims the freed bytes (SQLite VACUUM + WAL truncation; PostgreSQL VACUUM)."""
    report = ErasureReport(dry_run=dry_run)
    try:
        with db.transaction() as uow:
            uow.erasure.secure_delete(True)
            _erase(uow, target, now, report.counts, report.scopes)
            uow.erasure.merge_index()
            if dry_run:
                uow.erasure.secure_delete(False)  # the connection goes back to the pool
                raise _DryRun()
            report.audit_id = uow.erasure.record(
                erased_at=now,
                command=command,
                actor=actor,
                tenant=target.tenant,
                scope=target.scope,
                memory_ids=[memory_id(n) for n in target.memories] or None,
                reason=reason,
                counts=dict(sorted(report.counts.items())),
            )
            uow.erasure.secure_delete(False)
    except _DryRun:
        return report
    tables = {key.split(":", 1)[0] for key, n in report.counts.items() if n} | {"erasures"}
    if graphs is not None:
        for scope in sorted(report.scopes):
            report.graph_files_deleted += graphs.erase(target.tenant, scope)
    report.reclaimed = reclaim(db.engine, db.sqlite_path, sorted(tables))
    return report


def _erase(uow: UnitOfWork, target: ErasureTarget, now: datetime, counts: Counter[str], scopes: set[str]) -> None:
    tenant = target.tenant
    if target.everything:
        for scope in uow.erasure.scopes_of_tenant(tenant):
            _erase_scope(uow, tenant, scope, now, counts)
            scopes.add(scope)
        for cue in uow.erasure.cues_of_tenant(tenant):
            if cue.terms:
                uow.erasure.blank_cue(cue.number)
                counts["cues: blanked"] += 1
    elif target.scope is not None:
        _erase_scope(uow, tenant, target.scope, now, counts)
        scopes.add(target.scope)
    else:
        rows = uow.erasure.memories(tenant, target.memories)
        missing = set(target.memories) - {r.number for r in rows}
        if missing:
            raise LookupError(f"not found (or already erased) in tenant {tenant}: {sorted(missing)}")
        # Sessions before the claim lock, as Remember and consolidation take them.
        e = uow.erasure
        e.sessions(
            (r.source_session_id for r in rows if r.source_kind == "consolidated" and r.source_session_id), lock=True
        )
        for scope in sorted({r.scope for r in rows}):
            scopes.add(scope)
            uow.memories.lock_claims_of_scope(tenant, scope)
            mine = [r for r in rows if r.scope == scope]
            vanished = _erase_memories(uow, tenant, scope, mine, now, counts, whole_scope=False)
            cues, _shared = uow.erasure.cues_of_scope(tenant, scope)
            _strip_cues(uow, cues, vanished, counts)


def _erase_scope(uow: UnitOfWork, tenant: str, scope: str, now: datetime, counts: Counter[str]) -> None:
    e = uow.erasure
    # Locks in the order the use cases take them (queue entry, session, then the scope's claim
    # lock), so that on PostgreSQL a Remember, Commit or consolidation of the scope running
    # meanwhile either finishes before (and is erased) or waits until after, and none deadlocks.
    # A session ended after the queue is read is consolidated after the erasure, from its summary
    # as the erasure left it: none.
    counts["consolidation_queue: dropped"] += e.drop_queued(e.session_ids_of_scope(tenant, scope), now)
    sessions = e.sessions_of_scope(tenant, scope, lock=True)
    ids = [s.id for s in sessions]
    uow.memories.lock_claims_of_scope(tenant, scope)
    memories = e.memories_of_scope(tenant, scope)
    words = _erase_memories(uow, tenant, scope, memories, now, counts, whole_scope=True)
    for s in sessions:
        verification = s.verification or None
        if verification:
            verification = {k: v for k, v in verification.items() if k != "summary"}
        e.blank_session(s.id, verification)
    counts["sessions: blanked"] += len(sessions)
    counts["source_events: blanked"] += e.blank_session_events(ids)
    counts["feedback_rows: texts blanked"] += e.blank_session_ledger(ids)
    counts["session_memory_links: blanked"] += e.blank_links(ids)
    counts["procedures: deleted"] += e.delete_procedures(tenant, scope)
    counts["cursors: deleted"] += e.delete_cursors(tenant, scope)
    counts["knowledge_gaps: deleted"] += e.delete_gaps(tenant, scope)
    counts["scope_terms: deleted"] += e.delete_scope_terms(tenant, scope)
    counts["occasions: deleted"] += e.delete_occasions(tenant, scope)
    cues, shared = e.cues_of_scope(tenant, scope)
    for cue in cues:
        if cue.number not in shared and cue.terms:
            e.blank_cue(cue.number)
            counts["cues: blanked"] += 1
    _strip_cues(uow, [c for c in cues if c.number in shared], words, counts)


def _erase_memories(
    uow: UnitOfWork,
    tenant: str,
    scope: str,
    rows: list[Any],
    now: datetime,
    counts: Counter[str],
    *,
    whole_scope: bool,
) -> set[str]:
    """Erases memories of one scope; returns the terms no remaining memory of the scope holds."""
    e = uow.erasure
    if not rows:
        return set()
    key = scope_key(tenant, scope)
    numbers = [r.number for r in rows]
    decrements: Counter[str] = Counter()
    erased_terms: set[str] = set()
    unindex = []
    for r in rows:
        own = r.own_terms.split() if r.own_terms else []
        context = r.context_terms.split() if r.context_terms else []
        unindex.append({"n": r.number, "w": index_text(key, own, context)})
        decrements.update(_term_counts(own, context))
        erased_terms.update(w[:TERM_CHARS] for w in own)
    e.unindex(unindex)
    counts["full_text_index: entries removed"] += len(unindex)
    lessons = [r for r in rows if r.source_kind == "consolidated" and r.source_session_id]
    if not whole_scope:
        _strip_later_contexts(uow, tenant, scope, rows, erased_terms, decrements, counts)
        _strip_occasions(uow, rows, erased_terms, decrements, counts)
        for s in e.sessions(r.source_session_id for r in lessons):
            # The lesson is the session's outcome summary, unless the summary was updated since.
            if s.outcome_summary and any(claim_hash(s.outcome_summary) == r.content_hash for r in lessons):
                e.blank_summary(s.id)
                counts["sessions: outcome summaries blanked"] += 1
    counts["memories: blanked"] += e.blank_memories(numbers, now, e.max_seq() + 1)
    counts["memory_vectors: deleted"] += e.delete_vectors(numbers)
    counts["source_events: blanked"] += e.blank_memory_events(numbers)
    counts["feedback_rows: texts blanked"] += e.blank_target_ledger("memory", [memory_id(n) for n in numbers])
    counts["session_memory_links: blanked"] += e.blank_memory_links(numbers)
    if whole_scope:
        return erased_terms
    counts["scope_terms: pruned"] += e.decrement_terms(tenant, scope, dict(decrements))
    return erased_terms - e.present_terms(tenant, scope, erased_terms)


def _strip_later_contexts(
    uow: UnitOfWork,
    tenant: str,
    scope: str,
    rows: list[Any],
    erased_terms: set[str],
    decrements: Counter[str],
    counts: Counter[str],
) -> None:
    """Memories stored after an erased one in its session were indexed with its terms as their
    session context (relevance.LexicalScorer): those terms leave the context (a term that also came
    from another claim goes too: erasure errs on the side of removing)."""
    e = uow.erasure
    key = scope_key(tenant, scope)
    erased = {r.number for r in rows}
    holders: dict[int, Any] = {}
    for r in rows:
        if r.source_session_id:
            for h in e.context_holders(tenant, scope, r.source_session_id, r.number):
                if h.number not in erased:
                    holders[h.number] = h
    old_entries, new_entries = [], []
    for h in holders.values():
        own = h.own_terms.split() if h.own_terms else []
        context = h.context_terms.split()
        kept = [w for w in context if w[:TERM_CHARS] not in erased_terms]
        if len(kept) == len(context):
            continue
        old_entries.append({"n": h.number, "w": index_text(key, own, context)})
        new_entries.append({"n": h.number, "w": index_text(key, own, kept)})
        decrements.update(_context_counts(context) - _context_counts(kept))
        e.set_context(h.number, " ".join(kept) or None)
    e.unindex(old_entries)
    e.reindex(new_entries)
    counts["memories: session contexts stripped"] += len(new_entries)


def _strip_occasions(
    uow: UnitOfWork, rows: list[Any], erased_terms: set[str], decrements: Counter[str], counts: Counter[str]
) -> None:
    """An erased memory's terms were added to its occasion's (storage.occasions): they leave it
    (a term that also came from another claim of the occasion goes too, as for session contexts)."""
    e = uow.erasure
    for o in e.occasions(r.occasion for r in rows if r.occasion is not None):
        words = o.terms.split()
        kept = [w for w in words if w[:TERM_CHARS] not in erased_terms]
        if len(kept) != len(words):
            e.set_occasion_terms(o.number, " ".join(kept))
            decrements[TOTAL_OCCASION_WORDS_TERM] += len(words) - len(kept)
            counts["occasions: terms stripped"] += 1


def _term_counts(own: list[str], context: list[str]) -> Counter[str]:
    """What one memory adds to its scope's term statistics (as storage.memories counts it)."""
    c = _context_counts(context)
    c[TOTAL_DOCS_TERM] += 1
    c[TOTAL_WORDS_TERM] += len(own)
    c.update({w[:TERM_CHARS]: 1 for w in set(own)})
    return c


def _context_counts(context: list[str]) -> Counter[str]:
    c: Counter[str] = Counter({TOTAL_CONTEXT_WORDS_TERM: len(context)})
    c.update({context_term(w)[:TERM_CHARS]: 1 for w in set(context)})
    return c


def _strip_cues(uow: UnitOfWork, cues: list[Any], vanished: set[str], counts: Counter[str]) -> None:
    """Cues keep the words they share with the scope's remaining memories, not the erased ones'."""
    if not vanished:
        return
    for cue in cues:
        words = cue.terms.split()
        kept = [w for w in words if w not in vanished]
        if len(kept) != len(words):
            uow.erasure.set_cue_terms(cue.number, " ".join(kept))
            counts["cues: terms stripped"] += 1
