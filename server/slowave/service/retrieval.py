"""Retrieval shared by Activate and Recall: reading candidates, storing the frozen catalog,
serving pages and recording exposure (behaviour §5.4, 10.1). The rules — relevance, admission,
supersession, ranking, the catalog — are in domain.retrieval and domain.relevance.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

from slowave.config import RetrievalLimits
from slowave.dense_index import ANN_CONNECTIVITY, LOOSE_SHARE
from slowave.domain import catalog as cat
from slowave.domain.exposure import newly_exposed
from slowave.domain.identifiers import episode_id, event_id, memory_id, memory_number, new_cursor_id
from slowave.domain.learning import RETRIEVAL_POLICY_VERSION, cue_key_hash, precise, procedure_learned
from slowave.domain.learning import ProcedureEvidence as EvidenceCounters
from slowave.domain.near_duplicates import Id, Relation, Verdict, possible_conflicts, value_terms
from slowave.domain.procedure_capture import served_caveats
from slowave.domain.relevance import Cue, SemanticCalibration, admits, lexical_query, statistics_terms, text_relevance
from slowave.domain.retrieval import (
    Candidate,
    CandidateScoring,
    Catalog,
    CatalogMemory,
    CatalogProcedure,
    VersionCheck,
    newer_versions_first,
    top_memories,
    version_pairs,
)
from slowave.domain.scope import fragmentation_key
from slowave.domain.session_state import SessionState
from slowave.domain.structs import contexts_match
from slowave.domain.supersession import active_successor, stand_ins
from slowave.service.learned import learned_adjustments
from slowave.service.messages import message
from slowave.storage.memories import TERM_CHARS
from slowave.storage.unit_of_work import Row, UnitOfWork
from slowave.tracing import span
from slowave.v1 import resources_pb2 as res

if TYPE_CHECKING:
    from slowave.embedding import SemanticChannel

EVIDENCE_LIMIT = 8
EVIDENCE_CONTENT_CHARS = 1000


def _admitted_memories(
    uow: UnitOfWork,
    tenant: str,
    scope: str,
    cue: Cue,
    limits: RetrievalLimits,
    semantic: SemanticChannel | None,
    query_vector: Any,
) -> tuple[list[Candidate], dict[int, Row], VersionCheck]:
    """Candidates from the full-text index (always), the containment floor, and — when enabled —
    the semantic channel; scored and admitted by the domain's rules (domain.retrieval), the newer
    of two versions of one fact placed above the older."""
    doc_counts = uow.search.term_statistics(tenant, scope, statistics_terms(cue.token_set))
    query = lexical_query(cue.token_set, doc_counts, limits.lexical_doc_budget)
    rows: dict[int, Row] = {}
    if query is not None:
        # Any-of queries are within the document budget, so every match is scored; all-of
        # queries over common words take the newest matches.
        limit = limits.lexical_doc_budget if not query.require_all else limits.lexical_candidates
        for row in uow.search.lexical_matches(tenant, scope, query.terms, limit, query.require_all):
            rows[row.number] = row
    # The floor's query finds exactly the memories the cue contains, so no text is compared twice.
    contained = set()
    for row in uow.search.contained_matches(tenant, scope, cue.normalized_parts):
        rows[row.number] = row
        contained.add(row.number)
    cosines: dict[int, float] = {}
    if semantic is not None and query_vector is not None:
        cosines = semantic.index.similarities(uow, tenant, scope, query_vector, list(rows), limits.semantic_candidates)
        for row in uow.search.memory_views(tenant, scope, (n for n in cosines if n not in rows)):
            rows[row.number] = row
    calibration = SemanticCalibration(semantic.encoder.floor_cosine, semantic.encoder.full_cosine) if semantic else None
    scoring = CandidateScoring.for_cue(cue, doc_counts, rows.values(), calibration)
    admitted = scoring.admitted(rows, contained, cosines)
    occasion_of = {n: rows[n].occasion for n in admitted if rows[n].occasion is not None}
    if occasion_of:
        admitted = scoring.in_occasions(admitted, occasion_of, uow.occasions.profiles(occasion_of.values()))
    compared, possible = version_pairs(admitted, rows, uow.memories.claim_shapes)
    versions = superseding(uow, tenant, scope, possible)
    admitted = newer_versions_first(admitted, versions)
    check = VersionCheck(frozenset(compared), tuple(versions))

    def read(number: int) -> Row | None:
        return uow.memories.get(tenant, number)

    return stand_ins(admitted, rows, lambda row: active_successor(row, read)), rows, check


def cue_number(uow: UnitOfWork, tenant: str, cue: Cue) -> int:
    """The stored identity of the cue that learned evidence is kept under (behaviour §12.1)."""
    return uow.cues.number(tenant, cue_key_hash(cue.text), cue.token_set)


def known_cue_number(uow: UnitOfWork, tenant: str, cue: Cue) -> int | None:
    """The cue's identity if it has one yet; a cue never stored has no evidence of its own."""
    return uow.cues.find(tenant, cue_key_hash(cue.text))


def build_catalog(
    uow: UnitOfWork,
    tenant: str,
    scope: str,
    cue: Cue,
    cue_id: int | None,
    task_context: dict,
    limits: RetrievalLimits,
    semantic: SemanticChannel | None = None,
    query_vector: Any = None,
) -> Catalog:
    """Ranks the admitted candidates and freezes them (at most 50 memories, 9 procedures)."""
    with span("retrieval.candidates") as stage:
        candidates, rows, versions = _admitted_memories(uow, tenant, scope, cue, limits, semantic, query_vector)
        stage.set_attribute("candidates", len(candidates))
    with span("retrieval.learned"):
        learned_of = learned_adjustments(uow, (rows[c.number] for c in candidates), cue_id, cue.token_set)
    ranked = []
    for c, learned, score in top_memories(candidates, learned_of, limits.catalog_memories):
        row = rows[c.number]
        shown, _ = cat.render_content(row.content)
        ranked.append(
            CatalogMemory(
                n=c.number,
                type=row.type,
                relevance=c.relevance,
                learned=learned,
                score=score,
                size=len(shown.encode("utf-8")),
                chars=len(shown),
                pathway=c.pathway,
                redirected_from=memory_id(c.redirected_from) if c.redirected_from else None,
            )
        )
    with span("retrieval.procedures"):
        procedures = _ranked_procedures(uow, tenant, scope, cue, task_context)
    return Catalog.freeze(
        ranked,
        procedures,
        limits.catalog_memories,
        limits.catalog_procedures,
        memory_total=len(candidates),
        versions=versions,
    )


def _ranked_procedures(
    uow: UnitOfWork, tenant: str, scope: str, cue: Cue, task_context: dict
) -> list[CatalogProcedure]:
    ranked = []
    for row in uow.procedures.with_sessions(tenant, scope):
        if not contexts_match(row.context, task_context):
            continue
        relevance = text_relevance(cue, row.goal, row.session_task, " ".join([row.summary, *row.steps]))
        if not admits(cue, relevance, row.goal):
            continue
        learned = procedure_learned(_counters(row), row.outcome, (row.verification or {}).get("status"))
        texts = cat.procedure_texts(row.goal, row.summary, row.steps, served_caveats(row.caveats, row.outcome))
        ranked.append(
            CatalogProcedure(
                id=row.id,
                relevance=relevance,
                learned=learned,
                score=precise(relevance + learned),
                size=sum(len(x.encode("utf-8")) for x in texts),
                chars=sum(len(x) for x in texts),
                created=row.created_at.timestamp(),
            )
        )
    return ranked


def _counters(row: Row) -> EvidenceCounters:
    return EvidenceCounters(
        used=row.ev_used,
        not_used=row.ev_not_used,
        unassessable=row.ev_unassessable,
        helped=row.ev_helped,
        no_effect=row.ev_no_effect,
        harmed=row.ev_harmed,
        unknown=row.ev_unknown,
    )


def policy_version(semantic: SemanticChannel | None, limits: RetrievalLimits) -> str:
    # The encoder (model and how a text becomes a vector), how many dense candidates a retrieval
    # takes, the graph's links per vector (m) and which vectors it scans exactly beside the graph
    # change what it finds, so they name the policy.
    channels = (
        f"hybrid(fts5,{semantic.encoding}).dense{limits.semantic_candidates}(m{ANN_CONNECTIVITY})"
        f"+loose({LOOSE_SHARE:g})"
        if semantic is not None
        else "lexical(fts5)"
    )
    return f"{channels}.{RETRIEVAL_POLICY_VERSION}"


def new_retrieval(
    uow: UnitOfWork,
    retrieval_id: str,
    tenant: str,
    session_id: str,
    kind: str,
    scope: str,
    now: Any,
    page_size: int,
    policy: str,
    catalog: Catalog,
    cue_id: int,
) -> SimpleNamespace:
    """Stores a retrieval event with its frozen catalog; returns it as serve_page reads it."""
    values = dict(
        id=retrieval_id,
        tenant=tenant,
        session_id=session_id,
        kind=kind,
        scope=scope,
        created_at=now,
        page_size=page_size,
        policy_version=policy,
        cue_number=cue_id,
        relevant_total=catalog.relevant_total,
        catalog_truncated=catalog.truncated,
        catalog=catalog.to_json(),
    )
    uow.retrievals.insert(**values)
    return SimpleNamespace(**values, frozen=catalog)


@dataclass
class Page:
    """One page of a frozen catalog, as Activate and Recall return it."""

    retrieval_id: str
    retrieval_policy_version: str
    relevant_total: int
    catalog_truncated: bool
    memories: list[res.Memory]
    procedures: list[res.Procedure]
    more_available: bool
    continue_from: str | None
    accessible_field: res.AccessibleField | None
    warnings: list[res.RetrievalWarning] = field(default_factory=list)

    def response_fields(self) -> dict[str, Any]:
        """The fields of ActivateResponse and RecallResponse that the page fills; the warnings are
        left out, since each RPC puts warnings of its own before them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "warnings"}


@dataclass
class ServedPage:
    page: Page
    memory_numbers: list[int]


def serve_page(
    uow: UnitOfWork,
    tenant: str,
    retrieval: Any,
    memory_offset: int,
    procedure_offset: int,
    limits: RetrievalLimits,
    *,
    fresh: bool = False,
) -> ServedPage:
    """Serves the page at the given offsets of a frozen catalog and adds it to the exposure set.

    `fresh`: the retrieval was created in this transaction (nothing exposed, no cursor yet).
    """
    # A retrieval created in this transaction carries its catalog; a stored one is read back.
    catalog = retrieval.frozen if fresh else Catalog.from_json(retrieval.catalog)
    mems, procs = catalog.memories, catalog.procedures
    m_count = cat.page_count(
        [m.size for m in mems], memory_offset, retrieval.page_size, limits.memory_page_budget_bytes
    )
    p_count = cat.page_count(
        [p.size for p in procs], procedure_offset, limits.page_procedures, limits.procedure_page_budget_bytes
    )
    page_mems = mems[memory_offset : memory_offset + m_count]
    page_procs = procs[procedure_offset : procedure_offset + p_count]

    with span("retrieval.page"):
        memories = render_memories(uow, page_mems)
        procedures = render_procedures(uow, tenant, page_procs)
    targets = [("memory", m.memory_id) for m in memories] + [("procedure", p.procedure_id) for p in procedures]
    if fresh:
        uow.retrievals.insert_exposures(retrieval.id, targets, start=0)
    else:
        _expose(uow, retrieval.id, targets)

    next_m, next_p = memory_offset + m_count, procedure_offset + p_count
    more = next_m < len(mems) or next_p < len(procs)
    cursor = accessible = None
    if more:
        cursor = _cursor(uow, retrieval.id, next_m, next_p, fresh)
        rest = cat.remaining(
            [m.type for m in mems[next_m:]], [m.chars for m in mems[next_m:]], [p.chars for p in procs[next_p:]]
        )
        accessible = res.AccessibleField(
            extra_candidates=rest.extra_candidates, kinds=rest.kinds, approx_extra_tokens=rest.approx_extra_tokens
        )
    warnings = [
        res.RetrievalWarning(
            code="failed_procedure",
            message=f"procedure {p.procedure_id} was recorded from a failed session; verify each step",
        )
        for p in procedures
        if p.outcome == res.OUTCOME_FAILURE
    ]
    warnings += conflict_warnings(uow, tenant, retrieval.scope, memories, catalog.versions)
    page = Page(
        retrieval_id=retrieval.id,
        retrieval_policy_version=retrieval.policy_version,
        relevant_total=retrieval.relevant_total,
        catalog_truncated=retrieval.catalog_truncated,
        memories=memories,
        procedures=procedures,
        more_available=more,
        continue_from=cursor,
        accessible_field=accessible,
        warnings=warnings,
    )
    return ServedPage(page, [m.n for m in page_mems])


def conflict_warnings(
    uow: UnitOfWork, tenant: str, scope: str, memories: list[res.Memory], known: VersionCheck | None = None
) -> list[res.RetrievalWarning]:
    """`conflicting_memories` for each pair of the page that reads as two versions of one fact
    (domain.near_duplicates): the agent should check which holds and retire the other. Pairs are
    judged on their texts first; the scope's counts are read (one query) only for the values of the
    pairs whose topic check needs them. `known`: the version rule's comparisons while the catalog
    was ranked; when they cover the page (its first page, usually), they are the answer."""
    numbers = [memory_number(m.memory_id) for m in memories]
    if known is not None and known.covers(numbers):
        pairs = [(memory_id(older), memory_id(newer)) for older, newer in known.among(numbers)]
    else:
        # Numbers grow with every Remember, so they order memories by age.
        by_age = sorted(memories, key=lambda m: memory_number(m.memory_id) or 0)
        pairs = superseding(uow, tenant, scope, possible_conflicts([(m.memory_id, m.content) for m in by_age]))
    return [
        res.RetrievalWarning(
            code="conflicting_memories",
            message=f"{newer} may supersede {older}: the same fact with a different value; "
            "if the older one no longer holds, mark it stale (superseded)",
        )
        for older, newer in pairs
    ]


def superseding(
    uow: UnitOfWork, tenant: str, scope: str, possible: list[tuple[tuple[Id, Id], Verdict]]
) -> list[tuple[Id, Id]]:
    """The (older, newer) pairs of `possible` (domain.near_duplicates.possible_conflicts) that read
    as two versions of one fact once the topic check has the scope's counts of their values (read
    in one query, and only when some pair needs them)."""
    if not possible:
        return []
    counts = value_mentions(uow, tenant, scope, {v for _, verdict in possible for v in verdict.values()})
    return [pair for pair, verdict in possible if verdict.resolve(counts.__getitem__) is Relation.SUPERSEDES]


def value_mentions(uow: UnitOfWork, tenant: str, scope: str, values: Iterable[str]) -> dict[str, int]:
    """How many memories of the scope can mention each value: the document count of its rarest
    term (domain.near_duplicates tells a claim's topic by it); one query for all of them."""
    words_of = {v: value_terms(v) for v in values}
    wanted = sorted({w for words in words_of.values() for w in words})
    counts = uow.search.term_statistics(tenant, scope, wanted) if wanted else {}
    return {value: min((counts.get(w[:TERM_CHARS], 0) for w in words), default=0) for value, words in words_of.items()}


def _expose(uow: UnitOfWork, retrieval_id: str, targets: list[tuple[str, str]]) -> None:
    existing = uow.retrievals.exposures([retrieval_id])
    new = newly_exposed(((e.target_kind, e.target_id) for e in existing), targets)
    uow.retrievals.insert_exposures(retrieval_id, new, start=len(existing))


def _cursor(uow: UnitOfWork, retrieval_id: str, memory_offset: int, procedure_offset: int, fresh: bool) -> str:
    """Cursors are deterministic: one per catalog position, so a reread returns the same successor."""
    row = None if fresh else uow.retrievals.cursor_at(retrieval_id, memory_offset, procedure_offset)
    if row is not None:
        return row.id
    cursor_id = new_cursor_id()
    uow.retrievals.insert_cursor(
        id=cursor_id, retrieval_id=retrieval_id, memory_offset=memory_offset, procedure_offset=procedure_offset
    )
    return cursor_id


def render_memories(uow: UnitOfWork, items: list[CatalogMemory]) -> list[res.Memory]:
    # Served rows are read typed (timestamps as UTC datetimes), whatever retrieval read of them.
    rows = uow.memories.get_many(i.n for i in items)
    first_events = uow.events.first_of_memories([i.n for i in items])
    sessions = {}
    out = []
    for item in items:
        row = rows[item.n]
        shown, excerpt = cat.render_content(row.content)
        source: dict[str, Any] = {}
        if row.source_kind == "consolidated" and row.source_session_id:
            if row.source_session_id not in sessions:
                sessions[row.source_session_id] = uow.sessions.get_any(row.source_session_id)
            s = sessions[row.source_session_id]
            if s is not None:
                source = dict(
                    source_session_id=s.id,
                    source_goal=s.final_goal,
                    source_outcome=s.outcome,
                    source_verification_status=(s.verification or {}).get("status"),
                )
        prov = message(
            res.Provenance,
            source_kind=row.source_kind,
            source_event_id=event_id(first_events[row.number]) if row.number in first_events else None,
            redirected_from=item.redirected_from,
            excerpt=res.Excerpt(source_chars=excerpt[0], shown_chars=excerpt[1]) if excerpt else None,
            **source,
        )
        out.append(
            message(
                res.Memory,
                memory_id=memory_id(row.number),
                content=shown,
                type=row.type,
                pathway=item.pathway,
                ranking=_ranking(item),
                provenance=prov,
                created_at=row.created_at,
                occurred_at=row.occurred_at,
            )
        )
    return out


def render_procedures(uow: UnitOfWork, tenant: str, items: list[CatalogProcedure]) -> list[res.Procedure]:
    if not items:
        return []
    rows = {row.id: row for row in uow.procedures.with_sessions(tenant, ids=[i.id for i in items])}
    out = []
    for item in items:
        row = rows[item.id]
        verification = row.verification or {}
        contributions = [
            message(
                res.ProcedureContribution,
                effect=c.effect or "unknown",
                contribution=c.contribution or "",
                recorded_at=c.recorded_at,
                outcome=c.outcome if c.state != SessionState.OPEN and c.outcome else None,
            )
            for c in uow.procedures.contributions(row.id)
        ]
        out.append(
            message(
                res.Procedure,
                procedure_id=row.id,
                goal=row.goal,
                summary=row.summary,
                context=row.context,
                steps=list(row.steps),
                caveats=served_caveats(row.caveats, row.outcome),
                outcome=row.outcome,
                outcome_summary=row.outcome_summary or "",
                verification_status=verification.get("status", "unspecified"),
                created_at=row.created_at,
                evidence=res.ProcedureEvidence(**dataclasses.asdict(_counters(row))),
                contributions=contributions,
                ranking=_ranking(item),
            )
        )
    return out


def _ranking(item: CatalogMemory | CatalogProcedure) -> res.RankingSignals:
    return res.RankingSignals(relevance=item.relevance, learned=item.learned, score=item.score)


def cue_warnings(uow: UnitOfWork, tenant: str, scope: str, cue: Cue) -> list[res.RetrievalWarning]:
    """`known_gap` for each open knowledge gap of the scope that the cue admits (behaviour §10.7)."""
    warnings = []
    for gap in uow.gaps.open_in_scope(tenant, scope):
        if admits(cue, text_relevance(cue, gap.text), gap.text):
            warnings.append(
                res.RetrievalWarning(code="known_gap", message=f"known knowledge gap in this scope: {gap.text}")
            )
    return warnings


def fragmentation_warning(uow: UnitOfWork, tenant: str, scope: str) -> list[res.RetrievalWarning]:
    key = fragmentation_key(scope)
    return [
        res.RetrievalWarning(
            code="scope_fragmentation",
            message=f"scope {scope!r} is empty, but {other!r} holds memories; did you mean it?",
        )
        for other in sorted(uow.memories.scopes_with_active(tenant))
        if other != scope and fragmentation_key(other) == key
    ]


def evidence_records(uow: UnitOfWork, memory_numbers: list[int], full: bool) -> tuple[list[res.EvidenceRecord], bool]:
    """Source events and the episodes containing them, for the first page's memories (behaviour §7)."""
    events = uow.events.of_memories(memory_numbers)
    by_memory: dict[int, list[Row]] = {}
    for e in events:
        by_memory.setdefault(e.memory_number, []).append(e)
    episodes = uow.events.episodes_of_events([e.number for e in events])
    by_event: dict[int, list[Row]] = {}
    for ep in episodes:
        by_event.setdefault(ep.event_number, []).append(ep)
        if ep.previous_event_number is not None:
            by_event.setdefault(ep.previous_event_number, []).append(ep)
    all_events = uow.events.get_many(
        [ep.event_number for ep in episodes] + [ep.previous_event_number for ep in episodes]
    )
    records: list[res.EvidenceRecord] = []
    seen: set[str] = set()
    for n in memory_numbers:
        for e in by_memory.get(n, []):
            _add(records, seen, event_id(e.number), "event", e.recorded_at, e.occurred_at, e.content, full)
            for ep in by_event.get(e.number, []):
                text = "\n".join(
                    all_events[x].content for x in (ep.previous_event_number, ep.event_number) if x in all_events
                )
                _add(records, seen, episode_id(ep.number), "episode", ep.created_at, None, text, full)
    return records[:EVIDENCE_LIMIT], len(records) > EVIDENCE_LIMIT


def _add(records: list, seen: set, eid: str, kind: str, recorded_at, occurred_at, text: str, full: bool) -> None:
    if eid in seen:
        return
    seen.add(eid)
    content, truncated = None, False
    if full:
        content, truncated = text[:EVIDENCE_CONTENT_CHARS], len(text) > EVIDENCE_CONTENT_CHARS
    records.append(
        message(
            res.EvidenceRecord,
            evidence_id=eid,
            source_kind=kind,
            recorded_at=recorded_at,
            occurred_at=occurred_at,
            content=content,
            truncated=truncated,
        )
    )
