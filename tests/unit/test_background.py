"""The background loop every periodic task of a server runs on (slowave.background.Periodic)."""

from __future__ import annotations

import threading
import time

from slowave.background import Periodic
from tests.support import wait_until


def test_it_runs_at_once_when_asked_then_when_notified_and_a_failure_never_ends_it() -> None:
    runs: list[int] = []
    errors: list[Exception] = []

    def work() -> None:
        runs.append(len(runs))
        if len(runs) == 1:
            raise RuntimeError("the first run fails")

    loop = Periodic("test-loop", 3600, work, at_start=True, on_error=errors.append).start()
    try:
        wait_until(lambda: len(runs) == 1, timeout=30, what="the run at start")
        assert [str(e) for e in errors] == ["the first run fails"]
        loop.notify()  # an hour's interval: only the notification runs it again
        wait_until(lambda: len(runs) == 2, timeout=30, what="the notified run")
        assert loop.alive
    finally:
        loop.stop()
    assert not loop.alive and len(runs) == 2


def test_without_at_start_the_first_run_waits_for_the_interval_and_stop_ends_the_wait() -> None:
    ran = threading.Event()
    loop = Periodic("test-loop", 3600, ran.set).start()
    loop.stop()
    assert not loop.alive and not ran.is_set()


def test_notifications_within_the_settle_time_of_a_run_are_served_together_by_one_later_run() -> None:
    settle = 1.0
    started: list[float] = []
    loop = Periodic("test-loop", 3600, lambda: started.append(time.monotonic()), at_start=True, settle=settle).start()
    try:
        wait_until(lambda: len(started) == 1, timeout=30, what="the run at start")
        for _ in range(10):
            loop.notify()
        wait_until(lambda: len(started) == 2, timeout=30, what="one run for the ten notifications")
        assert started[1] - started[0] >= settle
        # A notification once the settle time has passed is served too (an hour's interval: only it).
        wait_until(lambda: time.monotonic() > started[1] + settle, timeout=30, what="the settle time to pass")
        loop.notify()
        wait_until(lambda: len(started) == 3, timeout=30, what="the run of a later notification")
    finally:
        loop.stop()
    assert not loop.alive and len(started) == 3


def test_the_settle_time_never_exceeds_the_interval() -> None:
    assert Periodic("test-loop", 0.2, lambda: None, settle=0.5).settle == 0.2
