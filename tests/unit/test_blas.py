"""numpy's BLAS on one thread per server process (slowave.api.blas)."""

from __future__ import annotations

from slowave.api import blas


def test_one_thread_limits_every_blas_library_the_process_loaded(monkeypatch):
    for name in blas.ENV:
        monkeypatch.delenv(name, raising=False)
    assert blas.one_thread() is True
    assert blas.threads() and set(blas.threads()) == {1}


def test_an_operators_thread_count_wins(monkeypatch):
    monkeypatch.setenv("OPENBLAS_NUM_THREADS", "2")
    assert blas.one_thread() is False
