"""One server per port, also for two servers started in the same instant.

`supervisor.already_served` refuses a start while something accepts connections on the port. Two
servers started together both find it free, and with SO_REUSEPORT both would then bind it. So a
start first claims the port: an exclusive `flock` of a lock file named for it, held by the main
process (the supervisor, or the one serving process) until it exits — by the kernel, so a killed
server never leaves a stale claim behind.

Addresses on one port exclude each other as their bindings would: a wildcard address (`0.0.0.0`,
`::`, empty) takes the port's shared file exclusively, a specific address takes that file shared
and its own file exclusively. So `0.0.0.0:50051` excludes every other server on port 50051, while
`10.0.0.5:50051` and `10.0.0.6:50051` may both serve. Addresses are compared as written:
`localhost` and `127.0.0.1` are two names for one address, which only the probe then tells apart.

The files live in a directory of the user's own (`<tmp>/slowave-<uid>/`): SO_REUSEPORT only lets
sockets of one user share a port, and a server that cannot create the directory (a read-only
file system) starts without the claim, guarded by the connection probe alone.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import tempfile
from pathlib import Path

log = logging.getLogger(__name__)

_WILDCARDS = ("", "0.0.0.0", "::")


class PortTaken(RuntimeError):
    """Another server holds a claim on the port (the message names its pid when it wrote one)."""


class PortClaim:
    """The held claim: its files stay locked until `release()` or the process ends."""

    def __init__(self, fds: list[int]) -> None:
        self._fds = fds

    def release(self) -> None:
        for fd in self._fds:
            os.close(fd)  # closing the last descriptor of a file drops its flock
        self._fds = []


def claim_directory() -> Path:
    return Path(tempfile.gettempdir()) / f"slowave-{os.getuid()}"


def claim_port(host: str, port: int, directory: Path | None = None) -> PortClaim | None:
    """Claims `host:port` for this process; raises PortTaken if another server holds it. None for
    port 0 (each start gets a port of its own) or when no lock file can be made."""
    if port == 0:
        return None
    directory = directory or claim_directory()
    try:
        directory.mkdir(mode=0o700, exist_ok=True)
    except OSError as exc:
        log.warning("port %d not claimed (%s): only the connection probe guards it", port, exc)
        return None
    wildcard = host in _WILDCARDS
    wanted = [(directory / f"port-{port}.lock", fcntl.LOCK_EX if wildcard else fcntl.LOCK_SH, False)]
    if not wildcard:
        wanted.append((directory / f"port-{port}-{_file_safe(host)}.lock", fcntl.LOCK_EX, True))
    fds: list[int] = []
    try:
        for path, mode, own_file in wanted:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            fds.append(fd)
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
            except BlockingIOError:
                # An exclusive holder wrote its pid; a shared one did not (an older pid may be there).
                holder = _holder(fd) if mode == fcntl.LOCK_SH or own_file else ""
                raise PortTaken(
                    f"port {port} is claimed by another slowave server{f' (pid {holder})' if holder else ''}"
                ) from None
            if mode == fcntl.LOCK_EX:
                os.ftruncate(fd, 0)
                os.pwrite(fd, str(os.getpid()).encode(), 0)
    except PortTaken:
        for fd in fds:
            os.close(fd)
        raise
    except OSError as exc:
        for fd in fds:
            os.close(fd)
        log.warning("port %d not claimed (%s): only the connection probe guards it", port, exc)
        return None
    return PortClaim(fds)


def _holder(fd: int) -> str:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
    except OSError:
        return ""
    return text if text.isdecimal() else ""


def _file_safe(host: str) -> str:
    return re.sub(r"[^0-9A-Za-z.-]", "_", host)
