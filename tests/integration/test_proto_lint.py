"""The protos pass `buf lint` with the STANDARD rules (behaviour §4.1)."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from tests.support import REPO

pytestmark = pytest.mark.backend_neutral


def test_buf_lint_passes():
    if shutil.which("npx") is None:
        pytest.skip("npx is not installed; install Node.js and run `npm ci` to lint the protos with buf")
    if not (REPO / "node_modules" / "@bufbuild" / "buf").is_dir():
        pytest.skip("node_modules/@bufbuild/buf is missing; run `npm ci` in the repository root to install buf")
    result = subprocess.run(
        ["npx", "--no-install", "buf", "lint"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, f"buf lint failed (exit {result.returncode}):\n{result.stdout}\n{result.stderr}"
