"""API keys and tenants (behaviour §3.1): key format, hashing, the `authorization` metadata, the key list.

A plaintext key exists in exactly three places: the client, the operator's configuration (when the
operator chooses plaintext over hashes) and the one line `slowave-admin keys mint` prints. Everything
here turns it into its hash as early as possible; no function returns, stores or formats a
plaintext key, and error messages name a line number, never the line.

Keys are 256 random bits, so an unsalted SHA-256 is enough: nobody can brute-force the preimage of a
random 256-bit value, and an unsalted hash is what lets the database find a key by an indexed
equality lookup instead of trying every stored salt.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass

HASH_SCHEME = "sha256"
KEY_PREFIX = "swk_"
"""Minted keys start with this, so secret scanners and people recognise them."""
MIN_PLAINTEXT_CHARS = 16
"""Shorter configured plaintext keys are refused: they would be guessable."""
DISPLAY_HEX_CHARS = 12
"""How much of a hash listings show: enough to tell keys apart and to revoke one."""

TENANT_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_HASH_PATTERN = re.compile(r"^sha256:([0-9a-fA-F]{64})$")
_BEARER = re.compile(r"^[Bb][Ee][Aa][Rr][Ee][Rr] +(\S+) *$")
_ENTRY_SEPARATORS = re.compile(r"[,;\n]")


class KeyConfigError(ValueError):
    """The key configuration is unusable. The message never quotes a key."""


@dataclass(frozen=True)
class KeyEntry:
    """One configured key: its hash (`sha256:<hex>`) and the tenant it authenticates as."""

    tenant: str
    key_hash: str


def hash_key(plaintext: str) -> str:
    return f"{HASH_SCHEME}:{hashlib.sha256(plaintext.encode('utf-8')).hexdigest()}"


def new_key() -> str:
    """A fresh key: the prefix and 32 random bytes, URL-safe (43 characters)."""
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hashes_equal(a: str, b: str) -> bool:
    """Constant-time: how long a comparison takes says nothing about how much of a hash matched."""
    return hmac.compare_digest(a.encode("ascii", "replace"), b.encode("ascii", "replace"))


def display_hash(key_hash: str) -> str:
    """`sha256:0123456789ab…`: what listings and logs show of a key."""
    scheme, _, hexdigest = key_hash.partition(":")
    return f"{scheme}:{hexdigest[:DISPLAY_HEX_CHARS]}…"


def is_valid_tenant(name: str) -> bool:
    return bool(TENANT_PATTERN.match(name))


def bearer_token(values: list[str]) -> str | None:
    """The key of the `authorization` metadata values of one call, or None when it is malformed.

    Exactly one value of the form `Bearer <key>` (scheme case-insensitive, RFC 7235); a repeated
    header is malformed rather than "first wins", so a proxy that appends one cannot change who
    the caller is.
    """
    if len(values) != 1:
        return None
    match = _BEARER.match(values[0])
    return match.group(1) if match else None


def credential_hash(credential: str, where: str) -> str:
    """A configured credential as a hash: `sha256:<64 hex>` is taken as given, anything else is a
    plaintext key and hashed here."""
    match = _HASH_PATTERN.match(credential)
    if match:
        return f"{HASH_SCHEME}:{match.group(1).lower()}"
    if credential.lower().startswith(f"{HASH_SCHEME}:"):
        # Almost certainly a truncated or mistyped hash: hashing it as a plaintext key would make
        # a key nobody holds, and the operator would never find out why clients are refused.
        raise KeyConfigError(f"{where}: a {HASH_SCHEME}: credential needs exactly 64 hex digits")
    if len(credential) < MIN_PLAINTEXT_CHARS:
        raise KeyConfigError(f"{where}: a plaintext key needs at least {MIN_PLAINTEXT_CHARS} characters")
    return hash_key(credential)


def parse_key_config(text: str, source: str) -> list[KeyEntry]:
    """Entries `<tenant> <credential>` (or `<tenant>=<credential>`), one per line or separated by
    `,` / `;`; `#` starts a comment. The credential is `sha256:<hex>` or a plaintext key.

    A key listed twice for the same tenant counts once; one key for two tenants is an error (a key
    maps to exactly one tenant).
    """
    entries: dict[str, KeyEntry] = {}
    for number, raw_line in enumerate(text.splitlines(), start=1):
        line = raw_line.split("#", 1)[0]
        for part in _ENTRY_SEPARATORS.split(line):
            part = part.strip()
            if not part:
                continue
            where = f"{source} line {number}"
            fields = part.split("=", 1) if "=" in part.split()[0] else part.split(None, 1)
            if len(fields) != 2 or not fields[0].strip() or not fields[1].strip() or len(fields[1].split()) != 1:
                raise KeyConfigError(f"{where}: expected '<tenant> <sha256:hex or key>'")
            tenant, credential = fields[0].strip(), fields[1].strip()
            if not is_valid_tenant(tenant):
                raise KeyConfigError(
                    f"{where}: tenant names are 1-64 characters of [A-Za-z0-9_.-], starting with a letter or digit"
                )
            entry = KeyEntry(tenant, credential_hash(credential, where))
            known = entries.get(entry.key_hash)
            if known is not None and known.tenant != tenant:
                raise KeyConfigError(
                    f"{where}: key {display_hash(entry.key_hash)} is already assigned to "
                    f"tenant {known.tenant!r}; a key maps to one tenant"
                )
            entries[entry.key_hash] = entry
    return list(entries.values())


def merge_key_configs(*lists: list[KeyEntry]) -> tuple[KeyEntry, ...]:
    """The file's and the environment's entries together, with the same one-tenant-per-key rule."""
    merged: dict[str, KeyEntry] = {}
    for entries in lists:
        for entry in entries:
            known = merged.get(entry.key_hash)
            if known is not None and known.tenant != entry.tenant:
                raise KeyConfigError(
                    f"key {display_hash(entry.key_hash)} is configured for tenants "
                    f"{known.tenant!r} and {entry.tenant!r}; a key maps to one tenant"
                )
            merged[entry.key_hash] = entry
    return tuple(merged.values())
