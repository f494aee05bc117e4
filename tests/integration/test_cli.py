"""The `slowave` command, run as a subprocess (the installed console script) against live servers."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import grpc
import pytest

from slowave.v1 import memory_service_pb2 as pb
from tests.integration.test_sdk import StandIn, free_port, make_pki
from tests.support import Server

pytestmark = pytest.mark.backend_neutral

SLOWAVE = Path(sys.executable).parent / "slowave"


def slowave(
    *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    assert SLOWAVE.exists(), f"{SLOWAVE} is missing: reinstall the project (pip install -e .)"
    clean = {k: v for k, v in os.environ.items() if k not in ("SLOWAVE_TARGET", "SLOWAVE_API_KEY")}
    return subprocess.run(
        [str(SLOWAVE), *args], input=stdin, capture_output=True, text=True, timeout=120, env={**clean, **(env or {})}
    )


def ok(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0, (result.returncode, result.stdout, result.stderr)
    assert result.stderr == ""
    return json.loads(result.stdout)


def failed(result: subprocess.CompletedProcess[str], exit_code: int) -> dict[str, Any]:
    assert result.returncode == exit_code, (result.returncode, result.stdout, result.stderr)
    assert result.stdout == ""
    return json.loads(result.stderr)["error"]


def test_health(server: Server):
    assert ok(slowave("--target", server.address, "health")) == {"status": "serving"}
    assert ok(slowave("health", "--service", "slowave.v1.MemoryService", env={"SLOWAVE_TARGET": server.address})) == {
        "status": "serving"
    }
    table = slowave("health", "--format", "table", "--target", server.address)
    assert (table.returncode, table.stdout) == (0, "serving\n")
    unknown = slowave("--target", server.address, "health", "--service", "no.such.Service")
    assert unknown.returncode == 1 and json.loads(unknown.stdout) == {"status": "service_unknown"}
    down = failed(slowave("--target", f"127.0.0.1:{free_port()}", "health"), 8)
    assert down["status"] == "UNAVAILABLE" and down["retryable"] is True


def test_full_cycle_with_flags_json_documents_and_tables(server: Server, scope: str, tmp_path: Path):
    target = ("--target", server.address)
    claim = f"The cache of {scope} is flushed every 15 minutes."

    first = ok(
        slowave(
            *target,
            "activate",
            "--task",
            "Why is the cache stale?",
            "--goal",
            "Explain stale cache",
            "--scope",
            scope,
            "--context",
            '{"env": "prod"}',
        )
    )
    session = first["session_id"]
    assert session.startswith("sess_") and first["memory_state"] == "cold_start" and first["memories"] == []
    stored = ok(
        slowave(*target, "remember", "--session", session, "--scope", scope, "--content", claim, "--type", "fact")
    )
    assert (stored["disposition"], stored["type"]) == ("created", "fact")
    batch = ok(
        slowave(
            *target,
            "remember",
            "--json",
            "-",
            stdin=json.dumps(
                {
                    "session_id": session,
                    "scope": scope,
                    "memories": [
                        {"content": f"Decision for {scope}: keep the flush interval.", "type": "decision"},
                        {"content": "", "type": "fact"},
                    ],
                }
            ),
        )
    )
    assert [(r["ok"], r["index"]) for r in batch["results"]] == [(True, 0), (False, 1)]
    assert batch["results"][1]["error"]["code"] == "invalid_input"
    commit_doc = tmp_path / "commit.json"
    commit_doc.write_text(
        json.dumps(
            {
                "session_id": session,
                "final_goal": "Explain stale cache",
                "outcome": "success",
                "outcome_summary": "The cache is flushed every 15 minutes by design.",
                "verification": {"status": "verified", "summary": "Read the cron table."},
            }
        )
    )
    closed = ok(slowave(*target, "commit", "--json", f"@{commit_doc}"))
    assert (closed["committed"], closed["operation"], closed["episodes_formed"]) == (True, "closed", 2)

    # A person reads the second activation as a table.
    table = slowave(
        *target,
        "--format",
        "table",
        "activate",
        "--task",
        f"Tune the cache. {claim}",
        "--goal",
        "Tune the cache",
        "--scope",
        scope,
    )
    assert table.returncode == 0, table.stderr
    header = re.search(r"session (sess_\w+)\s+retrieval (ctx_\w+)\s+memory state available", table.stdout)
    assert header, table.stdout
    session2, retrieval = header.groups()
    assert re.search(
        rf"^1\s+{stored['memory_id']}\s+fact\s+[0-9.]+\s+[0-9.]+\s+\+0\.000\s+direct\s+The cache of",
        table.stdout,
        re.MULTILINE,
    ), table.stdout
    assert "MEMORY" in table.stdout and "CONTENT" in table.stdout

    refused = failed(
        slowave(
            *target,
            "commit",
            "--session",
            session2,
            "--final-goal",
            "Tune the cache",
            "--outcome",
            "success",
            "--summary",
            "Tuned.",
            "--verification",
            "verified",
            "--verification-summary",
            "Load test is green.",
        ),
        6,
    )
    assert (refused["code"], refused["message"], refused["retryable"]) == (
        "incomplete_feedback",
        "feedback is incomplete",
        True,
    )
    assert refused["outstanding"][0]["retrieval_id"] == retrieval
    assert stored["memory_id"] in refused["outstanding"][0]["memory_ids"]

    record = ok(
        slowave(
            *target,
            "feedback",
            "--retrieval",
            retrieval,
            "--memory",
            f"{stored['memory_id']}=used",
            "--coverage",
            "complete",
            "--missing",
            "who owns the cron table",
        )
    )
    assert record["applied"]["strengthened"] == [stored["memory_id"]] and record["rejected"] == []
    assert record["coverage"] == "complete" and record["outstanding"] == {"memory_ids": [], "procedure_ids": []}

    recalled = slowave(
        *target, "recall", "--session", session2, "--scope", scope, "--query", claim, "--format", "table"
    )
    assert recalled.returncode == 0 and stored["memory_id"] in recalled.stdout
    recall_id = re.search(r"retrieval (rec_\w+)", recalled.stdout).group(1)
    items = ok(
        slowave(
            *target,
            "feedback",
            "--json",
            json.dumps(
                {"items": [{"retrieval_id": recall_id, "coverage": "complete"}, {"retrieval_id": "rec_000000000000"}]}
            ),
        )
    )
    assert [r["ok"] for r in items["results"]] == [True, False]

    done = ok(
        slowave(
            *target,
            "commit",
            "--session",
            session2,
            "--final-goal",
            "Tune the cache",
            "--outcome",
            "success",
            "--summary",
            "Tuned the flush interval.",
            "--verification",
            "verified",
            "--verification-summary",
            "Load test is green.",
            "--evidence-ref",
            "ci#42",
        )
    )
    assert (done["operation"], done["feedback_status"]) == ("closed", "complete")

    ended = failed(
        slowave(
            *target, "remember", "--session", session2, "--scope", scope, "--content", "Too late.", "--type", "fact"
        ),
        5,
    )
    assert ended["reason"] == "SESSION_ENDED"
    unknown = failed(slowave(*target, "recall", "--session", "sess_abc123", "--scope", scope, "--query", "x"), 4)
    assert (unknown["status"], unknown["reason"]) == ("NOT_FOUND", "SESSION_NOT_FOUND")
    invalid = failed(slowave(*target, "activate", "--task", "t", "--goal", " ", "--scope", "nocolon"), 3)
    assert invalid["status"] == "INVALID_ARGUMENT"
    assert sorted(f["path"] for f in invalid["field_errors"]) == ["initial_goal", "scope"]


def test_api_key_flag_and_environment_reach_the_server():
    recorder = StandIn(
        lambda request, context: pb.ActivateResponse(session_id=f"sess_for_{request.scope.split(':')[1]}")
    )
    try:
        request = ["activate", "--task", "t", "--goal", "g"]
        assert (
            ok(
                slowave("--target", recorder.address, "--api-key", "swk_flag-0123456789", *request, "--scope", "p:flag")
            )["session_id"]
            == "sess_for_flag"
        )
        ok(
            slowave(
                *request,
                "--scope",
                "p:env",
                env={"SLOWAVE_TARGET": recorder.address, "SLOWAVE_API_KEY": "swk_env-0123456789"},
            )
        )
        ok(slowave("--target", recorder.address, *request, "--scope", "p:none"))
        assert [m.get("authorization") for m in recorder.metadata] == [
            "Bearer swk_flag-0123456789",
            "Bearer swk_env-0123456789",
            None,
        ]
    finally:
        recorder.stop()


def test_tls_flags(tmp_path: Path):
    pki = make_pki(tmp_path / "pki")
    creds = grpc.ssl_server_credentials(
        [(pki.server_key.read_bytes(), pki.server_cert.read_bytes())],
        root_certificates=pki.ca.read_bytes(),
        require_client_auth=True,
    )
    secure = StandIn(lambda request, context: pb.ActivateResponse(), credentials=creds)
    try:
        assert ok(
            slowave(
                "--target",
                secure.address,
                "--tls-ca",
                str(pki.ca),
                "--tls-cert",
                str(pki.client_cert),
                "--tls-key",
                str(pki.client_key),
                "health",
            )
        ) == {"status": "serving"}
        no_cert = failed(slowave("--target", secure.address, "--tls-ca", str(pki.ca), "health"), 8)
        assert no_cert["status"] == "UNAVAILABLE"
        failed(slowave("--target", secure.address, "health"), 8)  # plaintext to a TLS port
        missing = failed(slowave("--target", secure.address, "--tls-ca", str(tmp_path / "absent.pem"), "health"), 2)
        assert "absent.pem" in missing["message"]
    finally:
        secure.stop()
