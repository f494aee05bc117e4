"""The states of a session (behaviour §2.1): open until a Commit closes it or the idle reaper reaps it."""

from __future__ import annotations

from enum import StrEnum


class SessionState(StrEnum):
    """Stored as its value; a StrEnum compares equal to the stored string."""

    OPEN = "open"
    CLOSED = "closed"
    REAPED = "reaped"
