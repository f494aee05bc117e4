"""slowave.clock.DatabaseClock: PostgreSQL's clock, read at most once per refresh interval and
extended in between by the process's monotonic clock (behaviour §2.6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from slowave.clock import DatabaseClock

T0 = datetime(2026, 12, 5, 20, 0, tzinfo=UTC)


class FakeDatabase:
    """A database whose clock is `offset` ahead of the fake monotonic clock, and whose reading takes
    `round_trip` seconds of it."""

    def __init__(self, ticks: list[float], offset: timedelta, round_trip: float = 0.0) -> None:
        self.ticks, self.offset, self.round_trip, self.reads = ticks, offset, round_trip, 0

    def server_time(self) -> datetime:
        self.reads += 1
        self.ticks[0] += self.round_trip / 2
        reading = T0 + self.offset + timedelta(seconds=self.ticks[0])
        self.ticks[0] += self.round_trip / 2
        return reading


def clock_of(db: FakeDatabase, refresh: float = 1.0) -> DatabaseClock:
    return DatabaseClock(db, refresh=refresh, monotonic=lambda: db.ticks[0])


def test_the_database_is_read_at_most_once_per_refresh_interval():
    ticks = [100.0]
    db = FakeDatabase(ticks, timedelta(hours=3))
    clock = clock_of(db, refresh=1.0)
    for _ in range(50):
        clock.now()
        ticks[0] += 0.05
    assert db.reads == 3  # at 100.0, 101.0 and 102.0 (50 calls over 2.45 s)


def test_between_readings_the_database_time_advances_by_the_monotonic_clock():
    ticks = [5.0]
    db = FakeDatabase(ticks, timedelta(minutes=-7))  # the process's own wall clock plays no part
    clock = clock_of(db)
    first = clock.now()
    assert first == T0 - timedelta(minutes=7) + timedelta(seconds=5)
    ticks[0] += 0.25
    assert clock.now() - first == timedelta(seconds=0.25)
    assert db.reads == 1


def test_a_reading_stands_for_the_middle_of_its_round_trip():
    ticks = [0.0]
    db = FakeDatabase(ticks, timedelta(0), round_trip=0.010)
    clock = clock_of(db)
    # The database read its clock at 0.005; the call returned at 0.010, when the database's time is
    # T0 + 0.010 exactly.
    assert clock.now() == T0 + timedelta(seconds=0.010)


def test_time_never_goes_backwards_when_a_new_reading_is_earlier():
    ticks = [0.0]
    db = FakeDatabase(ticks, timedelta(0))
    clock = clock_of(db, refresh=1.0)
    clock.now()
    ticks[0] = 0.9
    handed_out = clock.now()
    assert handed_out == T0 + timedelta(seconds=0.9)
    db.offset = timedelta(milliseconds=-200)  # the next reading comes out 200 ms earlier
    ticks[0] = 1.0
    assert clock.now() == handed_out  # held, not T0 + 0.8 s
    assert db.reads == 2
    ticks[0] = 1.3
    assert clock.now() == T0 + timedelta(seconds=1.1)  # the new reading, once it passes the old
