"""SQL of tenants and API keys (hashes only), on the transaction of a Repository.

Kept apart from the repository module: authentication reads these two tables and nothing else,
and nothing else reads them.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Row, exists, func, select, update

from slowave.storage import tables as t
from slowave.storage.repository import Repository

_k, _t = t.api_keys, t.tenants
_KEY_WITH_TENANT = select(
    _k.c.key_hash, _k.c.tenant, _k.c.source, _k.c.revoked_at, func.coalesce(_t.c.disabled, False).label("disabled")
).select_from(_k.outerjoin(_t, _t.c.name == _k.c.tenant))


class TenancyStore:
    def __init__(self, repo: Repository) -> None:
        self.conn = repo.conn
        self.dialect = repo.dialect

    # ---------------------------------------------------------------- lookups (every replica, cached)

    def key(self, key_hash: str) -> Row | None:
        """The key row with its tenant's `disabled` flag (a tenant without a row is enabled)."""
        return self.conn.execute(_KEY_WITH_TENANT.where(_k.c.key_hash == key_hash)).first()

    def any_key(self) -> bool:
        """Whether any key was ever stored, revoked ones included."""
        return bool(self.conn.execute(select(exists().select_from(_k))).scalar())

    # ---------------------------------------------------------------- provisioning

    def insert_key_if_absent(
        self, key_hash: str, tenant: str, source: str, now: datetime, label: str | None = None
    ) -> None:
        self._insert_if_absent(
            _k, [_k.c.key_hash], key_hash=key_hash, tenant=tenant, source=source, label=label, created_at=now
        )

    def ensure_tenant(self, name: str, now: datetime) -> None:
        self._insert_if_absent(_t, [_t.c.name], name=name, disabled=False, created_at=now, updated_at=now)

    def _insert_if_absent(self, table, index, **values) -> None:
        # Replicas starting together provision the same rows: a conflict means another did it.
        if self.dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert as dialect_insert
        else:
            from sqlalchemy.dialects.sqlite import insert as dialect_insert
        self.conn.execute(dialect_insert(table).values(**values).on_conflict_do_nothing(index_elements=index))

    def revoke(self, key_hash: str, now: datetime) -> bool:
        result = self.conn.execute(
            update(_k).where(_k.c.key_hash == key_hash, _k.c.revoked_at.is_(None)).values(revoked_at=now)
        )
        return result.rowcount > 0

    def keys_with_hash_prefix(self, prefix: str) -> list[Row]:
        # LIKE metacharacters cannot occur: callers pass hex digits only.
        return list(self.conn.execute(select(_k).where(_k.c.key_hash.like(f"sha256:{prefix}%"))))

    def tenant(self, name: str) -> Row | None:
        return self.conn.execute(select(_t).where(_t.c.name == name)).first()

    def set_disabled(self, name: str, disabled: bool, now: datetime) -> None:
        self.conn.execute(update(_t).where(_t.c.name == name).values(disabled=disabled, updated_at=now))

    # ---------------------------------------------------------------- listings (admin)

    def list_keys(self, tenant: str | None = None) -> list[Row]:
        stmt = select(_k).order_by(_k.c.tenant, _k.c.created_at, _k.c.key_hash)
        if tenant:
            stmt = stmt.where(_k.c.tenant == tenant)
        return list(self.conn.execute(stmt))

    def list_tenants(self) -> list[Row]:
        active = (
            select(func.count())
            .select_from(_k)
            .where(_k.c.tenant == _t.c.name, _k.c.revoked_at.is_(None))
            .scalar_subquery()
        )
        return list(self.conn.execute(select(_t, active.label("active_keys")).order_by(_t.c.name)))
