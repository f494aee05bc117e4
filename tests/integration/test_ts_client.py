"""The TypeScript client (clients/ts/src/cycle.ts): code generated from protos/ by protoc-gen-es
(buf.gen.yaml), compiled with tsc and run on Node over the gRPC protocol (connect-node), runs the
whole cycle against a real server. Its transcript is checked exactly as the Node client's is,
including the refused Commit's IncompleteFeedback, decoded in TypeScript from the
`grpc-status-details-bin` trailer."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from typing import Any

import pytest

from tests.integration.test_node_client import check_api_key_refusal, check_cycle_transcript
from tests.support import REPO, Server, buf_generate

pytestmark = pytest.mark.backend_neutral

CLIENT = REPO / "clients" / "ts"


@pytest.fixture(scope="module")
def cycle_script(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    node = shutil.which("node")
    if node is None:
        pytest.skip("SKIPPED: `node` is not on PATH, so the TypeScript client (clients/ts) is NOT tested")
    build = tmp_path_factory.mktemp("ts")
    buf_generate(build)
    # The client's own sources beside freshly generated code, compiled with its pinned tsc.
    project = build / "ts"
    shutil.copytree(CLIENT / "src", project / "src")
    for name in ("package.json", "tsconfig.json"):
        shutil.copy(CLIENT / name, project / name)
    (project / "node_modules").symlink_to(CLIENT / "node_modules")
    out = subprocess.run(
        [node, str(CLIENT / "node_modules" / "typescript" / "bin" / "tsc"), "-p", str(project)],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, f"tsc failed:\n{out.stdout}\n{out.stderr}"
    return [node, str(project / "dist" / "src" / "cycle.js")]


def run_cycle(
    script: list[str], address: str, env: dict[str, str]
) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SLOWAVE_")}
    environment.update(env)
    out = subprocess.run([*script, address], capture_output=True, text=True, timeout=180, env=environment)
    return out, [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_typescript_client_runs_a_full_cycle_checked_against_the_server(cycle_script: list[str], server: Server):
    out, lines = run_cycle(cycle_script, server.address, {})
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    check_cycle_transcript(server, lines)


@pytest.mark.parametrize("api_key", ["sk-ts-test-9d41", None])
def test_typescript_client_sends_the_api_key_as_bearer_metadata(cycle_script: list[str], api_key: str | None):
    check_api_key_refusal(lambda address, env: run_cycle(cycle_script, address, env), api_key)
