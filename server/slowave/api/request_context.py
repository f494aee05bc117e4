"""Per-RPC facts that several interceptors share: who is calling and which request this is.

The authentication interceptor resolves the tenant; the servicer reads it to scope every use case;
the log line written after the call names it. Context variables are set inside the handler thread
(the wrapped behavior), so each RPC sees only its own values.
"""

from __future__ import annotations

from contextvars import ContextVar

tenant: ContextVar[str | None] = ContextVar("slowave_tenant", default=None)
"""The tenant the caller authenticated as (or the single local tenant when no keys are configured)."""

request_id: ContextVar[str | None] = ContextVar("slowave_request_id", default=None)
"""The caller's `x-request-id` metadata, or an id generated for this call."""

session_id: ContextVar[str | None] = ContextVar("slowave_session_id", default=None)
"""The session the call named or opened, when there is one (for the per-RPC log line)."""
