"""Keeps SQLite's full-text index in one segment, off the request path (storage.full_text).

Every write transaction adds a segment to the FTS5 index, and a lookup reads every segment that
holds its term. When the server starts, and then every `interval` seconds, if the index has more
than MAX_SEGMENTS segments, the merger folds them into one, MERGE_PAGES pages per write
transaction, for at most ROUND_SECONDS a round (writes arriving meanwhile add segments to merge). Each step takes the store's
writer lock like any writer (≈ 3 ms at 100k memories, at most ≈ 9), so requests wait for one step
at most, never for the whole merge (≈ 0.25 s of steps at 100k). It rewrites the whole index each
time, so it runs at most once per interval: at 100k memories ≈ 1 % of a core at the default 30 s.
One process per store runs it (the one that runs the background work).
"""

from __future__ import annotations

import logging
import time

from slowave.background import Periodic
from slowave.storage.database import Database

log = logging.getLogger(__name__)

MAX_SEGMENTS = 4
"""More segments than this and the index is merged (FTS5's own merging keeps up to ~3 per level)."""
MERGE_PAGES = 16
ROUND_SECONDS = 10.0


class IndexMerger:
    def __init__(self, db: Database, interval: float = 30.0) -> None:
        self.db = db
        self.interval = interval
        self.merges = 0
        """Merges done (for tests and diagnosis)."""
        # At once, then every interval: a server restarted on a store written by another process
        # (or an import) may find many segments. A store gone or replaced, a busy lock: the next
        # round tries again.
        self._loop = Periodic(
            "slowave-index-merge",
            interval,
            self.merge,
            at_start=True,
            on_error=lambda exc: log.warning("full-text index merge skipped: %s", exc),
        )

    def start(self) -> IndexMerger:
        self._loop.start()
        return self

    def stop(self) -> None:
        self._loop.stop()

    def merge(self, max_segments: int = MAX_SEGMENTS) -> int:
        """Merges the index into one segment when it has more than `max_segments`; returns the
        number of steps taken (0: nothing to do)."""
        with self.db.transaction(read_only=True) as view:
            if view.full_text.segments() <= max_segments:
                return 0
        started, steps, more = time.monotonic(), 0, True
        while more and not self._loop.stopping and time.monotonic() - started < ROUND_SECONDS:
            with self.db.transaction() as uow:
                more = uow.full_text.merge_step(MERGE_PAGES)
            steps += 1
        self.merges += 1
        log.debug("full-text index merged in %d steps, %.2f s", steps, time.monotonic() - started)
        return steps
