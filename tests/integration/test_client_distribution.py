"""The client distribution (clients/python/pyproject.toml): installed alone into a fresh virtual
environment it brings grpcio, protobuf and the generated slowave.v1 stubs but none of the server's
dependencies, and the SDK walkthrough and the `slowave` CLI run a cycle from it against a live
server. The walkthrough runs as a copy outside the repository, so that nothing is imported from
the source tree."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support import REPO, Server

pytestmark = pytest.mark.backend_neutral

SERVER_ONLY = {"sqlalchemy", "alembic", "psycopg", "psycopg-binary", "numpy", "usearch", "pystemmer", "slowave"}


@pytest.fixture(scope="module")
def client_env(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = tmp_path_factory.mktemp("client-venv")
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    environment = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    out = subprocess.run(
        [str(venv / "bin" / "pip"), "install", "-q", str(REPO / "clients" / "python")],
        capture_output=True,
        text=True,
        env=environment,
        timeout=900,
    )
    assert out.returncode == 0, f"pip install ./clients/python failed:\n{out.stdout}\n{out.stderr}"
    return venv


def _environment() -> dict[str, str]:
    return {
        k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV") and not k.startswith("SLOWAVE_")
    }


def test_the_client_distribution_pulls_no_server_dependency(client_env: Path):
    listing = subprocess.run(
        [str(client_env / "bin" / "pip"), "list", "--format=json"], capture_output=True, text=True, check=True
    )
    installed = {p["name"].lower() for p in json.loads(listing.stdout)}
    assert {"slowave-client", "grpcio", "protobuf", "grpcio-status"} <= installed, installed
    assert not installed & SERVER_ONLY, installed & SERVER_ONLY
    # The stubs come with it; the server package does not.
    probe = "import slowave.v1.memory_service_pb2, slowave_client, slowave_mcp\ntry:\n import slowave.api\nexcept ImportError:\n print('no server')"
    out = subprocess.run(
        [str(client_env / "bin" / "python"), "-c", probe],
        capture_output=True,
        text=True,
        cwd=client_env,
        env=_environment(),
    )
    assert (out.returncode, out.stdout.strip()) == (0, "no server"), out.stderr


def test_the_walkthrough_and_the_cli_run_from_the_client_distribution(client_env: Path, server: Server, tmp_path: Path):
    script = tmp_path / "walkthrough.py"
    shutil.copy(REPO / "clients" / "python" / "walkthrough.py", script)
    out = subprocess.run(
        [str(client_env / "bin" / "python"), str(script), server.address],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env=_environment(),
    )
    assert out.returncode == 0, out.stderr
    assert "commit refused: FAILED_PRECONDITION feedback is incomplete" in out.stdout
    assert out.stdout.strip().endswith("commit: COMMIT_OPERATION_CLOSED FEEDBACK_STATUS_COMPLETE")
    health = subprocess.run(
        [str(client_env / "bin" / "slowave"), "--target", server.address, "health"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=_environment(),
    )
    assert (health.returncode, json.loads(health.stdout)) == (0, {"status": "serving"}), health.stderr
