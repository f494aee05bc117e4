"""Identifiers this service mints (behaviour §3.3). Clients treat them as opaque strings."""

from __future__ import annotations

import re
import secrets

CONTINUITY_PATTERN = re.compile(r"^cont_[A-Za-z0-9_-]{32,96}$")
CANONICAL_MEMORY_ID = re.compile(r"^sch_[1-9][0-9]*$")
_SHORT_HEX = 6  # bytes -> 12 hex characters


def new_session_id() -> str:
    return "sess_" + secrets.token_hex(_SHORT_HEX)


def new_activation_id() -> str:
    return "ctx_" + secrets.token_hex(_SHORT_HEX)


def new_recall_id() -> str:
    return "rec_" + secrets.token_hex(_SHORT_HEX)


def new_cursor_id() -> str:
    return "cur_" + secrets.token_urlsafe(24)  # 24 bytes -> 32 URL-safe characters


def new_continuity_id() -> str:
    return "cont_" + secrets.token_urlsafe(32)  # 43 characters


def new_feedback_event_id() -> str:
    return "fbe_" + secrets.token_hex(16)


def memory_id(number: int) -> str:
    return f"sch_{number}"


def memory_number(memory_id_: str) -> int | None:
    """The number of a canonical `sch_N` id; None for anything else (which then does not resolve)."""
    if CANONICAL_MEMORY_ID.match(memory_id_):
        return int(memory_id_[4:])
    return None


def procedure_id(session_id: str) -> str:
    return f"proc_{session_id}"


def event_id(number: int) -> str:
    return f"evt_{number}"


def episode_id(number: int) -> str:
    return f"ep_{number}"
