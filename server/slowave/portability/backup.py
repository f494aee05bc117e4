"""`slowave-admin backup PATH`: an online copy of a SQLite store, taken while the server writes.

PostgreSQL is backed up with its own tools (pg_dump for a logical copy, pg_basebackup with WAL
archiving for point-in-time recovery): they already do it consistently and online, and better
than a copy made through this service could."""

from __future__ import annotations

import os
from pathlib import Path

from slowave.storage import executor
from slowave.storage.database import Database


class BackupRefused(Exception):
    pass


POSTGRESQL_ADVICE = (
    "slowave-admin backup copies SQLite stores only; back up PostgreSQL with its own tools: "
    "`pg_dump --format=custom --file=slowave.dump DBNAME` (restore with pg_restore into an empty "
    "database), or pg_basebackup plus WAL archiving for point-in-time recovery (docs/operations.md)"
)


def backup(db: Database, destination: str) -> str:
    """Writes the copy next to `destination` and renames it into place once sound, so a failed or
    interrupted backup never leaves a file that looks like one; returns the integrity verdict."""
    if db.sqlite_path is None:
        raise BackupRefused(POSTGRESQL_ADVICE)
    dest = Path(destination)
    if dest.exists():
        raise BackupRefused(f"{dest} exists: a backup never overwrites a file")
    if os.path.realpath(dest) == os.path.realpath(db.sqlite_path):
        raise BackupRefused("the backup must not be the store itself")
    partial = dest.with_name(dest.name + ".partial")
    partial.unlink(missing_ok=True)
    try:
        verdict = executor.sqlite_backup(db.sqlite_path, str(partial))
        if verdict != "ok":
            raise BackupRefused(f"the copy failed its integrity check: {verdict}")
        os.replace(partial, dest)
    finally:
        partial.unlink(missing_ok=True)
    return verdict


def integrity(path: str) -> str:
    return executor.sqlite_integrity(path)
