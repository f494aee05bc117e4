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
    """The database server's clock (spec 2.6: with replicas, times come from one clock)."""

    def __init__(self, engine) -> None:
        self.engine = engine

    def now(self) -> datetime:
        from sqlalchemy import text
        from sqlalchemy.exc import DBAPIError

        from slowave.domain.errors import StorageUnavailable

        try:
            with self.engine.connect() as conn:
                return conn.execute(text("SELECT clock_timestamp()")).scalar_one().astimezone(UTC)
        except DBAPIError as exc:
            raise StorageUnavailable("the database is unavailable; retry shortly") from exc
