"""Who is calling: API keys → tenants (behaviour §3.1), and the operator's key and tenant commands.

Keys come from two places. Configured keys (`SLOWAVE_API_KEYS_FILE`, `SLOWAVE_API_KEYS`) are
written to the database at start (hash and tenant only) but authenticate only on a replica whose
configuration still lists them, so removing a line and restarting takes a key away without one
replica's configuration overruling another's. Minted keys (`slowave-admin keys mint`) live in the
database alone. Revocation and disabling are database state, seen by every replica.

Once any key has been configured or stored, every call needs a key, even after all keys are
revoked: revoking the last key must lock the server, not open it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from slowave.domain.api_keys import (
    KeyEntry,
    bearer_token,
    display_hash,
    hash_key,
    hashes_equal,
    is_valid_tenant,
    new_key,
)
from slowave.domain.errors import PermissionDenied, Unauthenticated
from slowave.service.context import ServiceContext

log = logging.getLogger(__name__)
V = TypeVar("V")

CACHE_MAX_ENTRIES = 4096
"""Bounds the memory a flood of distinct unknown keys can take."""


class TtlCache(Generic[V]):
    """A small thread-safe cache whose entries live `ttl` seconds (0: nothing is cached).

    Unknown keys are cached too, so guessing keys costs the database one lookup per distinct guess
    and TTL rather than one per call; the size bound evicts the oldest entries first.
    """

    def __init__(
        self, ttl: float, max_entries: int = CACHE_MAX_ENTRIES, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.ttl, self.max_entries, self.clock = ttl, max_entries, clock
        self._entries: dict[str, tuple[float, V]] = {}
        self._lock = threading.Lock()

    def get(self, key: str, load: Callable[[], V]) -> V:
        if self.ttl <= 0:
            return load()
        now = self.clock()
        with self._lock:
            hit = self._entries.get(key)
            if hit is not None and hit[0] > now:
                return hit[1]
        value = load()  # outside the lock: one slow database lookup must not stall other callers
        with self._lock:
            self._entries.pop(key, None)
            while len(self._entries) >= self.max_entries:
                self._entries.pop(next(iter(self._entries)))
            self._entries[key] = (now + self.ttl, value)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()


@dataclass(frozen=True)
class KeyState:
    """What one key hash resolves to right now."""

    tenant: str | None  # None: unknown, revoked, or a configured key this replica no longer lists
    disabled: bool = False


class Authenticator:
    """Turns a call's `authorization` metadata into its tenant (behaviour §3.1, 4.5 stage 1)."""

    def __init__(self, ctx: ServiceContext, configured: tuple[KeyEntry, ...], cache_seconds: float) -> None:
        self.ctx = ctx
        self.configured = {e.key_hash: e.tenant for e in configured}
        self._keys: TtlCache[KeyState] = TtlCache(cache_seconds)
        self._required = bool(self.configured)
        self._required_checked_at: float | None = None
        self._cache_seconds = cache_seconds

    def required(self) -> bool:
        """Whether calls need a key. Monotonic: once true it stays true (keys are never deleted)."""
        if self._required:
            return True
        now = time.monotonic()
        if self._required_checked_at is None or now - self._required_checked_at >= self._cache_seconds:
            with self.ctx.db.transaction() as uow:
                self._required = uow.tenancy.any_key()
            self._required_checked_at = now
        return self._required

    def tenant(self, authorization: list[str]) -> str:
        """The caller's tenant; raises Unauthenticated / PermissionDenied (domain errors)."""
        if not self.required():
            return self.ctx.settings.tenant  # no keys: the single local tenant, metadata ignored
        if not authorization:
            raise Unauthenticated("missing API key: send metadata 'authorization: Bearer <api-key>'")
        token = bearer_token(authorization)
        if token is None:
            raise Unauthenticated("malformed authorization metadata: expected 'Bearer <api-key>'")
        key_hash = hash_key(token)
        state = self._keys.get(key_hash, lambda: self._load(key_hash))
        if state.tenant is None:
            raise Unauthenticated("unknown or revoked API key")
        if state.disabled:
            raise PermissionDenied(f"tenant {state.tenant!r} is disabled")
        return state.tenant

    def _load(self, key_hash: str) -> KeyState:
        with self.ctx.db.transaction() as uow:
            row = uow.tenancy.key(key_hash)
        if row is None or row.revoked_at is not None or not hashes_equal(row.key_hash, key_hash):
            return KeyState(None)
        if row.source == "config" and key_hash not in self.configured:
            return KeyState(None)
        return KeyState(row.tenant, bool(row.disabled))


# -------------------------------------------------------------------------------- provisioning


class TenancyError(Exception):
    """An operator request that cannot be carried out (the message says why)."""


def sync_configured_keys(ctx: ServiceContext, entries: tuple[KeyEntry, ...]) -> None:
    """Stores the configured keys' hashes and tenants; refuses a key already held by another tenant."""
    if not entries:
        return
    now = ctx.clock.now()
    with ctx.db.transaction() as uow:
        store = uow.tenancy
        for entry in entries:
            store.ensure_tenant(entry.tenant, now)
            store.insert_key_if_absent(entry.key_hash, entry.tenant, "config", now)
            row = store.key(entry.key_hash)
            assert row is not None
            if row.tenant != entry.tenant:
                raise TenancyError(
                    f"configured key {display_hash(entry.key_hash)} belongs to tenant "
                    f"{row.tenant!r} in the database, not {entry.tenant!r}"
                )
            if row.revoked_at is not None:
                log.warning(
                    "configured key %s (tenant %s) was revoked; it stays refused (revocation is permanent)",
                    display_hash(entry.key_hash),
                    entry.tenant,
                )
    log.info("API keys: %d configured for %d tenant(s)", len(entries), len({e.tenant for e in entries}))


def mint_key(ctx: ServiceContext, tenant: str, label: str | None = None) -> tuple[str, str]:
    """A new key for `tenant` (created if new): returns (plaintext, hash); only the hash is stored."""
    if not is_valid_tenant(tenant):
        raise TenancyError("tenant names are 1-64 characters of [A-Za-z0-9_.-], starting with a letter or digit")
    key = new_key()
    key_hash = hash_key(key)
    now = ctx.clock.now()
    with ctx.db.transaction() as uow:
        store = uow.tenancy
        store.ensure_tenant(tenant, now)
        store.insert_key_if_absent(key_hash, tenant, "admin", now, label=label)
    return key, key_hash


def revoke_key(ctx: ServiceContext, hash_prefix: str) -> str:
    """Revokes the one key whose hash starts with `hash_prefix` (hex, `sha256:` optional)."""
    prefix = hash_prefix.strip().lower().removeprefix("sha256:").rstrip("…")
    if len(prefix) < 8 or any(c not in "0123456789abcdef" for c in prefix):
        raise TenancyError("give at least 8 hex digits of the key's hash (as `keys list` shows it)")
    with ctx.db.transaction() as uow:
        store = uow.tenancy
        rows = store.keys_with_hash_prefix(prefix)
        if not rows:
            raise TenancyError(f"no key's hash starts with {prefix}")
        if len(rows) > 1:
            raise TenancyError(f"{len(rows)} keys' hashes start with {prefix}; give more digits")
        if not store.revoke(rows[0].key_hash, ctx.clock.now()):
            raise TenancyError(f"key {display_hash(rows[0].key_hash)} is already revoked")
        return rows[0].key_hash


def set_tenant_disabled(ctx: ServiceContext, tenant: str, disabled: bool) -> None:
    with ctx.db.transaction() as uow:
        store = uow.tenancy
        if store.tenant(tenant) is None:
            raise TenancyError(f"no tenant {tenant!r} (tenants are created with their first key)")
        store.set_disabled(tenant, disabled, ctx.clock.now())


def list_keys(ctx: ServiceContext, tenant: str | None = None) -> list:
    with ctx.db.transaction() as uow:
        return uow.tenancy.list_keys(tenant)


def list_tenants(ctx: ServiceContext) -> list:
    with ctx.db.transaction() as uow:
        return uow.tenancy.list_tenants()
