"""The walkthrough client (clients/python/walkthrough.py, docs/clients.md) runs a full cycle against a live server."""

import subprocess
import sys

import pytest

from tests.support import REPO

pytestmark = pytest.mark.backend_neutral


def test_walkthrough_client_runs_a_full_cycle(server):
    out = subprocess.run(
        [sys.executable, str(REPO / "clients/python/walkthrough.py"), server.address],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "commit refused: FAILED_PRECONDITION feedback is incomplete" in out.stdout
    assert out.stdout.strip().endswith("commit: COMMIT_OPERATION_CLOSED FEEDBACK_STATUS_COMPLETE")
