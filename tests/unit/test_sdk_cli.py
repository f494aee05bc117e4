"""The `slowave` CLI's pure parts: argument parsing, request documents, error objects, exit codes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import grpc
import pytest
from google.rpc import code_pb2

from slowave_client import cli
from slowave_client.errors import error_from_status
from tests.unit.test_sdk_errors import info, status


def parse(*argv: str):
    return cli.build_parser().parse_args(list(argv))


def run(*argv: str) -> tuple[int, str, dict]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.main(list(argv), out, err)
    return code, out.getvalue(), json.loads(err.getvalue()) if err.getvalue() else {}


def test_connection_options_work_before_and_after_the_command(monkeypatch):
    monkeypatch.delenv("SLOWAVE_TARGET", raising=False)
    monkeypatch.delenv("SLOWAVE_API_KEY", raising=False)
    args = parse("--target", "a:1", "health")
    assert args.target == "a:1" and args.api_key is None and args.timeout is None and args.format == "json"
    args = parse("--target", "a:1", "recall", "--target", "b:2", "--format", "table", "--api-key", "k")
    assert (args.target, args.format, args.api_key) == ("b:2", "table", "k")


def test_target_and_key_default_from_the_environment(monkeypatch):
    monkeypatch.setenv("SLOWAVE_TARGET", "memory:7000")
    monkeypatch.setenv("SLOWAVE_API_KEY", "env-key")
    args = parse("health")
    assert (args.target, args.api_key) == ("memory:7000", "env-key")


def test_flags_become_protobuf_field_names_and_override_the_document(tmp_path: Path):
    doc = tmp_path / "req.json"
    doc.write_text(json.dumps({"task": "from file", "initial_goal": "g", "scope": "project:a", "page_size": 3}))
    args = parse("activate", "--json", f"@{doc}", "--task", "from flag", "--context", '{"env": "ci"}')
    assert cli.request_of(args) == {
        "task": "from flag",
        "initial_goal": "g",
        "scope": "project:a",
        "page_size": 3,
        "task_context": {"env": "ci"},
    }


def test_absent_flags_leave_the_document_alone():
    args = parse("recall", "--json", '{"session_id": "s", "scope": "p:x", "continue_from": "cur_1"}')
    assert cli.request_of(args) == {"session_id": "s", "scope": "p:x", "continue_from": "cur_1"}


def test_feedback_flags_append_entries():
    args = parse(
        "feedback",
        "--json",
        '{"retrieval_id": "ctx_1", "memory_feedback": [{"memory_id": "sch_9", '
        '"assessment": "stale", "stale_reason": "outdated", "reason": "moved"}]}',
        "--memory",
        "sch_1=used",
        "--memory",
        " sch_2 = irrelevant",
        "--coverage",
        "complete",
        "--missing",
        "the port",
    )
    assert cli.request_of(args) == {
        "retrieval_id": "ctx_1",
        "coverage": "complete",
        "missing": ["the port"],
        "memory_feedback": [
            {"memory_id": "sch_9", "assessment": "stale", "stale_reason": "outdated", "reason": "moved"},
            {"memory_id": "sch_1", "assessment": "used"},
            {"memory_id": "sch_2", "assessment": "irrelevant"},
        ],
    }
    with pytest.raises(cli.UsageError):
        cli.request_of(parse("feedback", "--memory", "sch_1"))


def test_commit_verification_flags_merge_into_the_document():
    args = parse(
        "commit",
        "--json",
        '{"verification": {"summary": "from doc", "evidence_refs": ["ci#1"]}}',
        "--session",
        "sess_1",
        "--outcome",
        "success",
        "--summary",
        "done",
        "--verification",
        "verified",
    )
    assert cli.request_of(args) == {
        "session_id": "sess_1",
        "outcome": "success",
        "outcome_summary": "done",
        "verification": {"summary": "from doc", "evidence_refs": ["ci#1"], "status": "verified"},
    }


def test_error_objects_and_exit_codes():
    incomplete = error_from_status(
        grpc.StatusCode.FAILED_PRECONDITION,
        "feedback is incomplete",
        status(
            code_pb2.FAILED_PRECONDITION,
            "feedback is incomplete",
            info("INCOMPLETE_FEEDBACK", "incomplete_feedback", True),
        ),
    )
    assert cli.exit_code_of(incomplete) == cli.EXIT_CODES["incomplete_feedback"]
    body = cli._error_object(incomplete)["error"]
    assert body == {
        "status": "FAILED_PRECONDITION",
        "code": "incomplete_feedback",
        "reason": "INCOMPLETE_FEEDBACK",
        "message": "feedback is incomplete",
        "retryable": True,
        "outstanding": [],
    }
    expected = {
        grpc.StatusCode.INVALID_ARGUMENT: 3,
        grpc.StatusCode.NOT_FOUND: 4,
        grpc.StatusCode.FAILED_PRECONDITION: 5,
        grpc.StatusCode.UNAUTHENTICATED: 7,
        grpc.StatusCode.PERMISSION_DENIED: 7,
        grpc.StatusCode.UNAVAILABLE: 8,
        grpc.StatusCode.DEADLINE_EXCEEDED: 8,
        grpc.StatusCode.INTERNAL: 1,
    }
    for code, exit_code in expected.items():
        assert cli.exit_code_of(error_from_status(code, "m", None)) == exit_code, code
    assert len(set(cli.EXIT_CODES.values())) == len(cli.EXIT_CODES)


def test_requests_the_sdk_cannot_build_fail_before_sending():
    # Port 1 has no server: reaching the network would be UNAVAILABLE (8), not invalid input (3).
    code, out, err = run(
        "--target", "127.0.0.1:1", "remember", "--session", "s", "--scope", "p:x", "--content", "c", "--type", "rumour"
    )
    assert code == 3 and out == ""
    assert err["error"]["code"] == "invalid_input" and [f["path"] for f in err["error"]["field_errors"]] == ["type"]


def test_usage_errors_are_json_with_their_own_exit_code(tmp_path: Path):
    code, _, err = run("activate", "--json", f"@{tmp_path / 'absent.json'}")
    assert code == 2 and err["error"]["code"] == "usage" and "absent.json" in err["error"]["message"]
    code, _, err = run("activate", "--json", "[1, 2]")
    assert code == 2 and "object" in err["error"]["message"]
    code, _, err = run("activate", "--context", "{not json")
    assert code == 2 and "JSON" in err["error"]["message"]
    code, _, err = run("forget")
    assert code == 2 and err["error"]["code"] == "usage"
    code, _, err = run("--tls-cert", str(tmp_path / "c.pem"), "health")
    assert code == 2 and "key" in err["error"]["message"]
