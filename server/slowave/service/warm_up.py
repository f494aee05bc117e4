"""A starting server process reads the vectors of the most recently active scopes before their
first requests do.

Each process keeps every scope's vectors in memory (dense_index.VectorIndex) and reads them from
the store at the scope's first request: 110k vectors take ≈ 0.35 s on SQLite, which that request
waited for after every deploy or restarted process (bench/results/history.md, 2026-12-06). So
before a process starts serving, it reads the scopes whose sessions were active last, newest first,
up to `Settings.warm_scopes` scopes and WARM_VECTORS vectors in all, lets their saved dense
graphs load and ranks each one's latest task once (read only). Before, not beside: requests
arriving at once (a restarted process of a busy server gets connections as soon as it listens)
would wait for that read anyway, and slower, sharing the interpreter with it. Scopes nobody used
lately are read at their first request, as before.
"""

from __future__ import annotations

import logging
import time

from slowave.domain.relevance import Cue
from slowave.embedding import SemanticChannel
from slowave.service.context import ServiceContext
from slowave.service.retrieval import build_catalog

log = logging.getLogger(__name__)

WARM_VECTORS = 500_000
"""Vectors read ahead in all (≈ 256 MB at 128 dimensions): a bound for stores of many busy scopes."""
WARM_GRAPH_SECONDS = 10.0
"""How long the warm-up waits, in all, for the saved dense graphs of the scopes it read to load
(≈ 0.5 s at 100k rows). A scope without a saved graph is not waited for: its graph is built in the
background (≈ 25 s at 100k rows) while the exact scan answers, as at any scope's first request."""


def warm_recent_scopes(ctx: ServiceContext, semantic: SemanticChannel, scopes: int) -> tuple[int, int]:
    """Reads the vectors of up to `scopes` recently active scopes, waits for their saved graphs and
    ranks each one's latest task once; returns (scopes, vectors) read."""
    with ctx.db.transaction(read_only=True) as uow:
        recent = uow.sessions.recently_active_scopes(scopes)
    warmed: list[tuple[str, str, str]] = []
    vectors = 0
    for tenant, scope, task in recent:
        if vectors >= WARM_VECTORS:
            break
        with ctx.db.transaction(read_only=True) as uow:
            held = semantic.index.warm(uow, tenant, scope)
        if held:
            warmed.append((tenant, scope, task))
            vectors += held
    deadline = time.monotonic() + WARM_GRAPH_SECONDS
    for tenant, scope, _task in warmed:
        semantic.index.wait_for_saved_graph(tenant, scope, max(0.0, deadline - time.monotonic()))
    # The first retrieval of a process also prepares its statements, reads the full-text index's
    # pages and wakes the tokenizer (200 ms against 6 ms at 100k memories, vectors and graph ready):
    # each scope's latest task is ranked once, read only, and the catalog dropped.
    for tenant, scope, task in warmed:
        cue = Cue(task, "")
        query_vector = semantic.embed_query(cue.text)
        with ctx.db.transaction(read_only=True) as uow:
            build_catalog(uow, tenant, scope, cue, None, {}, ctx.settings.limits, semantic, query_vector)
    return len(warmed), vectors


def warm_up(ctx: ServiceContext, scopes: int) -> None:
    """`warm_recent_scopes`, logged; a failure is logged too and leaves the first requests to read
    what they need (a cache)."""
    if ctx.semantic is None or scopes <= 0:
        return
    started = time.monotonic()
    try:
        warmed, vectors = warm_recent_scopes(ctx, ctx.semantic, scopes)
    except Exception as exc:  # a cache: requests read what they need
        log.warning("warm-up skipped: %s", exc)
        return
    log.info("warm-up: the vectors of %d scopes (%d) read in %.2f s", warmed, vectors, time.monotonic() - started)
