"""`slowave-admin keys …` and `slowave-admin tenants …`: API keys and tenants (behaviour §3.1).

A minted key is printed once and never again: the database keeps only its hash, and listings show
the first hex digits of hashes, enough to tell keys apart and to revoke one.
"""

from __future__ import annotations

import argparse
import sys

from slowave.domain.api_keys import display_hash
from slowave.service.context import ServiceContext
from slowave.service.tenants import TenancyError, list_keys, list_tenants, mint_key, revoke_key, set_tenant_disabled


def _fail(exc: TenancyError) -> None:
    print(f"error: {exc}", file=sys.stderr)
    raise SystemExit(1)


def cmd_keys_mint(ctx: ServiceContext, args: argparse.Namespace) -> None:
    try:
        key, key_hash = mint_key(ctx, args.tenant, args.label)
    except TenancyError as exc:
        _fail(exc)
    print(f"api_key: {key}")
    print(f"key_hash: {display_hash(key_hash)}")
    print(f"tenant: {args.tenant}")
    print(
        "The key is shown only now: the database keeps its hash. Clients send 'authorization: Bearer <api_key>'.",
        file=sys.stderr,
    )


def cmd_keys_revoke(ctx: ServiceContext, args: argparse.Namespace) -> None:
    try:
        key_hash = revoke_key(ctx, args.hash_prefix)
    except TenancyError as exc:
        _fail(exc)
    print(f"revoked: {display_hash(key_hash)}")


def cmd_keys_list(ctx: ServiceContext, args: argparse.Namespace) -> None:
    rows = list_keys(ctx, args.tenant)
    if not rows:
        print("no API keys")
    for k in rows:
        state = f"revoked {k.revoked_at.isoformat()}" if k.revoked_at else "active"
        print(
            f"key_hash: {display_hash(k.key_hash)}\ttenant: {k.tenant}\tsource: {k.source}\tstate: {state}\t"
            f"created_at: {k.created_at.isoformat()}\tlabel: {k.label or '-'}"
        )


def cmd_tenants_list(ctx: ServiceContext, _args: argparse.Namespace) -> None:
    rows = list_tenants(ctx)
    if not rows:
        print("no tenants")
    for t in rows:
        print(
            f"tenant: {t.name}\tstate: {'disabled' if t.disabled else 'enabled'}\tactive_keys: {t.active_keys}\t"
            f"updated_at: {t.updated_at.isoformat()}"
        )


def _set_disabled(disabled: bool):
    def run(ctx: ServiceContext, args: argparse.Namespace) -> None:
        try:
            set_tenant_disabled(ctx, args.tenant, disabled)
        except TenancyError as exc:
            _fail(exc)
        print(f"tenant: {args.tenant}\tstate: {'disabled' if disabled else 'enabled'}")

    return run


def register(sub: argparse._SubParsersAction) -> None:
    keys = sub.add_parser("keys", help="API keys: mint, revoke, list (hashes only)")
    ks = keys.add_subparsers(dest="keys_command", required=True)
    p = ks.add_parser("mint", help="create a key for a tenant and print it once")
    p.add_argument("tenant")
    p.add_argument("--label", help="a note for listings (who or what holds the key)")
    p.set_defaults(fn=cmd_keys_mint)
    p = ks.add_parser("revoke", help="revoke a key by the first hex digits of its hash (permanent)")
    p.add_argument("hash_prefix")
    p.set_defaults(fn=cmd_keys_revoke)
    p = ks.add_parser("list", help="keys with hash prefixes, tenants and states")
    p.add_argument("--tenant")
    p.set_defaults(fn=cmd_keys_list)
    tenants = sub.add_parser("tenants", help="tenants: list, disable, enable")
    ts = tenants.add_subparsers(dest="tenants_command", required=True)
    ts.add_parser("list", help="tenants with their state and number of active keys").set_defaults(fn=cmd_tenants_list)
    p = ts.add_parser("disable", help="refuse the tenant's keys (PERMISSION_DENIED) until enabled again")
    p.add_argument("tenant")
    p.set_defaults(fn=_set_disabled(True))
    p = ts.add_parser("enable", help="accept the tenant's keys again")
    p.add_argument("tenant")
    p.set_defaults(fn=_set_disabled(False))
