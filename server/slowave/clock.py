"""Time. Every timestamp the service stores or reports is UTC; tests inject their own clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class DatabaseClock:
    """The database server's clock (behaviour §2.6: with replicas, times come from one clock)."""

    def __init__(self, db) -> None:
        self.db = db

    def now(self) -> datetime:
        return self.db.server_time()
