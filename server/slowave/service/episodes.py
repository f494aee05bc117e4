"""Forming episodes from a session's source events (behaviour §11.5)."""

from __future__ import annotations

from datetime import datetime

from slowave.domain.episodes import pair_events
from slowave.storage.unit_of_work import UnitOfWork


def form_episodes(uow: UnitOfWork, tenant: str, session_id: str, event_numbers: list[int], now: datetime) -> int:
    for current, previous in pair_events(event_numbers):
        uow.events.insert_episode(
            tenant=tenant, session_id=session_id, event_number=current, previous_event_number=previous, created_at=now
        )
    return len(event_numbers)
