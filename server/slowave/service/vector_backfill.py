"""Vectors for the memories that have none of the current encoder: stored while the semantic
channel was off, or under another encoder (a new embedding model). Without a vector a memory is
never a dense candidate, so the paraphrases that only the semantic channel finds would miss it.

`embed_missing` embeds them oldest first, a batch at a time, outside any transaction (the model
runs with no lock held), and stores each batch in one short write; `slowave-admin embed` runs it
in the foreground, and every server runs it once in the background when it starts (process 0 of
several), off the request path. Memories stored meanwhile get their vectors at Remember as usual;
a memory another writer embedded first is skipped, so the admin command and a server may run at
once.
"""

from __future__ import annotations

import logging
import threading
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


class VectorBackfill:
    """`embed_missing` once, on a background thread of the serving process."""

    def __init__(self, ctx: ServiceContext) -> None:
        self.ctx = ctx
        self.embedded = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slowave-vector-backfill", daemon=True)

    def start(self) -> None:
        if self.ctx.semantic is not None:
            self._thread.start()

    def _run(self) -> None:
        started = time.monotonic()
        try:
            self.embedded = embed_missing(self.ctx, stopping=self._stop.is_set)
        except Exception:  # the next start tries again; `slowave-admin embed` does it by hand
            log.exception("vector backfill failed")
            return
        if self.embedded:
            log.info(
                "vector backfill: embedded %d memories stored without a vector of %s in %.1f s",
                self.embedded,
                self.ctx.semantic.encoder.encoder_id,
                time.monotonic() - started,
            )

    def wait(self, timeout: float) -> bool:
        """True once the backfill has run (or was never started)."""
        if self._thread.is_alive() or self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=30)
