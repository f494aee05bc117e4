"""Forming episodes from a session's source events (behaviour §11.5)."""

from __future__ import annotations

from datetime import datetime

from slowave.domain.episodes import pair_events
from slowave.storage.unit_of_work import UnitOfWork


def form_episodes(uow: UnitOfWork, tenant: str, session_id: str, event_numbers: list[int], now: datetime) -> int:
    # One statement for the session's episodes: one per event, a session that remembered 2,000
    # claims spent 275 ms of its Commit on PostgreSQL inserting them one at a time.
    uow.events.insert_episodes(
        [
            dict(
                tenant=tenant,
                session_id=session_id,
                event_number=current,
                previous_event_number=previous,
                created_at=now,
            )
            for current, previous in pair_events(event_numbers)
        ]
    )
    return len(event_numbers)
