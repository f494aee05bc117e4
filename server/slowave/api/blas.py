"""numpy's BLAS (OpenBLAS) on one thread per server process.

OpenBLAS hands a matrix-vector product of a few thousand rows to a pool of its own threads, which
then spin waiting for the next one. The dense index scores the 5,000 loose rows of a 100k scope
on every search (slowave.dense_index); through that pool, a server answering one caller at a time
kept a second core busy: 1.8 cores of server CPU against 0.9 (bench/perf.py, 2026-12-05). A
server's parallelism is its RPC threads and processes, and on one thread the products are still
faster than numpy's einsum (5,000 × 128: 0.044 against 0.092 ms). An operator's
OPENBLAS_NUM_THREADS or OMP_NUM_THREADS wins: OpenBLAS has read it already.
"""

from __future__ import annotations

import os

ENV = ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")


def one_thread() -> bool:
    """Limits the process's BLAS to one thread; False when the operator chose a thread count."""
    if any(name in os.environ for name in ENV):
        return False
    import numpy  # noqa: F401 - loads the BLAS library the limit applies to
    from threadpoolctl import threadpool_limits

    threadpool_limits(limits=1, user_api="blas")
    return True


def threads() -> list[int]:
    """The thread count of each BLAS library loaded in the process."""
    from threadpoolctl import threadpool_info

    return [info["num_threads"] for info in threadpool_info() if info.get("user_api") == "blas"]
