"""The commit gate (behaviour §11.1; checklist 42, 43)."""

from __future__ import annotations

import pytest

from slowave.domain.commit_gate import ExposedTarget, RetrievalExposure, enforce_commit_gate, outstanding_feedback
from slowave.domain.errors import IncompleteFeedback, OutstandingRetrieval


def mt(i: str, covered: bool = False) -> ExposedTarget:
    return ExposedTarget("memory", i, covered)


def pt(i: str, covered: bool = False) -> ExposedTarget:
    return ExposedTarget("procedure", i, covered)


def test_passes_when_every_target_is_covered():
    enforce_commit_gate([RetrievalExposure("ctx_aaaaaaaaaaaa", [mt("sch_1", True), pt("proc_x", True)])])
    assert outstanding_feedback([RetrievalExposure("ctx_aaaaaaaaaaaa", [mt("sch_1", True)])]) == []


def test_passes_without_retrievals_or_exposures():
    assert outstanding_feedback([]) == outstanding_feedback(
        [RetrievalExposure("ctx_aaaaaaaaaaaa", []), RetrievalExposure("rec_bbbbbbbbbbbb", [])]
    )
    assert not outstanding_feedback([])
    enforce_commit_gate([])  # does not raise
    enforce_commit_gate([RetrievalExposure("ctx_aaaaaaaaaaaa", []), RetrievalExposure("rec_bbbbbbbbbbbb", [])])


def test_one_unassessed_memory_blocks_with_seed_message_and_retryable():
    with pytest.raises(IncompleteFeedback) as info:
        enforce_commit_gate([RetrievalExposure("ctx_aaaaaaaaaaaa", [mt("sch_1")])])
    err = info.value
    assert err.message == "feedback is incomplete"
    assert str(err) == "feedback is incomplete"
    assert err.retryable is True
    assert err.code == "incomplete_feedback"
    assert err.reason == "INCOMPLETE_FEEDBACK"
    assert err.outstanding == [OutstandingRetrieval("ctx_aaaaaaaaaaaa", ["sch_1"], [])]


def test_outstanding_lists_only_blocking_retrievals_in_creation_order_ids_in_exposure_order():
    retrievals = [
        RetrievalExposure(
            "ctx_aaaaaaaaaaaa", [mt("sch_5"), mt("sch_2", True), mt("sch_9"), pt("proc_b"), pt("proc_a")]
        ),
        RetrievalExposure("rec_000000000001", []),  # exposed nothing: never listed
        RetrievalExposure("rec_000000000002", [mt("sch_1", True), pt("proc_c", True)]),  # fully covered
        RetrievalExposure("rec_000000000003", [pt("proc_z")]),
        RetrievalExposure("rec_000000000004", [mt("sch_3"), mt("sch_1")]),
    ]
    out = outstanding_feedback(retrievals)
    assert out == [
        OutstandingRetrieval("ctx_aaaaaaaaaaaa", ["sch_5", "sch_9"], ["proc_b", "proc_a"]),
        OutstandingRetrieval("rec_000000000003", [], ["proc_z"]),
        OutstandingRetrieval("rec_000000000004", ["sch_3", "sch_1"], []),
    ]
    with pytest.raises(IncompleteFeedback) as info:
        enforce_commit_gate(retrievals)
    assert info.value.outstanding == out
    for o in info.value.outstanding:
        assert o.memory_ids or o.procedure_ids  # each blocking entry names at least one id


def test_same_memory_exposed_by_two_retrievals_needs_each():
    """Exposure is per event: a memory covered under one retrieval is still owed under the other."""
    out = outstanding_feedback(
        [
            RetrievalExposure("ctx_aaaaaaaaaaaa", [mt("sch_1", True)]),
            RetrievalExposure("rec_bbbbbbbbbbbb", [mt("sch_1", False)]),
        ]
    )
    assert out == [OutstandingRetrieval("rec_bbbbbbbbbbbb", ["sch_1"], [])]
