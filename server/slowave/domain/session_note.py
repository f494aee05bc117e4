"""The informational `session_note` of a commit (seed; behaviour §11.4)."""

from __future__ import annotations

SESSION_NOTE_MIN_EVENTS = 3


def session_note(session_events: int, recall_calls: int) -> str | None:
    """Present iff the session had several tool-use events but zero Recall calls."""
    if session_events >= SESSION_NOTE_MIN_EVENTS and recall_calls == 0:
        return (
            f"{session_events} tool-use events, 0 recall() calls this session; "
            "Recall is available for deliberate mid-task lookups."
        )
    return None
