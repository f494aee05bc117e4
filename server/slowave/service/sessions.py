"""Resolving the session a request names, with the validation order of behaviour §4.5 stages 3–4."""

from __future__ import annotations

from datetime import datetime

from slowave.domain.errors import DomainError, ScopeMismatch, SessionEnded, SessionNotFound
from slowave.domain.session_state import SessionState
from slowave.storage.unit_of_work import Row, UnitOfWork


def open_session_in_scope(
    uow: UnitOfWork, tenant: str, session_id: str, scope: str, now: datetime, *, recall: bool = False
) -> tuple[Row, DomainError | None]:
    """The named open session, touched (behaviour §2.3). Unknown → SessionNotFound; ended → SessionEnded.

    A scope mismatch is returned, not raised, so the caller can commit the activity touch (and
    Recall's recall count) that even a refused request performs before raising it.
    """
    session = uow.sessions.get(tenant, session_id, lock=True)
    if session is None:
        raise SessionNotFound(f"session {session_id} not found")
    if session.state != SessionState.OPEN:
        raise SessionEnded(f"session {session_id} has ended ({session.state})")
    uow.sessions.touch(session.id, now, recall=recall)
    if session.scope != scope:
        return session, ScopeMismatch(f"scope {scope!r} differs from the session's scope {session.scope!r}")
    return session, None


def end_session(uow: UnitOfWork, session_id: str, **values: object) -> None:
    """Ends an open session (Commit's close, the reaper): its row takes `values` (state, ended_at…),
    and its retrievals' frozen catalogs are released, since an ended session serves no more pages
    (storage.retrievals.RELEASED_CATALOG); their headers and exposures stay for feedback."""
    uow.sessions.update(session_id, **values)
    uow.retrievals.release_catalogs(session_id)
