"""The SQLite writer lock across threads and processes (storage.writer_lock)."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

from slowave.storage.writer_lock import WriterLock
from tests.support import wait_until

# A process that takes the lock, says so, and holds it until its standard input closes.
_HOLDER = """
import sys
from slowave.storage.writer_lock import WriterLock
lock = WriterLock(sys.argv[1])
assert lock.acquire(5)
print("held", flush=True)
sys.stdin.read()
lock.release()
print("released", flush=True)
"""


def _holder(path: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().strip() == "held"
    return proc


def test_another_process_holding_it_times_the_acquisition_out(tmp_path):
    path = str(tmp_path / "db-lock")
    holder = _holder(path)
    try:
        lock = WriterLock(path)
        started = time.monotonic()
        assert lock.acquire(0.3) is False
        assert time.monotonic() - started >= 0.25
    finally:
        holder.kill()
        holder.wait()


def test_a_waiting_writer_gets_it_as_soon_as_the_other_process_releases(tmp_path):
    path = str(tmp_path / "db-lock")
    holder = _holder(path)
    lock = WriterLock(path)
    got: list[bool] = []

    def write() -> None:
        got.append(lock.acquire(60))
        lock.release()

    waiter = threading.Thread(target=write)
    waiter.start()
    wait_until(lambda: not waiter.is_alive() or lock._file._wanted, timeout=30, what="the waiter to queue")
    assert not got, "acquired while another process held it"
    assert holder.stdin is not None
    holder.stdin.close()  # the holder releases
    waiter.join(timeout=60)
    assert got == [True]
    holder.wait(timeout=30)


def test_a_killed_holder_releases_it(tmp_path):
    """SIGKILL leaves no stale lock: the kernel drops a dead process's flock."""
    path = str(tmp_path / "db-lock")
    holder = _holder(path)
    lock = WriterLock(path)
    assert lock.acquire(0.1) is False
    holder.kill()
    holder.wait()
    assert lock.acquire(30) is True
    lock.release()


def test_given_up_acquisitions_do_not_keep_it(tmp_path):
    """An acquisition the waiter thread completes after its caller timed out is released at once,
    so the other process can take it again."""
    path = str(tmp_path / "db-lock")
    holder = _holder(path)
    lock = WriterLock(path)
    assert lock.acquire(0.1) is False
    assert holder.stdin is not None
    holder.stdin.close()
    holder.wait(timeout=30)
    second = _holder(path)  # would hang in its acquire(5) and fail if this process kept the lock
    second.kill()
    second.wait()
    assert lock.acquire(30) is True
    lock.release()


def test_reentrant_in_a_thread_exclusive_between_threads(tmp_path):
    lock = WriterLock(str(tmp_path / "db-lock"))
    assert lock.acquire(1)
    assert lock.acquire(1)  # the same thread again (a unit of work inside another)
    other: list[bool] = []
    t = threading.Thread(target=lambda: other.append(lock.acquire(0.2)))
    t.start()
    t.join()
    assert other == [False]
    lock.release()
    lock.release()
    t = threading.Thread(target=lambda: other.append(lock.acquire(5)) or lock.release())
    t.start()
    t.join()
    assert other == [False, True]
