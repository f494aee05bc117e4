"""Time. Every timestamp the service stores or reports is UTC; tests inject their own clock."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


# How long the database clock's last reading is extended by the process's monotonic clock. Read at
# every call, it cost each Feedback, Commit and consolidation a pooled connection of its own (with
# SQLAlchemy's ping), a round trip and ≈ 0.35–0.5 ms of CPU: Feedback 1.73 → 2.22 ms, Commit 1.14 →
# 1.52, one consolidation 0.96 → 1.67 (in-process on PostgreSQL, bench/results/history.md,
# 2026-12-05 20:30). Over one second a monotonic clock drifts by microseconds.
DATABASE_CLOCK_REFRESH_SECONDS = 1.0


class DatabaseClock:
    """The database server's clock (behaviour §2.6: with replicas, times come from one clock).

    PostgreSQL's clock is read at most once per `refresh` seconds per process; in between, the
    process's monotonic clock measures the time elapsed since that reading. A reading is taken to
    be the database's time halfway through its round trip, so replicas agree to within half a
    round trip. Times never go backwards within a process: a new reading earlier than a time
    already handed out (by at most that error) is held at it."""

    def __init__(
        self,
        db,
        refresh: float = DATABASE_CLOCK_REFRESH_SECONDS,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.db = db
        self.refresh = refresh
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._anchor: tuple[float, datetime] | None = None  # (monotonic time, database time) of a reading
        self._last: datetime | None = None

    def now(self) -> datetime:
        at = self._monotonic()
        anchor = self._anchor
        if anchor is None or at - anchor[0] >= self.refresh:
            database_time = self.db.server_time()
            after = self._monotonic()
            anchor = ((at + after) / 2, database_time)
            at = after
            with self._lock:
                if self._anchor is None or anchor[0] > self._anchor[0]:
                    self._anchor = anchor
        value = anchor[1] + timedelta(seconds=at - anchor[0])
        with self._lock:
            if self._last is not None and value < self._last:
                value = self._last
            self._last = value
        return value
