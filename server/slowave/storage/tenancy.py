"""Tenants and API keys (hashes only).

Kept apart from the other stores: authentication reads these two tables and nothing else, and
nothing else reads them.
"""

from __future__ import annotations

import functools
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, exists, func, select, update

from slowave.storage import tables as t
from slowave.storage.executor import Executor, upsert

_k, _t = t.api_keys, t.tenants
_KEY_WITH_TENANT = (
    select(
        _k.c.key_hash, _k.c.tenant, _k.c.source, _k.c.revoked_at, func.coalesce(_t.c.disabled, False).label("disabled")
    )
    .select_from(_k.outerjoin(_t, _t.c.name == _k.c.tenant))
    .where(_k.c.key_hash == bindparam("key_hash"))
)
_ANY_KEY = select(exists().select_from(_k))
# Replicas starting together provision the same rows: a conflict means another did it.
_INSERT_KEY = upsert(
    lambda insert: (
        insert(_k)
        .values(
            key_hash=bindparam("key_hash"),
            tenant=bindparam("tenant"),
            source=bindparam("source"),
            label=bindparam("label"),
            created_at=bindparam("now"),
        )
        .on_conflict_do_nothing(index_elements=[_k.c.key_hash])
    )
)
_ENSURE_TENANT = upsert(
    lambda insert: (
        insert(_t)
        .values(name=bindparam("name"), disabled=False, created_at=bindparam("now"), updated_at=bindparam("now"))
        .on_conflict_do_nothing(index_elements=[_t.c.name])
    )
)
_REVOKE = (
    update(_k).where(_k.c.key_hash == bindparam("key"), _k.c.revoked_at.is_(None)).values(revoked_at=bindparam("now"))
)
_WITH_HASH_PREFIX = select(_k).where(_k.c.key_hash.like(bindparam("pattern")))
_TENANT = select(_t).where(_t.c.name == bindparam("name"))
_SET_DISABLED = (
    update(_t).where(_t.c.name == bindparam("tenant")).values(disabled=bindparam("flag"), updated_at=bindparam("now"))
)
_active_keys = (
    select(func.count()).select_from(_k).where(_k.c.tenant == _t.c.name, _k.c.revoked_at.is_(None)).scalar_subquery()
)
_TENANTS = select(_t, _active_keys.label("active_keys")).order_by(_t.c.name)


@functools.cache
def _keys(of_tenant: bool):
    stmt = select(_k).order_by(_k.c.tenant, _k.c.created_at, _k.c.key_hash)
    return stmt.where(_k.c.tenant == bindparam("tenant")) if of_tenant else stmt


class TenancyStore:
    def __init__(self, ex: Executor) -> None:
        self.ex = ex

    # ---------------------------------------------------------------- lookups (every replica, cached)

    def key(self, key_hash: str) -> Any | None:
        """The key row with its tenant's `disabled` flag (a tenant without a row is enabled)."""
        return self.ex.first(_KEY_WITH_TENANT, {"key_hash": key_hash})

    def any_key(self) -> bool:
        """Whether any key was ever stored, revoked ones included."""
        return bool(self.ex.scalar(_ANY_KEY))

    # ---------------------------------------------------------------- provisioning

    def insert_key_if_absent(
        self, key_hash: str, tenant: str, source: str, now: datetime, label: str | None = None
    ) -> None:
        self.ex.run(_INSERT_KEY, {"key_hash": key_hash, "tenant": tenant, "source": source, "label": label, "now": now})

    def ensure_tenant(self, name: str, now: datetime) -> None:
        self.ex.run(_ENSURE_TENANT, {"name": name, "now": now})

    def revoke(self, key_hash: str, now: datetime) -> bool:
        return self.ex.run(_REVOKE, {"key": key_hash, "now": now}) > 0

    def keys_with_hash_prefix(self, prefix: str) -> list[Any]:
        # LIKE metacharacters cannot occur: callers pass hex digits only.
        return self.ex.rows(_WITH_HASH_PREFIX, {"pattern": f"sha256:{prefix}%"})

    def tenant(self, name: str) -> Any | None:
        return self.ex.first(_TENANT, {"name": name})

    def set_disabled(self, name: str, disabled: bool, now: datetime) -> None:
        self.ex.run(_SET_DISABLED, {"tenant": name, "flag": disabled, "now": now})

    # ---------------------------------------------------------------- listings (admin)

    def list_keys(self, tenant: str | None = None) -> list[Any]:
        return self.ex.rows(_keys(bool(tenant)), {"tenant": tenant})

    def list_tenants(self) -> list[Any]:
        return self.ex.rows(_TENANTS)
