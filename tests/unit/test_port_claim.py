"""`api.port_claim`: one server per port, also for starts in the same instant."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from slowave.api.port_claim import PortTaken, claim_port


def test_a_claimed_port_is_refused_to_a_second_claim_and_free_again_once_released(tmp_path):
    first = claim_port("127.0.0.1", 50123, tmp_path)
    assert first is not None
    with pytest.raises(PortTaken, match=rf"port 50123 is claimed by another slowave server \(pid {os.getpid()}\)"):
        claim_port("127.0.0.1", 50123, tmp_path)
    first.release()
    again = claim_port("127.0.0.1", 50123, tmp_path)
    assert again is not None
    again.release()


def test_addresses_on_one_port_exclude_each_other_as_their_bindings_would(tmp_path):
    one = claim_port("10.0.0.5", 50124, tmp_path)
    other = claim_port("10.0.0.6", 50124, tmp_path)  # another interface: both may serve
    assert one is not None and other is not None
    for wildcard in ("0.0.0.0", "::", ""):
        with pytest.raises(PortTaken):
            claim_port(wildcard, 50124, tmp_path)
    one.release()
    other.release()
    everything = claim_port("0.0.0.0", 50124, tmp_path)
    assert everything is not None
    with pytest.raises(PortTaken, match=rf"\(pid {os.getpid()}\)"):
        claim_port("10.0.0.5", 50124, tmp_path)
    assert claim_port("10.0.0.5", 50125, tmp_path) is not None  # another port is unaffected
    everything.release()


def test_port_zero_is_never_claimed(tmp_path):
    assert claim_port("127.0.0.1", 0, tmp_path) is None
    assert claim_port("127.0.0.1", 0, tmp_path) is None


def test_a_claim_dies_with_its_process_even_by_sigkill(tmp_path):
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, pathlib; from slowave.api.port_claim import claim_port;"
            f"c = claim_port('127.0.0.1', 50126, pathlib.Path({str(tmp_path)!r})); print('held', flush=True);"
            "sys.stdin.read()",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(PortTaken, match=rf"\(pid {holder.pid}\)"):
            claim_port("127.0.0.1", 50126, tmp_path)
    finally:
        holder.kill()
        holder.wait(timeout=60)
    claim = claim_port("127.0.0.1", 50126, tmp_path)
    assert claim is not None
    claim.release()


def test_without_a_directory_for_the_files_the_start_goes_on_unclaimed(tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a directory")
    assert claim_port("127.0.0.1", 50127, blocked / "claims") is None
