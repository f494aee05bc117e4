"""The background loop every periodic task of a server runs on (slowave.background.Periodic)."""

from __future__ import annotations

import threading

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
