"""Which listen addresses only this machine can reach (the loopback-only rule of an open server)."""

from __future__ import annotations

import ipaddress


def listen_host(addr: str) -> str:
    """The host part of a gRPC listen address: `127.0.0.1:50051` → `127.0.0.1`, `[::1]:0` → `::1`,
    `:50051` → `` (every interface)."""
    if addr.startswith("["):
        host, sep, _rest = addr[1:].partition("]")
        return host if sep else addr
    if addr.count(":") > 1:  # a bare IPv6 address without a port
        return addr
    return addr.rpartition(":")[0] if ":" in addr else addr


def is_loopback_listen_address(addr: str) -> bool:
    """True only for addresses nothing off this machine can connect to.

    `localhost`, `127.0.0.0/8`, `::1` (and its IPv4-mapped form) and Unix sockets are loopback.
    Everything else is not: the wildcards `0.0.0.0`, `::` and the empty host listen on every
    interface, and any other host name is not trusted to resolve to loopback only.
    """
    addr = addr.strip()
    if addr.startswith(("unix:", "unix-abstract:")):
        return True
    host = listen_host(addr).strip().lower()
    if host == "localhost":
        return True
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback
