"""SQLite's one writer at a time, queued in the operating system instead of SQLite's busy handler.

Every unit of work on SQLite begins IMMEDIATE, so only one runs at a time. Left to SQLite, waiting
writers poll with sleeps of up to 100 ms in no order, and a wait becomes a multiple of the poll
interval rather than the length of the work ahead of it. So the threads of one process queue on a
lock of their own, and the processes that share the file (`SLOWAVE_PROCESSES`, an admin command)
queue on a blocking `flock` of a lock file beside it: the kernel wakes the next writer the moment the
lock is free, and releases it when its holder dies, even by SIGKILL.

`flock` itself cannot time out, and a request must give up after the pool timeout (UNAVAILABLE,
retryable). So a contended acquisition blocks in a waiter thread; the request waits on a condition
with its timeout, and an acquisition nobody is waiting for any more is released at once.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
import weakref


class WriterLock:
    """Re-entrant within a thread; exclusive across the threads and processes of one store."""

    def __init__(self, lock_path: str) -> None:
        self.path = lock_path
        self._threads = threading.RLock()
        self._depth = 0  # holds by the owning thread; the file lock is taken at the first
        self._file = _FileLock(lock_path)

    def acquire(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        if not self._threads.acquire(timeout=timeout):
            return False
        if self._depth == 0 and not self._file.acquire(deadline - time.monotonic()):
            self._threads.release()
            return False
        self._depth += 1
        return True

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            self._file.release()
        self._threads.release()


class _FileLock:
    """An exclusive `flock` with a timeout. Callers are serialised by WriterLock's thread lock, so
    at most one of this process's threads wants it at a time."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        self._cond = threading.Condition()
        self._wanted = False  # a caller is waiting for the waiter thread's acquisition
        self._handed_over = False  # the waiter thread acquired it for that caller
        self._waiter: threading.Thread | None = None
        weakref.finalize(self, os.close, self._fd)  # once unused (a server stopped in a test process)

    def acquire(self, timeout: float) -> bool:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except BlockingIOError:
            pass
        with self._cond:
            self._wanted = True
            if self._waiter is None:
                self._waiter = threading.Thread(target=self._wait_loop, name="slowave-writer-lock", daemon=True)
                self._waiter.start()
            self._cond.notify_all()
            got = self._cond.wait_for(lambda: self._handed_over, max(0.0, timeout))
            self._wanted = False
            self._handed_over = False
            return got

    def release(self) -> None:
        fcntl.flock(self._fd, fcntl.LOCK_UN)

    def _wait_loop(self) -> None:
        while True:
            with self._cond:
                # Not again before the caller has taken a hand-over (or given up).
                self._cond.wait_for(lambda: self._wanted and not self._handed_over)
            fcntl.flock(self._fd, fcntl.LOCK_EX)  # blocks until the holder releases or dies
            with self._cond:
                if self._wanted:
                    self._handed_over = True
                    self._cond.notify_all()
                    continue
            fcntl.flock(self._fd, fcntl.LOCK_UN)  # the caller gave up meanwhile
