"""The server caps glibc's malloc arenas at process start (slowave.api.allocator)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from slowave.api import allocator

# Eight threads hold a malloc'ed block at once, then glibc's malloc_stats() prints one "Arena N:"
# line per arena to stderr.
_PROBE = textwrap.dedent(
    """
    import ctypes, ctypes.util, sys, threading
    from slowave.api import allocator
    capped = allocator.cap_arenas() if sys.argv[1] == "cap" else False
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.malloc.restype = ctypes.c_void_p
    barrier = threading.Barrier(8)
    def hold():
        block = libc.malloc(64 * 1024)
        barrier.wait()
        libc.free(ctypes.c_void_p(block))
    threads = [threading.Thread(target=hold) for _ in range(8)]
    for t in threads: t.start()
    for t in threads: t.join()
    print(capped)
    sys.stdout.flush()
    libc.malloc_stats()
    """
)


def _arenas(mode: str) -> tuple[bool, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, mode], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return run.stdout.strip() == "True", sum(line.startswith("Arena ") for line in run.stderr.splitlines())


glibc = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc only")


@glibc
def test_the_server_process_caps_the_malloc_arenas_its_threads_spread_over():
    capped, arenas = _arenas("cap")
    uncapped_flag, uncapped = _arenas("plain")
    if uncapped == 0:
        pytest.skip("the C library is not glibc (no malloc_stats arenas)")
    assert capped and not uncapped_flag
    assert uncapped > allocator.ARENAS  # without the cap each holding thread gets its own arena
    assert arenas <= allocator.ARENAS


def test_an_operators_malloc_arena_max_is_left_as_glibc_applied_it(monkeypatch):
    monkeypatch.setenv("MALLOC_ARENA_MAX", "4")
    assert allocator.cap_arenas() is False
