"""A throwaway PostgreSQL cluster for the test run, from the machine's PostgreSQL binaries.

Started in a temporary directory on a free loopback port, stopped (and deleted) at the end. The
server refuses to run as root, so as root it runs as the `postgres` system user.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path


def find_bindir() -> Path | None:
    """The directory holding initdb/pg_ctl/postgres, or None when PostgreSQL is not installed."""
    candidates = []
    if shutil.which("pg_config"):
        out = subprocess.run(["pg_config", "--bindir"], capture_output=True, text=True)
        candidates.append(out.stdout.strip())
    candidates += sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    for directory in candidates:
        if directory and all((Path(directory) / exe).exists() for exe in ("initdb", "pg_ctl", "postgres")):
            return Path(directory)
    return None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PostgresCluster:
    bindir: Path
    root: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="slowave-pg-")))
    port: int = field(default_factory=_free_port)
    user: str = "slowave"

    @property
    def datadir(self) -> Path:
        return self.root / "data"

    def _run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        cmd = [str(a) for a in args]
        if os.geteuid() == 0:  # initdb and postgres refuse to run as root
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=check)

    def start(self) -> PostgresCluster:
        if os.geteuid() == 0:
            shutil.chown(self.root, "postgres")
        self._run(
            self.bindir / "initdb", "-D", self.datadir, "-U", self.user, "--auth=trust", "-E", "UTF8", "--no-sync"
        )
        # Durability settings are for speed only: the cluster lives for one test run.
        self._run(
            self.bindir / "pg_ctl",
            "-D",
            self.datadir,
            "-l",
            self.root / "server.log",
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
            "start",
        )
        return self

    def stop(self, mode: str = "fast") -> None:
        self._run(self.bindir / "pg_ctl", "-D", self.datadir, "-m", mode, "-w", "stop", check=False)

    def restart_stopped(self) -> None:
        """Starts a cluster stopped by stop() again (outage tests)."""
        self._run(
            self.bindir / "pg_ctl",
            "-D",
            self.datadir,
            "-l",
            self.root / "server.log",
            "-w",
            "-t",
            "60",
            "-o",
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            f"-c synchronous_commit=off -c full_page_writes=off -c max_connections=300",
            "start",
        )

    def destroy(self) -> None:
        self.stop("immediate")
        shutil.rmtree(self.root, ignore_errors=True)

    def url(self, database: str = "postgres") -> str:
        return f"postgresql+psycopg://{self.user}@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database; returns its SQLAlchemy URL."""
        import psycopg

        name = f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(f"host=127.0.0.1 port={self.port} user={self.user} dbname=postgres", autocommit=True) as c:
            c.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def wait_ready(self, timeout: float = 60) -> None:
        deadline = time.monotonic() + timeout
        while self._run(self.bindir / "pg_isready", "-h", "127.0.0.1", "-p", str(self.port), check=False).returncode:
            if time.monotonic() > deadline:
                raise RuntimeError("PostgreSQL did not become ready")
            time.sleep(0.2)
