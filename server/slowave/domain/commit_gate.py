"""The commit gate (seed; behaviour §11.1): no commit while an exposed target lacks an accepted row."""

from __future__ import annotations

from dataclasses import dataclass

from slowave.domain.errors import IncompleteFeedback, OutstandingRetrieval


@dataclass(frozen=True)
class ExposedTarget:
    kind: str  # "memory" | "procedure"
    target_id: str
    covered: bool


@dataclass(frozen=True)
class RetrievalExposure:
    retrieval_id: str
    targets: list[ExposedTarget]  # exposure order


def outstanding_feedback(retrievals: list[RetrievalExposure]) -> list[OutstandingRetrieval]:
    """One entry per blocking retrieval (creation order), unassessed ids in exposure order."""
    result = []
    for retrieval in retrievals:
        memories = [t.target_id for t in retrieval.targets if t.kind == "memory" and not t.covered]
        procedures = [t.target_id for t in retrieval.targets if t.kind == "procedure" and not t.covered]
        if memories or procedures:
            result.append(OutstandingRetrieval(retrieval.retrieval_id, memories, procedures))
    return result


def enforce_commit_gate(retrievals: list[RetrievalExposure]) -> None:
    """Raises IncompleteFeedback listing exactly what still needs feedback; the gate has no exception."""
    outstanding = outstanding_feedback(retrievals)
    if outstanding:
        raise IncompleteFeedback(outstanding)
