"""The Node.js client (clients/node/cycle.js: @grpc/grpc-js + @grpc/proto-loader, no generated code)
runs a full cycle against a real server, and every step it prints is checked against the server's
own records: the premature Commit's `google.rpc.Status` details, decoded in Node from the
`grpc-status-details-bin` trailer, name exactly what the second Activate exposed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import threading
from concurrent import futures
from typing import Any

import grpc
import pytest

from tests.support import REPO, Server, assess_all, commit, pb, res

pytestmark = pytest.mark.backend_neutral

NODE = shutil.which("node")
CLIENT_DIR = REPO / "clients" / "node"
CYCLE = CLIENT_DIR / "cycle.js"


@pytest.fixture(scope="module")
def node() -> str:
    if NODE is None:
        pytest.skip(
            "SKIPPED: `node` is not on PATH, so the Node.js client (clients/node) is NOT tested; "
            "install Node.js 18+ and run `make test`"
        )
    missing = [
        p
        for p in ("@grpc/grpc-js", "@grpc/proto-loader", "protobufjs", "google-proto-files")
        if not (CLIENT_DIR / "node_modules" / p / "package.json").is_file()
    ]
    assert not missing, f"clients/node/node_modules lacks {missing}: run `npm ci` in clients/node (`make test` does it)"
    return NODE


def run_cycle(node: str, address: str, **env: str) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("SLOWAVE_")}
    environment.update(env)
    out = subprocess.run(
        [node, str(CYCLE), address], capture_output=True, text=True, timeout=180, env=environment, cwd=REPO
    )
    lines = [json.loads(line) for line in out.stdout.splitlines() if line.strip()]
    return out, lines


def test_node_client_runs_a_full_cycle_checked_against_the_server(node: str, server: Server):
    out, lines = run_cycle(node, server.address)
    assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    check_cycle_transcript(server, lines)


def check_cycle_transcript(server: Server, lines: list[dict[str, Any]]) -> None:
    """The transcript a client of another language prints for the cycle of clients/node/cycle.js
    (clients/go prints the same), checked step by step against the server's own records."""
    steps = [line["step"] for line in lines]
    assert steps[:5] == ["activate", "remember", "commit", "activate_again", "commit_refused"], steps
    assert steps[-1] == "commit_again", steps
    first, remembered, committed, second, refused = lines[:5]
    feedback, final = lines[5:-1], lines[-1]
    scope = first["scope"]

    # 1. Activate opened a session in a fresh scope.
    assert first["memory_state"] == "MEMORY_STATE_COLD_START" and first["memory_ids"] == []
    # 2. The claim is stored in that scope (seen through the Python stubs: a lookup finds it verbatim).
    assert remembered["disposition"] == "DISPOSITION_CREATED"
    probe = server.stub.Activate(
        pb.ActivateRequest(task=remembered["content"], initial_goal="check the claim", scope=scope), timeout=60
    )
    assert [(m.memory_id, m.content, m.type) for m in probe.memories if m.memory_id == remembered["memory_id"]] == [
        (remembered["memory_id"], remembered["content"], res.MEMORY_TYPE_FACT)
    ]
    assess_all(server.stub, probe)
    commit(server.stub, probe.session_id)
    # 3. The first commit closed the first session.
    assert committed == {
        "step": "commit",
        "session_id": first["session_id"],
        "committed": True,
        "operation": "COMMIT_OPERATION_CLOSED",
        "feedback_status": "FEEDBACK_STATUS_COMPLETE",
    }
    # 4. The second Activate returned the claim; the server recorded exactly what it printed as exposed.
    exposed_memories = [m["memory_id"] for m in second["memories"]]
    assert remembered["memory_id"] in exposed_memories
    with server.running.ctx.db.transaction() as uow:
        exposures = [(x.target_kind, x.target_id) for x in uow.retrievals.exposures([second["retrieval_id"]])]
        first_session = uow.sessions.get_any(first["session_id"])
        second_session_scope = uow.sessions.get_any(second["session_id"]).scope
    assert sorted(exposures) == sorted(
        [("memory", i) for i in exposed_memories] + [("procedure", i) for i in second["procedure_ids"]]
    )
    assert (first_session.scope, first_session.state, first_session.outcome) == (scope, "closed", "success")
    assert second_session_scope == scope

    # 5. The premature Commit: FAILED_PRECONDITION, ErrorInfo and IncompleteFeedback decoded in Node
    #    from the trailer; the outstanding list is exactly what the second Activate exposed.
    assert (
        refused["code"] == "FAILED_PRECONDITION"
        and refused["code_number"] == grpc.StatusCode.FAILED_PRECONDITION.value[0]
    )
    assert refused["message"] == refused["status_message"] == "feedback is incomplete"
    assert refused["status_code"] == refused["code_number"]
    assert sorted(refused["detail_types"]) == ["google.rpc.ErrorInfo", "slowave.v1.IncompleteFeedback"], refused
    assert refused["error_info"] == {
        "reason": "INCOMPLETE_FEEDBACK",
        "domain": "slowave.ai",
        "metadata": {"code": "incomplete_feedback", "retryable": "true"},
    }
    assert refused["outstanding"] == [
        {
            "retrieval_id": second["retrieval_id"],
            "memory_ids": exposed_memories,
            "procedure_ids": second["procedure_ids"],
        }
    ]

    # 6. Feedback on that one retrieval: the claim strengthened, the rest implicitly assessed.
    assert [f["retrieval_id"] for f in feedback] == [second["retrieval_id"]]
    record = feedback[0]
    assert record["coverage"] == "COVERAGE_COMPLETE" and record["rejected"] == []
    assert record["strengthened"] == [remembered["memory_id"]]
    assert record["implicitly_assessed"] == {
        "memory_ids": [i for i in exposed_memories if i != remembered["memory_id"]],
        "procedure_ids": second["procedure_ids"],
    }
    assert record["outstanding"] == {"memory_ids": [], "procedure_ids": []}
    with server.running.ctx.db.transaction() as uow:
        explicit = [
            (r.target_id, r.assessment, r.effect)
            for r in uow.ledger.rows(second["retrieval_id"])
            if r.target_kind == "memory" and r.accepted and not r.implicit
        ]
        second_session = uow.sessions.get_any(second["session_id"])
    assert explicit == [(remembered["memory_id"], "used", "helped")]

    # 7. The identical Commit closed the second session.
    assert final == {
        "step": "commit_again",
        "session_id": second["session_id"],
        "committed": True,
        "operation": "COMMIT_OPERATION_CLOSED",
        "feedback_status": "FEEDBACK_STATUS_COMPLETE",
    }
    assert (second_session.state, second_session.feedback_status, second_session.outcome) == (
        "closed",
        "complete",
        "success",
    )


class _RecordingServer(grpc.GenericRpcHandler):
    """A stand-in server that records each call's method and metadata and refuses it as UNAUTHENTICATED."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, str]]] = []
        self._lock = threading.Lock()
        self.server = grpc.server(futures.ThreadPoolExecutor(max_workers=2), handlers=[self])
        self.port = self.server.add_insecure_port("127.0.0.1:0")
        self.server.start()

    def service(self, handler_call_details: grpc.HandlerCallDetails) -> grpc.RpcMethodHandler:
        with self._lock:
            self.calls.append(
                (
                    handler_call_details.method,
                    {k: v for k, v in handler_call_details.invocation_metadata if isinstance(v, str)},
                )
            )
        return grpc.unary_unary_rpc_method_handler(self._refuse)

    @staticmethod
    def _refuse(_request: bytes, context: grpc.ServicerContext) -> bytes:
        context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or unknown API key")

    def stop(self) -> None:
        self.server.stop(grace=None).wait()


@pytest.mark.parametrize("api_key", ["sk-node-test-7f3a", None])
def test_node_client_sends_the_api_key_as_bearer_metadata(node: str, api_key: str | None):
    check_api_key_refusal(lambda address, env: run_cycle(node, address, **env), api_key)


def check_api_key_refusal(run: Any, api_key: str | None) -> None:
    """`run(address, env)` runs a client's cycle against a stand-in that refuses every call as
    UNAUTHENTICATED: the key travels as bearer metadata, and the refusal is reported as Node's is."""
    recorder = _RecordingServer()
    try:
        out, lines = run(f"127.0.0.1:{recorder.port}", {"SLOWAVE_API_KEY": api_key} if api_key else {})
    finally:
        recorder.stop()
    assert out.returncode == 1, out
    assert lines == [
        {
            "step": "error",
            "failed_step": "activate",
            "message": "Activate failed: UNAUTHENTICATED missing or unknown API key",
            "error": {
                "code": "UNAUTHENTICATED",
                "code_number": 16,
                "message": "missing or unknown API key",
                "details": [],
            },
        }
    ], lines
    assert [method for method, _ in recorder.calls] == ["/slowave.v1.MemoryService/Activate"]
    metadata = recorder.calls[0][1]
    if api_key:
        assert metadata.get("authorization") == f"Bearer {api_key}"
    else:
        assert "authorization" not in metadata


def test_node_client_with_an_api_key_against_a_keyed_server(node: str, tmp_path):
    """End to end: a server that requires keys serves the whole cycle to the key's tenant, and
    refuses a call without a key with UNAUTHENTICATED + ErrorInfo, decoded by the Node client."""
    from tests import support

    key = "swk_node-0123456789abcdefghijklmnopqrstuvwxyzAB"
    srv = support.start_keyed_server(tmp_path / "keyed", {key: "node-tenant"})
    try:
        out, lines = run_cycle(node, srv.address, SLOWAVE_API_KEY=key)
        assert out.returncode == 0, f"exit {out.returncode}\nstdout:\n{out.stdout}\nstderr:\n{out.stderr}"
        assert lines[0]["api_key"] is True and lines[-1]["step"] == "commit_again", lines
        with srv.running.ctx.db.transaction() as uow:
            sessions = {
                lines[0]["session_id"]: uow.sessions.get_any(lines[0]["session_id"]),
                lines[-1]["session_id"]: uow.sessions.get_any(lines[-1]["session_id"]),
            }
        assert {s.tenant for s in sessions.values()} == {"node-tenant"}
        assert {s.state for s in sessions.values()} == {"closed"}

        out, lines = run_cycle(node, srv.address)
        assert out.returncode == 1, out
        [error] = lines
        assert (error["failed_step"], error["error"]["code"]) == ("activate", "UNAUTHENTICATED"), error
        info = [d["value"] for d in error["error"]["details"] if d["type"] == "google.rpc.ErrorInfo"]
        assert info == [
            {
                "reason": "UNAUTHENTICATED",
                "domain": "slowave.ai",
                "metadata": {"code": "unauthenticated", "retryable": "false"},
            }
        ], error
    finally:
        srv.stop()
