"""The Go client (clients/go/cycle): stubs generated from protos/ by `buf generate` with Debian's
protoc-gen-go and protoc-gen-go-grpc (buf.gen.yaml, the import path of each file's go_package),
built in GOPATH mode against Debian's Go libraries, runs the whole cycle against a real server.
Its transcript is checked exactly as the Node client's is, against the server's own records,
including the refused Commit's IncompleteFeedback decoded in Go."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.integration.test_node_client import check_api_key_refusal, check_cycle_transcript
from tests.support import REPO, Server, buf_generate

pytestmark = pytest.mark.backend_neutral

# Debian's Go libraries (golang-google-grpc-dev, golang-google-protobuf-dev,
# golang-github-golang-protobuf-1-5-dev, golang-google-genproto-dev): no module proxy is reachable.
DEBIAN_GOPATH = Path("/usr/share/gocode")
TOOLS = ("go", "protoc-gen-go", "protoc-gen-go-grpc")


@pytest.fixture(scope="module")
def cycle_binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    missing = [tool for tool in TOOLS if shutil.which(tool) is None]
    if missing or not (DEBIAN_GOPATH / "src" / "google.golang.org" / "grpc").is_dir():
        message = (
            f"the Go toolchain or Debian's Go gRPC libraries are missing ({missing or DEBIAN_GOPATH}); "
            "`.ci/run` installs them (golang-go protoc-gen-go protoc-gen-go-grpc golang-google-grpc-dev ...)"
        )
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip("SKIPPED: clients/go is NOT tested: " + message)
    build = tmp_path_factory.mktemp("go")
    buf_generate(build)
    generated = build / "go" / "src" / "slowave.dev" / "go" / "slowave" / "v1"
    assert sorted(p.name for p in generated.iterdir()) == [
        "errors.pb.go",
        "memory_service.pb.go",
        "memory_service_grpc.pb.go",
        "resources.pb.go",
    ]
    binary = build / "cycle"
    env = {
        **os.environ,
        "GO111MODULE": "off",
        "GOPATH": f"{build / 'go'}:{DEBIAN_GOPATH}",
        "GOCACHE": os.environ.get("GOCACHE", str(tmp_path_factory.getbasetemp() / "gocache")),
        "GOFLAGS": "",
    }
    out = subprocess.run(
        ["go", "build", "-o", str(binary), "./clients/go/cycle"], cwd=REPO, env=env, capture_output=True, text=True
    )
    assert out.returncode == 0, f"go build failed:\n{out.stderr}"
    return binary


def run_cycle(binary: Path, address: str, env: dict[str, str]) -> tuple[subprocess.CompletedProcess[str], list[Any]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SLOWAVE_")}
    environment.update(env)
    out = subprocess.run([str(binary), address], capture_output=True, text=True, timeout=180, env=environment)
    return out, [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


def test_go_client_runs_a_full_cycle_checked_against_the_server(cycle_binary: Path, server: Server):
    out, lines = run_cycle(cycle_binary, server.address, {})
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    check_cycle_transcript(server, lines)


@pytest.mark.parametrize("api_key", ["sk-go-test-51c2", None])
def test_go_client_sends_the_api_key_as_bearer_metadata(cycle_binary: Path, api_key: str | None):
    check_api_key_refusal(lambda address, env: run_cycle(cycle_binary, address, env), api_key)
