"""Vectors for the memories that have none of the current encoder: stored while the semantic
channel was off, or under another encoder (a new embedding model). Without a vector a memory is
never a dense candidate, so the paraphrases that only the semantic channel finds would miss it.

`embed_missing` embeds them oldest first, a batch at a time, outside any transaction (the model
runs with no lock held), and stores each batch in one short write; `slowave-admin embed` runs it,
and a server runs it when it starts, before it serves (the supervisor of several processes once,
like the migrations). Not in the background: a process's vector cache follows each scope by its
newest vector number, so a vector stored later under an older number would stay out of a cache
already loaded until the process restarts. A memory another writer embedded first is skipped, so
the admin command and a server may run at once.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from slowave.service.context import ServiceContext

log = logging.getLogger(__name__)

BATCH = 256


def embed_missing(ctx: ServiceContext, batch: int = BATCH, stopping: Callable[[], bool] = lambda: False) -> int:
    """Embeds and stores every memory without a vector of ctx.semantic's encoder; returns how many."""
    channel = ctx.semantic
    if channel is None:
        return 0
    encoder_id = channel.encoder.encoder_id
    done = 0
    while not stopping():
        with ctx.db.transaction(read_only=True) as view:
            rows = view.vectors.memories_without_vector(encoder_id, batch)
        if not rows:
            break
        vectors = channel.embed([r.content for r in rows])
        with ctx.db.transaction() as uow:
            present = uow.vectors.with_vector(encoder_id, [r.number for r in rows])
            fresh = [
                dict(number=r.number, tenant=r.tenant, scope=r.scope, encoder_id=encoder_id, vector=v)
                for r, v in zip(rows, vectors)
                if r.number not in present
            ]
            if fresh:
                uow.vectors.insert_many(fresh)
        done += len(fresh)
    return done


def prune_other_encoders(ctx: ServiceContext, batch: int = 1000) -> int:
    """Deletes the vectors of every encoder but ctx.semantic's, a batch per short write; returns
    how many. After a model change the old model's vectors are never read again (a server reads
    only its own encoder's), yet they stay: 512 bytes and an index entry per memory. Not done at
    start, because a process of the old version may still be serving with them during a rolling
    upgrade; `slowave-admin embed --prune` does it once the operator says so, after embedding
    what lacks a vector of the current model."""
    encoder_id = ctx.semantic.encoder.encoder_id
    done = 0
    while True:
        with ctx.db.transaction() as uow:
            deleted = uow.vectors.delete_other_encoders(encoder_id, batch)
        done += deleted
        if deleted < batch:
            return done


def backfill(ctx: ServiceContext) -> int:
    """`embed_missing`, logged: run once per store before any process serves it."""
    started = time.monotonic()
    done = embed_missing(ctx)
    if done:
        log.info(
            "vector backfill: embedded %d memories stored without a vector of %s in %.1f s",
            done,
            ctx.semantic.encoder.encoder_id,
            time.monotonic() - started,
        )
    return done
