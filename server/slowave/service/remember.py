"""Remember: store durable, standalone claims in the session's scope (behaviour §6)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime

from slowave.domain.claim_identity import claim_hash
from slowave.domain.identifiers import event_id, memory_id
from slowave.domain.near_duplicates import Relation, Verdict, compare, shape, shape_record, shapes_of
from slowave.domain.relevance import SESSION_CONTEXT_CLAIMS, lexical_query, session_context
from slowave.domain.terms import terms
from slowave.service.commands import Claim, RememberCommand
from slowave.service.context import ServiceContext
from slowave.service.knowledge_gaps import close_answered_gaps
from slowave.service.messages import message
from slowave.service.retrieval import value_mentions
from slowave.service.sessions import open_session_in_scope
from slowave.storage.database import CallerGone
from slowave.storage.unit_of_work import UnitOfWork
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res

log = logging.getLogger(__name__)

# The flags compare a new claim with the scope's memories sharing its rarest terms, within the
# document budget retrieval uses for a cue (domain.relevance.lexical_query), at most this many.
FLAG_CANDIDATES = 64
# At most this many ids per flag: a longer list would only say the scope is full of near-copies.
FLAG_LIMIT = 8


def remember(ctx: ServiceContext, tenant: str, cmd: RememberCommand) -> list[pb.RememberResult | res.ItemError]:
    # Embedding happens before the transaction: model inference never holds the write lock.
    claims = [c for c in cmd.claims if isinstance(c, Claim)]
    vectors = ctx.semantic.embed([c.content for c in claims]) if ctx.semantic else []
    # Parsed here too, not under the write lock: each claim's shape is stored with it (and cached
    # for its flags).
    shapes = [shape_record(shape(c.content)) for c in claims]
    encoder_id = ctx.semantic.encoder.encoder_id if ctx.semantic else None
    now = ctx.clock.now()
    with ctx.db.transaction() as uow:
        # The session lock makes "state check plus store" atomic: no claim lands in an ended session.
        session, refusal = open_session_in_scope(uow, tenant, cmd.session_id, cmd.scope, now)
        if refusal is None:
            uow.memories.lock_claims_of_scope(tenant, session.scope)
            store = ClaimStore(uow, tenant, session.id, session.scope, now, encoder_id)
            if cmd.batch:
                stored = store.batch(claims, vectors, shapes)
            else:
                stored = store.claims(claims, vectors, shapes)  # the scalar form is all-or-nothing
            results = iter(stored)
            out: list[pb.RememberResult | res.ItemError] = [
                c if isinstance(c, res.ItemError) else next(results) for c in cmd.claims
            ]
            uow.sessions.add_events(session.id, sum(isinstance(x, pb.RememberResult) for x in out))
            store.close_gaps(claims)
    if refusal is not None:
        raise refusal
    if store.created:
        _add_flags(ctx, tenant, session.scope, store.created)
    return out


def _add_flags(ctx: ServiceContext, tenant: str, scope: str, created: list[Created]) -> None:
    """Fills in the flags of the claims just created, read in a read-only unit of work after they
    were committed: comparing them with older memories is most of a Remember's work, and outside
    the write transaction it never holds the writer lock (other writers, and other server
    processes, go on meanwhile). It sees every memory older than the new ones, claims created
    earlier in the same batch included (a SQLite snapshot; PostgreSQL reads committed rows per
    statement); a memory retired in between is left out, as it is no longer active. The claims are
    stored whatever happens here: flags that cannot be read are left empty (and logged), never
    reported as a failure of the call."""
    try:
        with ctx.db.transaction(read_only=True) as view:
            found = flags(view, tenant, scope, [(c.number, c.content) for c in created])
    except (Exception, CallerGone):  # CallerGone: nobody waits for the result any more
        log.warning("remember: flags of %d stored claim(s) could not be read", len(created), exc_info=True)
        return
    for c, (similar, supersedes) in zip(created, found):
        c.result.similar.extend(similar)
        c.result.possibly_supersedes.extend(supersedes)


@dataclass(frozen=True)
class Created:
    """A claim created by this call: its result (flags still to add), number and text."""

    result: pb.RememberResult
    number: int
    content: str


class ClaimStore:
    """Stores claims of one session: MATCHED when an equivalent active claim exists (same scope and
    type, behaviour §6), else CREATED; one source event per claim. Works on a whole batch at once."""

    def __init__(
        self, uow: UnitOfWork, tenant: str, session_id: str, scope: str, now: datetime, encoder_id: str | None
    ) -> None:
        self.uow, self.tenant, self.session_id, self.scope, self.now = uow, tenant, session_id, scope, now
        self.encoder_id = encoder_id
        self.created: list[Created] = []
        """The claims created (not MATCHED) by the calls that succeeded, for their flags."""

    def batch(
        self, claims: list[Claim], vectors: list[bytes], shapes: list[str]
    ) -> list[pb.RememberResult | res.ItemError]:
        """Batch items are independent: if storing them together fails, each is retried alone, so
        an unexpected failure fails only its own item."""
        try:
            with self.uow.savepoint():
                return self.claims(claims, vectors, shapes)
        except Exception:
            log.warning("batch remember failed as a whole; storing items one by one", exc_info=True)
        self.created = []
        results: list = []
        for i, claim in enumerate(claims):
            try:
                with self.uow.savepoint():
                    results += self.claims([claim], vectors[i : i + 1], shapes[i : i + 1])
            except Exception:
                log.exception("remember batch item failed")
                results.append(
                    res.ItemError(
                        code="internal_error", message="the item could not be stored; retry it", retryable=True
                    )
                )
        return results

    def claims(self, claims: list[Claim], vectors: list[bytes], shapes: list[str]) -> list[pb.RememberResult]:
        hashes = [claim_hash(c.content) for c in claims]
        known = self.uow.memories.find_active_claims(
            self.tenant, self.scope, [(c.type, h) for c, h in zip(claims, hashes)]
        )
        numbers: list[int | None] = []
        new: dict[tuple[str, str], int] = {}  # first occurrence in this batch of each new claim
        for i, (claim, h) in enumerate(zip(claims, hashes)):
            key = (claim.type, h)
            numbers.append(known.get(key))
            if key not in known and key not in new:
                new[key] = i
        creating = sorted(new.values())
        # Session context: the claims of this session just before each one, earlier calls included.
        before = self.uow.events.recent_claims(self.session_id, SESSION_CONTEXT_CLAIMS) if creating else []
        contents = before + [c.content for c in claims]
        created = (
            self.uow.memories.insert_many(
                [
                    dict(
                        tenant=self.tenant,
                        scope=self.scope,
                        type=claims[i].type,
                        content=claims[i].content,
                        source_kind="explicit_remember",
                        source_session_id=self.session_id,
                        created_at=self.now,
                        occurred_at=claims[i].occurred_at,
                        context_terms=session_context(contents[: len(before) + i]),
                        claim_shape=shapes[i],
                    )
                    for i in creating
                ]
            )
            if creating
            else []
        )
        for i, number in zip(creating, created):
            numbers[i] = number
        for i, (claim, h) in enumerate(zip(claims, hashes)):
            if numbers[i] is None:  # a repeat of a claim created earlier in this batch
                numbers[i] = numbers[new[(claim.type, h)]]
        if self.encoder_id and created:
            self.uow.vectors.insert_many(
                [
                    dict(number=n, tenant=self.tenant, scope=self.scope, encoder_id=self.encoder_id, vector=vectors[i])
                    for i, n in zip(creating, created)
                ]
            )
        events = self.uow.events.insert_many(
            [
                dict(
                    tenant=self.tenant,
                    session_id=self.session_id,
                    kind="claim",
                    memory_number=n,
                    content=c.content,
                    occurred_at=c.occurred_at,
                    recorded_at=self.now,
                )
                for c, n in zip(claims, numbers)
            ]
        )
        fresh = set(creating)
        results = [
            message(
                pb.RememberResult,
                stored=True,
                memory_id=memory_id(n),
                disposition="created" if i in fresh else "matched",
                type=c.type,
                scope=self.scope,
                source_event_id=event_id(e),
            )
            for i, (c, n, e) in enumerate(zip(claims, numbers, events))
        ]
        # A MATCHED claim (or a repeat within the batch) is no news: no flags.
        self.created += [Created(results[i], numbers[i], claims[i].content) for i in creating]  # type: ignore[arg-type]
        return results

    def close_gaps(self, claims: list[Claim]) -> None:
        close_answered_gaps(self.uow, self.tenant, self.scope, *(c.content for c in claims))


def flags(
    uow: UnitOfWork, tenant: str, scope: str, created: list[tuple[int, str]]
) -> list[tuple[list[str], list[str]]]:
    """`similar` and `possibly_supersedes` of each just-created memory (number, content): the
    older active memories of the scope that the rule (domain.near_duplicates) relates to it.
    Read after the whole batch is committed, so claims created earlier in the same
    batch count; the term counts, the candidates and the values' counts are read once for the
    batch (three queries at most), as each claim alone would read them."""
    token_sets = [frozenset(terms(content)) for _, content in created]
    # Own words' counts only: the flags' candidates are read by memories' own words.
    wanted = sorted({t for ts in token_sets for t in ts})
    doc_counts = uow.search.term_statistics(tenant, scope, wanted) if created else {}
    queries = [lexical_query(ts, doc_counts, FLAG_CANDIDATES, context=False) for ts in token_sets]
    asked = [i for i, q in enumerate(queries) if q is not None]
    matches = uow.search.lexical_matches_each(
        tenant,
        scope,
        [(queries[i].terms, queries[i].require_all) for i in asked],  # type: ignore[union-attr]
        FLAG_CANDIDATES,
    )
    verdicts: list[list[tuple[int, Verdict]]] = [[] for _ in created]
    older_of = {}
    for i, rows in zip(asked, matches):
        number, _content = created[i]
        older = [row for row in rows if row.number < number and row.status == "active"]
        if older:
            older_of[i] = older
    # The older claims' shapes: cached, else their stored records, read at once for the batch.
    compared = {row.number: row.content for older in older_of.values() for row in older}
    shapes = dict(zip(compared, shapes_of(list(compared.items()), uow.memories.claim_shapes)))
    for i, older in older_of.items():
        new = shape(created[i][1])
        for row in older:
            verdict = compare(new, shapes[row.number])
            if verdict.relation is not Relation.NONE:
                verdicts[i].append((row.number, verdict))
    counts = value_mentions(uow, tenant, scope, {v for vs in verdicts for _, x in vs for v in x.values()})
    out = []
    for vs in verdicts:
        found: dict[Relation, list[int]] = {Relation.SIMILAR: [], Relation.SUPERSEDES: []}
        for n, verdict in vs:
            kind = verdict.resolve(counts.__getitem__)
            if kind is not Relation.NONE:
                found[kind].append(n)
        out.append(
            (
                [memory_id(n) for n in sorted(found[Relation.SIMILAR])[:FLAG_LIMIT]],
                [memory_id(n) for n in sorted(found[Relation.SUPERSEDES])[:FLAG_LIMIT]],
            )
        )
    return out
