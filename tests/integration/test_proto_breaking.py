"""The compatibility guard of `make test` (`make breaking-proto`: `buf breaking` against the previous
commit, and against HEAD while protos/ has uncommitted edits) bites: run on throwaway git
repositories holding a copy of the contract, it fails on a renumbered or removed field and passes an
additive change; it skips only where there is no previous commit, and a shallow clone that lacks the
previous commit fails instead of skipping."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support import REPO

pytestmark = pytest.mark.backend_neutral

SERVICE = Path("protos/slowave/v1/memory_service.proto")
ERRORS = Path("protos/slowave/v1/errors.proto")


@pytest.fixture(scope="module", autouse=True)
def tools() -> None:
    for tool in ("git", "make", "npx"):
        if shutil.which(tool) is None:
            pytest.skip(f"`{tool}` is not installed; the buf breaking guard cannot be exercised")
    if not (REPO / "node_modules" / "@bufbuild" / "buf").is_dir():
        pytest.skip("node_modules/@bufbuild/buf is missing; run `npm ci` in the repository root to install buf")


def git(repo: Path, *args: str) -> str:
    env = {
        **os.environ,
        "GIT_CONFIG_GLOBAL": os.devnull,
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }
    return subprocess.run(
        ["git", *args], cwd=repo, env=env, capture_output=True, text=True, check=True, timeout=60
    ).stdout


def new_repo(path: Path) -> Path:
    """A git repository whose one commit holds the repository's protos and buf.yaml."""
    path.mkdir()
    shutil.copytree(REPO / "protos", path / "protos")
    shutil.copy2(REPO / "buf.yaml", path / "buf.yaml")
    (path / "node_modules").symlink_to(REPO / "node_modules")  # buf, not copied; ignored below
    (path / ".gitignore").write_text("node_modules\n")
    git(path, "init", "-q", "-b", "main")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "contract")
    return path


def edit(repo: Path, file: Path, old: str, new: str) -> None:
    text = (repo / file).read_text()
    assert text.count(old) == 1, f"{old!r} is not unique in {file}: the test needs another anchor"
    (repo / file).write_text(text.replace(old, new))


def commit_all(repo: Path, message: str) -> None:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message)


def guard(repo: Path) -> subprocess.CompletedProcess[str]:
    """`make breaking-proto` with the repository's Makefile, run in `repo` (buf's own install step
    is taken as done: -o)."""
    return subprocess.run(
        [
            "make",
            "--no-print-directory",
            "-f",
            str(REPO / "Makefile"),
            "-o",
            "node_modules/.package-lock.json",
            "breaking-proto",
        ],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"},
    )


def output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"


# Changes a client compiled against the previous commit would break on, each with a phrase of buf's
# report that names it.
BREAKING = {
    "renumbered field": ((SERVICE, "  string task = 1;\n", "  string task = 15;\n"), r'"1" with name "task"'),
    "removed field": ((SERVICE, "  string initial_goal = 2;\n", ""), r'"2" with name "initial_goal"'),
}


@pytest.mark.parametrize("change", sorted(BREAKING))
def test_a_breaking_commit_fails_the_guard(tmp_path: Path, change: str):
    (file, old, new), reported = BREAKING[change]
    repo = new_repo(tmp_path / "repo")
    edit(repo, file, old, new)
    commit_all(repo, change)
    result = guard(repo)
    assert result.returncode != 0, output(result)
    assert "buf breaking --against HEAD~1" in result.stdout, output(result)
    assert re.search(reported, result.stdout + result.stderr), output(result)


def test_an_additive_commit_passes_the_guard(tmp_path: Path):
    repo = new_repo(tmp_path / "repo")
    edit(
        repo,
        ERRORS,
        "  repeated OutstandingRetrieval outstanding = 1;\n",
        "  repeated OutstandingRetrieval outstanding = 1;\n  // Added later.\n  int32 total = 2;\n",
    )
    (repo / ERRORS).write_text(
        (repo / ERRORS).read_text() + "\n// Added later.\nmessage FeedbackHint {\n  // A hint.\n  string text = 1;\n}\n"
    )
    commit_all(repo, "additive")
    result = guard(repo)
    assert result.returncode == 0, output(result)
    assert "buf breaking --against HEAD~1" in result.stdout and "SKIPPED" not in result.stdout, output(result)


def test_uncommitted_edits_are_checked_against_head_too(tmp_path: Path):
    """A field added in HEAD and removed in the working tree breaks HEAD's clients, though not
    HEAD~1's: the working tree is compared with both."""
    repo = new_repo(tmp_path / "repo")
    added = "  repeated OutstandingRetrieval outstanding = 1;\n  // Added in HEAD.\n  int32 total = 2;\n"
    edit(repo, ERRORS, "  repeated OutstandingRetrieval outstanding = 1;\n", added)
    commit_all(repo, "add total")
    assert guard(repo).returncode == 0
    edit(repo, ERRORS, added, "  repeated OutstandingRetrieval outstanding = 1;\n")
    result = guard(repo)
    assert result.returncode != 0, output(result)
    assert "buf breaking --against HEAD (uncommitted" in result.stdout, output(result)
    assert re.search(r'"2" with name "total"', result.stdout + result.stderr), output(result)


def test_the_first_commit_skips_with_a_message(tmp_path: Path):
    repo = new_repo(tmp_path / "repo")
    result = guard(repo)
    assert result.returncode == 0, output(result)
    assert "buf breaking: SKIPPED, HEAD~1 does not exist (HEAD is the first commit)" in result.stdout, output(result)


def test_a_shallow_clone_without_the_previous_commit_fails(tmp_path: Path):
    origin = new_repo(tmp_path / "origin")
    edit(origin, SERVICE, "  string task = 1;\n", "  string task = 15;\n")
    commit_all(origin, "renumber")
    clone = tmp_path / "clone"
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", str(clone))
    (clone / "node_modules").symlink_to(REPO / "node_modules")
    result = guard(clone)
    assert result.returncode != 0, output(result)
    assert "HEAD~1 is not in this shallow clone" in result.stderr, output(result)
    assert "SKIPPED" not in result.stdout, output(result)
