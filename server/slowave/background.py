"""Background work of a server process: one daemon thread per task, run periodically.

The reaper, the consolidator, the gauge refresher, the WAL checkpointer and the full-text index
merger each do one piece of work every few seconds, off the request path. `Periodic` is the thread
they share: it runs the work at once or after the first interval, then every interval, and early
when notified (no sooner than `settle` after the previous run); a failure is reported to the task's
handler and never ends the loop; `stop` ends it between two runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)


class Periodic:
    def __init__(
        self,
        name: str,
        interval: float,
        work: Callable[[], object],
        *,
        at_start: bool = False,
        on_error: Callable[[Exception], None] | None = None,
        settle: float = 0.0,
    ) -> None:
        """`at_start`: the first run is at once rather than after one interval. `on_error`: what a
        failed run reports (default: logged with its traceback). `settle`: a notification waits
        until this long (at most one interval) after the end of the previous run, so notifications
        that come faster are served together by one run; one after a quiet spell runs at once."""
        self.interval = interval
        self.settle = min(settle, interval)
        self._work = work
        self._at_start = at_start
        self._on_error = on_error or (lambda exc: log.error("%s failed", name, exc_info=exc))
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> Periodic:
        self._thread.start()
        return self

    def notify(self) -> None:
        """Runs the work now instead of at the end of the current interval."""
        self._wake.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, timeout: float = 10) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(timeout=timeout)

    def _run(self) -> None:
        if not self._at_start:
            self._pause()
        while not self._stop.is_set():
            try:
                self._work()
            except Exception as exc:
                self._on_error(exc)
            self._pause()

    def _pause(self) -> None:
        if self.settle > 0 and self._stop.wait(self.settle):
            return
        self._wake.wait(self.interval - self.settle)
        self._wake.clear()
