"""Knowledge gaps (behaviour §10.7): `missing` reports open them; a claim that answers them closes them."""

from __future__ import annotations

from datetime import datetime

from slowave.domain.relevance import Cue, admits, text_relevance
from slowave.storage.unit_of_work import UnitOfWork


def record_missing(uow: UnitOfWork, tenant: str, scope: str, missing: list[str], now: datetime) -> None:
    for text in missing:
        uow.gaps.record(tenant, scope, text, now)


def close_answered_gaps(uow: UnitOfWork, tenant: str, scope: str, *contents: str) -> None:
    """Closes every open gap of the scope that one of the new claims, taken as a cue, admits."""
    gaps = uow.gaps.open_in_scope(tenant, scope)
    if not gaps:
        return
    cues = [Cue(c) for c in contents]
    answered = [g.id for g in gaps if any(admits(cue, text_relevance(cue, g.text), g.text) for cue in cues)]
    uow.gaps.close(answered)
