"""The C allocator (glibc malloc), tuned for a server of many threads under one GIL.

glibc gives each new thread its own arena, up to eight per core, and keeps what each arena grew
to. A serving process has 16 RPC threads plus gRPC's and SQLite's, so the same working set was
spread over up to 16 arenas on this 2-core machine: `bench/perf.py` measured 246–270 MB of a
process's own memory (RssAnon) after its phases at 1k memories, and 190–195 MB with two arenas,
at the same throughput (the GIL already serialises the Python code that allocates most). The
cap is applied when a process starts, before its threads do; an operator's own
`MALLOC_ARENA_MAX` wins, because glibc has applied it already.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Callable

M_ARENA_MAX = -8  # mallopt's parameter number, from glibc's malloc.h
ARENAS = 2


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    try:
        return ctypes.CDLL(name) if name else None
    except OSError:
        return None


def cap_arenas(arenas: int = ARENAS) -> bool:
    """Caps glibc's malloc arenas for the threads created from now on; False when the operator set
    MALLOC_ARENA_MAX or the C library is not glibc (nothing to cap)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    libc = _libc()
    mallopt = getattr(libc, "mallopt", None) if libc is not None else None
    if mallopt is None or not hasattr(libc, "malloc_trim"):  # malloc_trim: glibc's, not musl's stub
        return False
    return bool(mallopt(M_ARENA_MAX, arenas))


def trimmer() -> Callable[[], None]:
    """Returns free heap memory to the system (glibc `malloc_trim`); a no-op elsewhere."""
    libc = _libc()
    trim = getattr(libc, "malloc_trim", None) if libc is not None else None
    return (lambda: trim(0)) if trim is not None else (lambda: None)
