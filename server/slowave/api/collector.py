"""Python's cyclic garbage collector, kept off the tail of request latency.

A full collection walks every object the collector tracks, and a serving process tracks a lot:
the modules, classes and functions of grpcio, SQLAlchemy, numpy and the service (≈ 90k objects
here), plus what its caches hold. At 100k memories a full collection took 58–113 ms, four times in
20 s of Activate/Feedback/Commit cycles, each one stalling whichever requests were running: the
p99 of a 10 ms Activate. Walking one object costs ≈ 60–700 ns on this machine, more for objects
allocated far apart, so the cost follows how many there are, not what is garbage.

`settle` runs once, when a process has loaded everything it needs and before it serves: it
collects what start-up left behind, then freezes every object alive (`gc.freeze`). Frozen objects
are never walked again. They are the process's code and its long-lived setup, which live as long
as the process anyway; an object created later is collected as usual. The caches keep their
entries out of the collector's sight by holding plain dicts of strings and numbers, which CPython
does not track (domain.relevance's term profiles).
"""

from __future__ import annotations

import gc


def settle() -> int:
    """Collects, then freezes what is alive; returns how many objects were frozen."""
    gc.collect()
    gc.freeze()
    return gc.get_freeze_count()
