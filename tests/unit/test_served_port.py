"""`api.supervisor.already_served`: the check that keeps a second server off a served port."""

from __future__ import annotations

import socket

from slowave.api.supervisor import already_served


def test_a_port_something_listens_on_is_served_and_a_free_one_is_not():
    with socket.socket() as listening:
        listening.bind(("127.0.0.1", 0))
        listening.listen()
        port = listening.getsockname()[1]
        assert already_served(f"127.0.0.1:{port}")
        assert already_served(f"0.0.0.0:{port}")  # a wildcard address is asked on loopback
    assert not already_served(f"127.0.0.1:{port}")  # closed: refused


def test_port_zero_is_never_served():
    assert not already_served("127.0.0.1:0")
