"""The MCP bridge `slowave-mcp`, end to end: a real server, the installed `slowave-mcp` launched as a
subprocess, and a real MCP client session (mcp.ClientSession over stdio; one test over streamable
HTTP). Every result is checked in the seed's JSON shapes (behaviour §4.6, 4.7), including the seed
documents' own JSON examples sent verbatim (placeholder ids replaced by real ones) and the JSON
halves of checklist scenarios 18, 25, 34, 35, 41, 57, 58 and 62.
"""

from __future__ import annotations

import json
import queue
import re
import subprocess
import sys
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from slowave.domain.api_keys import KeyEntry, hash_key
from slowave_mcp.channel import connect
from slowave_mcp.json_contract import execute
from tests import support
from tests.support import new_scope, pb, seed_memories, wait_until

pytestmark = pytest.mark.backend_neutral

BRIDGE = Path(sys.executable).with_name("slowave-mcp")
TIMEOUT = 120  # seconds per MCP request: generous, the machine may be loaded

FBE = re.compile(r"^fbe_[0-9a-f]{32}$")
RFC3339_Z = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")

ACTIVATE_KEYS = {
    "retrieval_id",
    "session_id",
    "memory_state",
    "memories",
    "procedures",
    "warnings",
    "continuity_id",
    "continuity_state",
    "retrieval_policy_version",
    "relevant_total",
    "catalog_truncated",
    "more_available",
}

CLAIM_42 = "The session reaper closes idle sessions under a row lock"
CLAIM_17 = "Staging login uses the shared qa account"
CLAIM_EXTRA = "Grafana dashboards refresh every thirty seconds"


# ------------------------------------------------------------------------------------------ harness


class Bridge:
    """A live MCP client session with `slowave-mcp`, driven from synchronous tests."""

    def __init__(self, portal: BlockingPortal, session: ClientSession) -> None:
        self.portal, self.session = portal, session

    def call(self, tool: str, arguments: dict[str, Any] | None) -> dict[str, Any]:
        result = self.portal.call(self._call, tool, arguments)
        envelope = result.structured_content
        # The same envelope as text (for clients that read only content), and MCP's error flag.
        assert len(result.content) == 1 and isinstance(result.content[0], mcp_types.TextContent)
        assert json.loads(result.content[0].text) == envelope
        assert result.is_error is (not envelope["ok"])
        return envelope

    async def _call(self, tool: str, arguments: dict[str, Any] | None) -> mcp_types.CallToolResult:
        return await self.session.call_tool(tool, arguments, read_timeout_seconds=TIMEOUT)

    def call_json(self, tool: str, text: str) -> dict[str, Any]:
        """Sends a JSON document as written (the seed's examples)."""
        return self.call(tool, json.loads(text))


@asynccontextmanager
async def _stdio_session(args: list[str], env: dict[str, str], errlog: Any) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(BRIDGE), args=args, env=env)
    async with stdio_client(params, errlog=errlog) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            await session.initialize()
            yield session


@asynccontextmanager
async def _http_session(url: str) -> AsyncIterator[ClientSession]:
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, read_timeout_seconds=TIMEOUT) as session:
            await session.initialize()
            yield session


@contextmanager
def open_stdio_bridge(args: list[str], env: dict[str, str], log_path: Path) -> Iterator[Bridge]:
    assert BRIDGE.exists(), f"{BRIDGE} is missing: install the package (pip install -e '.[mcp]')"
    with open(log_path, "w") as errlog, start_blocking_portal() as portal:
        try:
            with portal.wrap_async_context_manager(_stdio_session(args, env, errlog)) as session:
                yield Bridge(portal, session)
        except BaseException:
            errlog.flush()
            print("slowave-mcp stderr:\n" + log_path.read_text(), file=sys.stderr)
            raise


@pytest.fixture(scope="module")
def bridge(server, tmp_path_factory) -> Iterator[Bridge]:
    """One bridge process for the module; the target comes from SLOWAVE_TARGET."""
    log = tmp_path_factory.mktemp("mcp") / "slowave-mcp.log"
    with open_stdio_bridge([], {"SLOWAVE_TARGET": server.address}, log) as b:
        yield b


def data_of(envelope: dict[str, Any]) -> Any:
    assert envelope["ok"] is True, envelope
    assert set(envelope) == {"ok", "data"}, envelope
    return envelope["data"]


def error_of(envelope: dict[str, Any], code: str, retryable: bool) -> dict[str, Any]:
    assert envelope["ok"] is False, envelope
    assert set(envelope) == {"ok", "error"}, envelope
    err = envelope["error"]
    assert (err["code"], err["retryable"]) == (code, retryable), err
    assert isinstance(err["message"], str) and err["message"]
    return err


def field_error_paths(envelope: dict[str, Any]) -> list[str]:
    err = error_of(envelope, "invalid_input", False)
    assert set(err) == {"code", "message", "retryable", "field_errors"}, err
    return [f["path"] for f in err["field_errors"]]


def activate(bridge: Bridge, scope: str, task: str, **kw: Any) -> dict[str, Any]:
    return data_of(bridge.call("slowave_activate", {"task": task, "initial_goal": "Investigate", "scope": scope, **kw}))


def complete(bridge: Bridge, retrieval_id: str) -> dict[str, Any]:
    return data_of(bridge.call("slowave_feedback", {"retrieval_id": retrieval_id, "coverage": "complete"}))


def plain_commit(session_id: str, summary: str = "Checked the notes.") -> dict[str, Any]:
    return {
        "session_id": session_id,
        "final_goal": "Check the notes",
        "outcome": "success",
        "outcome_summary": summary,
        "verification": {"status": "unverified", "summary": "Nothing to verify."},
    }


def ids(items: list[dict[str, Any]], key: str) -> list[str]:
    return [i[key] for i in items]


# ------------------------------------------------------------------------------------------ tools


def test_lists_the_five_tools_with_strict_input_schemas(bridge):
    listed = bridge.portal.call(bridge.session.list_tools)
    tools = {t.name: t for t in listed.tools}
    assert sorted(tools) == sorted(
        ["slowave_activate", "slowave_remember", "slowave_recall", "slowave_feedback", "slowave_commit"]
    )
    for tool in tools.values():
        assert tool.description and tool.input_schema["type"] == "object"
        assert tool.input_schema["additionalProperties"] is False
    assert tools["slowave_commit"].input_schema["required"] == [
        "session_id",
        "final_goal",
        "outcome",
        "outcome_summary",
        "verification",
    ]
    assert tools["slowave_feedback"].input_schema["properties"]["coverage"]["enum"] == ["partial", "complete"]


def test_unknown_tool_is_a_protocol_error(bridge):
    with pytest.raises(Exception, match="unknown tool"):
        bridge.portal.call(bridge._call, "slowave_forget", {})


# ------------------------------------------------------------------------------------------ cycle


def test_full_cycle_in_json(bridge, server, scope):
    claim = f"The staging deploy of {scope} listens on port 8443"
    decision = f"Deploys of {scope} go through the blue-green switch"

    first = activate(bridge, scope, "Find out why staging deploys time out")
    assert set(first) == ACTIVATE_KEYS  # no cursor, no accessible_field: more_available is false
    assert first["memory_state"] == "cold_start" and first["continuity_state"] == "started"
    assert first["memories"] == [] and first["procedures"] == [] and first["warnings"] == []
    assert first["relevant_total"] == 0 and first["catalog_truncated"] is False and first["more_available"] is False
    assert first["retrieval_id"].startswith("ctx_") and first["session_id"].startswith("sess_")

    stored = data_of(
        bridge.call(
            "slowave_remember",
            {
                "session_id": first["session_id"],
                "scope": scope,
                "content": claim,
                "type": "fact",
                "occurred_at": "2026-08-20T11:30:00+02:00",
            },
        )
    )
    assert stored["stored"] is True and stored["disposition"] == "created" and stored["type"] == "fact"
    assert stored["scope"] == scope and stored["source_event_id"].startswith("evt_")
    batch = data_of(
        bridge.call(
            "slowave_remember",
            {
                "session_id": first["session_id"],
                "scope": scope,
                "memories": [
                    {"content": decision, "type": "decision"},
                    {"content": f"  {claim.upper()} ", "type": "fact"},
                ],
            },
        )
    )
    assert [(r["index"], r["ok"]) for r in batch["results"]] == [(0, True), (1, True)]
    assert batch["results"][0]["data"]["type"] == "decision"
    assert batch["results"][1]["data"]["disposition"] == "matched"
    assert batch["results"][1]["data"]["memory_id"] == stored["memory_id"]

    done = data_of(bridge.call("slowave_commit", plain_commit(first["session_id"], f"Staging of {scope} uses 8443.")))
    assert done["operation"] == "closed" and done["committed"] is True and done["feedback_status"] == "complete"
    assert done["episodes_formed"] == 3
    assert "session_note" in done  # activation + 3 claims + completion, no recall (11.4)
    assert "trajectory_lifecycle_filtered" not in done and "procedure_id" not in done

    second = activate(bridge, scope, f"Deploys time out again. Known: {claim}", continuity_id=first["continuity_id"])
    assert second["continuity_state"] == "continued" and second["continuity_id"] == first["continuity_id"]
    assert second["memory_state"] == "available"
    found = {m["memory_id"]: m for m in second["memories"]}
    m = found[stored["memory_id"]]
    assert m["content"] == claim and m["type"] == "fact" and m["pathway"] == "direct"
    assert set(m["ranking"]) == {"relevance", "learned", "score"} and m["ranking"]["learned"] == 0
    assert m["provenance"]["source_kind"] == "explicit_remember"

    recalled = data_of(
        bridge.call(
            "slowave_recall",
            {
                "session_id": second["session_id"],
                "scope": scope,
                "query": f"Which switch? {decision}",
                "evidence_mode": "full",
            },
        )
    )
    assert recalled["retrieval_id"].startswith("rec_") and recalled["evidence_mode"] == "full"
    assert recalled["session_id"] == second["session_id"]
    assert recalled["memories"] and all(
        set(e) >= {"evidence_id", "source_kind", "recorded_at", "truncated"} for e in recalled["evidence"]
    )
    assert all(RFC3339_Z.match(e["recorded_at"]) for e in recalled["evidence"])

    refused = error_of(bridge.call("slowave_commit", plain_commit(second["session_id"])), "incomplete_feedback", True)
    assert set(refused) == {"code", "message", "retryable", "outstanding"}
    assert refused["message"] == "feedback is incomplete"
    assert [o["retrieval_id"] for o in refused["outstanding"]] == [second["retrieval_id"], recalled["retrieval_id"]]

    fb = data_of(
        bridge.call(
            "slowave_feedback",
            {
                "items": [
                    {
                        "retrieval_id": second["retrieval_id"],
                        "coverage": "complete",
                        "memory_feedback": [{"memory_id": stored["memory_id"], "assessment": "used"}],
                    },
                    {
                        "retrieval_id": recalled["retrieval_id"],
                        "coverage": "complete",
                        "missing": ["the deploy timeout value"],
                    },
                ]
            },
        )
    )
    first_item, second_item = fb["results"]
    assert first_item["ok"] and first_item["data"]["applied"]["strengthened"] == [stored["memory_id"]]
    assert second_item["ok"] and second_item["data"]["missing"] == ["the deploy timeout value"]
    assert second_item["data"]["coverage"] == "complete" and RFC3339_Z.match(second_item["data"]["recorded_at"])

    closed = data_of(
        bridge.call(
            "slowave_commit",
            {
                **plain_commit(second["session_id"]),
                "trajectory": [
                    {"kind": "action", "summary": "Called slowave_recall"},  # lifecycle narration: filtered (11.2)
                    {"kind": "observation", "summary": f"The deploy of {scope} listens on 8443", "status": "succeeded"},
                ],
            },
        )
    )
    assert closed["operation"] == "closed" and "session_note" not in closed  # the session made a recall
    assert closed["trajectory_lifecycle_filtered"] == 1 and closed["episodes_formed"] == 1


def test_occurred_at_offset_reaches_the_service_as_utc(bridge, scope):
    claim = f"Nightly builds of {scope} run at 02:00 UTC"
    a = activate(bridge, scope, "Store a schedule")
    data_of(
        bridge.call(
            "slowave_remember",
            {
                "session_id": a["session_id"],
                "scope": scope,
                "content": claim,
                "type": "fact",
                "occurred_at": "2026-08-20T11:30:00.25+02:00",
            },
        )
    )
    b = activate(bridge, scope, f"When? {claim}")
    rec = data_of(bridge.call("slowave_recall", {"session_id": b["session_id"], "scope": scope, "query": claim}))
    assert [e["occurred_at"] for e in rec["evidence"] if "occurred_at" in e] == ["2026-08-20T09:30:00.250Z"]
    for r in (b, rec):
        complete(bridge, r["retrieval_id"])
    for s in (a, b):
        data_of(bridge.call("slowave_commit", plain_commit(s["session_id"])))


# ------------------------------------------------------------------------------------------ 18, 25


def test_s18_json_page_size(bridge, server, stub, scope):
    contents = [f"Fact number {i} about {scope} is recorded" for i in range(7)]
    seed_memories(stub, scope, contents)
    goals = [f"Rotate credential {i} of {scope}" for i in range(4)]
    for goal in goals:  # four applicable procedures, one more than a page holds
        s = support.activate(stub, scope, task="capture a procedure", initial_goal="capture")
        support.assess_all(stub, s)
        support.commit(stub, s.session_id, procedure=pb.CommitProcedure(goal=goal, summary="Rotate it."))
    task = "Recall everything: " + ". ".join(contents + goals)

    before = server.snapshot()
    assert field_error_paths(
        bridge.call("slowave_activate", {"task": task, "initial_goal": "g", "scope": scope, "page_size": 11})
    ) == ["page_size"]
    for bad in ("3", 3.0):
        envelope = bridge.call(
            "slowave_activate", {"task": task, "initial_goal": "g", "scope": scope, "page_size": bad}
        )
        assert field_error_paths(envelope) == ["page_size"], bad
    assert server.snapshot() == before  # no session, retrieval or continuity token

    page = activate(bridge, scope, task)
    assert len(page["memories"]) == 5 and len(page["procedures"]) == 3
    assert page["relevant_total"] == 7 and page["more_available"] is True
    assert page["continue_from"].startswith("cur_")
    assert page["accessible_field"]["extra_candidates"] == 3  # 2 memories and 1 procedure
    assert page["accessible_field"]["kinds"] == ["fact", "procedure"]
    three = activate(bridge, scope, task, page_size=3)
    assert len(three["memories"]) == 3
    for r in (page, three):
        complete(bridge, r["retrieval_id"])


def test_s25_json_occurred_at(bridge, server, scope):
    a = activate(bridge, scope, "Store facts")
    before = server.snapshot()
    outer = bridge.call(
        "slowave_remember",
        {
            "session_id": a["session_id"],
            "scope": scope,
            "occurred_at": "2026-08-20T09:30:00Z",
            "memories": [{"content": f"Alpha of {scope}", "type": "fact"}],
        },
    )
    assert field_error_paths(outer) == ["occurred_at"]
    no_offset = bridge.call(
        "slowave_remember",
        {
            "session_id": a["session_id"],
            "scope": scope,
            "type": "fact",
            "content": f"Beta of {scope}",
            "occurred_at": "2026-08-20T09:30:00",
        },
    )
    assert field_error_paths(no_offset) == ["occurred_at"]
    assert server.snapshot() == before  # nothing stored

    mixed = data_of(
        bridge.call(
            "slowave_remember",
            {
                "session_id": a["session_id"],
                "scope": scope,
                "memories": [
                    {"content": f"Gamma of {scope}", "type": "fact", "occurred_at": "2026-08-20T09:30:00Z"},
                    {"content": f"Delta of {scope}", "type": "fact", "occurred_at": "2026-08-20T09:30:00"},
                    {"content": f"Epsilon of {scope}", "type": "fact"},
                ],
            },
        )
    )["results"]
    assert [(r["index"], r["ok"]) for r in mixed] == [(0, True), (1, False), (2, True)]
    assert mixed[1] == {
        "index": 1,
        "ok": False,
        "error": {"code": "invalid_input", "message": mixed[1]["error"]["message"], "retryable": False},
    }
    assert "memories[1].occurred_at" in mixed[1]["error"]["message"]
    later = activate(bridge, scope, f"Gamma of {scope}. Delta of {scope}. Epsilon of {scope}.")
    assert sorted(m["content"] for m in later["memories"]) == sorted([f"Epsilon of {scope}", f"Gamma of {scope}"])
    complete(bridge, later["retrieval_id"])
    for s in (a, later):
        data_of(bridge.call("slowave_commit", plain_commit(s["session_id"])))


# ------------------------------------------------------------------------------------------ 34, 35, 41


def test_s34_json_bogus_assessment_rejects_only_that_entry(bridge, stub, scope):
    x, y = seed_memories(stub, scope, [CLAIM_42, CLAIM_17])
    a = activate(bridge, scope, f"Notes: {CLAIM_42}. {CLAIM_17}.")
    assert sorted(ids(a["memories"], "memory_id")) == sorted([x, y])
    record = data_of(
        bridge.call(
            "slowave_feedback",
            {
                "retrieval_id": a["retrieval_id"],
                "memory_feedback": [
                    {"memory_id": x, "assessment": "bogus", "stale_reason": "outdated"},
                    {"memory_id": y, "assessment": "used"},
                ],
            },
        )
    )
    assert [(r["target_kind"], r["target_id"], r["reason"], r["field"]) for r in record["rejected"]] == [
        ("memory", x, "invalid_memory_assessment", "assessment")
    ]
    assert record["applied"]["strengthened"] == [y]
    assert record["outstanding"] == {"memory_ids": [x], "procedure_ids": []}
    assert len(record["accepted_event_ids"]) == 2  # the `used` row and the retrieval-level row
    complete(bridge, a["retrieval_id"])
    data_of(bridge.call("slowave_commit", plain_commit(a["session_id"])))


def test_s35_json_bogus_coverage_fails_the_whole_call(bridge, server, stub, scope):
    (x,) = seed_memories(stub, scope, [CLAIM_EXTRA])
    a = activate(bridge, scope, f"Notes: {CLAIM_EXTRA}.")
    before = server.snapshot()
    envelope = bridge.call(
        "slowave_feedback",
        {
            "retrieval_id": a["retrieval_id"],
            "coverage": "bogus",
            "memory_feedback": [{"memory_id": x, "assessment": "used"}],
        },
    )
    assert field_error_paths(envelope) == ["coverage"]
    assert server.snapshot() == before
    complete(bridge, a["retrieval_id"])


def test_s41_json_feedback_with_an_outcome_key_is_refused(bridge, server, stub, scope):
    (x,) = seed_memories(stub, scope, [CLAIM_EXTRA])
    a = activate(bridge, scope, f"Notes: {CLAIM_EXTRA}.")
    before = server.snapshot()
    envelope = bridge.call(
        "slowave_feedback",
        {
            "retrieval_id": a["retrieval_id"],
            "outcome": "success",
            "memory_feedback": [{"memory_id": x, "assessment": "used"}],
        },
    )
    error_of(envelope, "invalid_input", False)
    assert envelope["error"]["field_errors"] == [{"path": "outcome", "message": "extra input is not permitted"}]
    assert server.snapshot() == before
    complete(bridge, a["retrieval_id"])


# ------------------------------------------------------------------------------------------ 57


SEED_FEEDBACK_EXAMPLE = """{
  "retrieval_id": "ctx_a1b2c3d4e5f6",
  "memory_feedback": [
    {
      "memory_id": "sch_42",
      "assessment": "used"
    },
    {
      "memory_id": "sch_17",
      "assessment": "irrelevant"
    }
  ],
  "coverage": "complete"
}"""


def substitute(text: str, **ids: str) -> str:
    """Placeholder ids → real ids, as whole JSON strings (so `sch_42` never touches `sch_420`)."""
    for placeholder, real in ids.items():
        assert f'"{placeholder}"' in text, placeholder
        text = text.replace(f'"{placeholder}"', json.dumps(real))
    return text


def test_s57_json_seed_feedback_example_verbatim(bridge, stub, scope):
    sch_42, sch_17, extra = seed_memories(stub, scope, [CLAIM_42, CLAIM_17, CLAIM_EXTRA])
    a = activate(bridge, scope, f"Check the notes: {CLAIM_42}. {CLAIM_17}. {CLAIM_EXTRA}.")
    exposed = ids(a["memories"], "memory_id")
    assert {sch_42, sch_17, extra} <= set(exposed)
    assert all(m["ranking"]["learned"] == 0 for m in a["memories"])  # precondition: fresh, never assessed

    record = data_of(
        bridge.call_json(
            "slowave_feedback",
            substitute(SEED_FEEDBACK_EXAMPLE, ctx_a1b2c3d4e5f6=a["retrieval_id"], sch_42=sch_42, sch_17=sch_17),
        )
    )
    others = [m for m in exposed if m not in (sch_42, sch_17)]
    assert record["retrieval_id"] == a["retrieval_id"] and record["session_id"] == a["session_id"]
    assert record["coverage"] == "complete" and record["requested_coverage"] == "complete"
    assert record["implicitly_assessed"] == {
        "memory_ids": others,
        "procedure_ids": ids(a["procedures"], "procedure_id"),
    }
    implicit = len(others) + len(a["procedures"])
    assert len(record["accepted_event_ids"]) == 2 + implicit + 1  # two targets, implicit rows, retrieval row
    assert len(set(record["accepted_event_ids"])) == len(record["accepted_event_ids"])
    assert all(FBE.match(i) for i in record["accepted_event_ids"])
    assert record["rejected"] == []
    assert record["outstanding"] == {"memory_ids": [], "procedure_ids": []}
    assert record["applied"] == {
        "strengthened": [sch_42],
        "weakened": [sch_17],
        "unchanged": [],
        "retired": [],
        "replacements": [],
    }
    assert record["missing"] == [] and "retrieval_quality" not in record
    assert RFC3339_Z.match(record["recorded_at"])

    b = activate(bridge, scope, f"Check the notes: {CLAIM_42}. {CLAIM_17}. {CLAIM_EXTRA}.")  # the same cue
    learned = {m["memory_id"]: m["ranking"]["learned"] for m in b["memories"]}
    assert learned[sch_42] == 0.05 and learned[sch_17] == -0.05
    complete(bridge, b["retrieval_id"])
    for s in (a, b):
        data_of(bridge.call("slowave_commit", plain_commit(s["session_id"])))


# ------------------------------------------------------------------------------------------ 58

SEED_COMMIT_SUCCESSFUL = """{
  "session_id": "sess_abc123",
  "final_goal": "Fix the double-close race in the session reaper",
  "outcome": "success",
  "outcome_summary": "Added a threading lock around the reaper's close logic; the race no longer reproduces under 100-thread stress testing.",
  "verification": {
    "status": "verified",
    "summary": "Full integration test suite passed. Ran the stress test 3 times with 100 concurrent threads — zero double-close errors."
  }
}"""

SEED_COMMIT_WITH_PROCEDURE = """{
  "session_id": "sess_abc123",
  "final_goal": "Deploy the new auth service to staging",
  "outcome": "success",
  "outcome_summary": "Auth service v2.3.1 deployed to staging and health checks passing.",
  "verification": {
    "status": "verified",
    "summary": "Checked /health endpoint returned 200. Smoke-tested login flow with a test account."
  },
  "procedure": {
    "goal": "Deploy a new service version to the staging environment",
    "summary": "Build the Docker image, push to the registry, update the Helm chart version, and run the staging deploy workflow.",
    "context": {
      "environment": "staging",
      "infra": "Kubernetes",
      "ci": "GitHub Actions"
    },
    "steps": [
      "Run `docker build -t registry.example.com/auth-service:<version> .` from the repo root.",
      "Push with `docker push registry.example.com/auth-service:<version>`.",
      "Update `helm/auth-service/values-staging.yaml` with the new image tag.",
      "Trigger the `deploy-staging` GitHub Actions workflow.",
      "Verify the rollout with `kubectl rollout status deployment/auth-service -n staging`."
    ],
    "caveats": [
      "The staging namespace requires manual approval in GitHub Actions for image tags that are not semver.",
      "Health check takes up to 90 seconds after pod restart; do not declare failure earlier."
    ]
  }
}"""

SEED_COMMIT_WITH_TRAJECTORY = """{
  "session_id": "sess_abc123",
  "final_goal": "Identify why the nightly build is failing",
  "outcome": "partial",
  "outcome_summary": "Traced the failure to a missing environment variable in the CI config; fix is proposed but not yet merged.",
  "verification": {
    "status": "partially_verified",
    "summary": "Reproduced the failure locally by unsetting the variable. PR opened but not yet merged or CI-verified."
  },
  "trajectory": [
    {"kind": "action", "summary": "Reviewed the nightly build log for the past 7 days.", "status": "succeeded"},
    {"kind": "observation", "summary": "Failures started on 2026-08-20, correlating with a config change PR.", "status": "succeeded"},
    {"kind": "action", "summary": "Diffed the config change PR against the prior working config.", "status": "succeeded"},
    {"kind": "observation", "summary": "Found that SERVICE_TOKEN was removed from the CI environment variable list.", "status": "succeeded"},
    {"kind": "action", "summary": "Opened PR #1042 to restore SERVICE_TOKEN in the CI config.", "status": "succeeded"}
  ]
}"""


def seed_incomplete_feedback(outstanding: list[dict[str, Any]]) -> dict[str, Any]:
    """The seed's error, verbatim but for the real outstanding ids (4.7)."""
    return {
        "ok": False,
        "error": {
            "code": "incomplete_feedback",
            "message": "feedback is incomplete",
            "retryable": True,
            "outstanding": outstanding,
        },
    }


def outstanding_of(*retrievals: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        {
            "retrieval_id": r["retrieval_id"],
            "memory_ids": ids(r["memories"], "memory_id"),
            "procedure_ids": ids(r["procedures"], "procedure_id"),
        }
        for r in retrievals
    ]


def assert_closed(done: dict[str, Any], session_id: str, outcome: str, verification_status: str) -> None:
    assert done["session_id"] == session_id and done["committed"] is True
    assert done["operation"] == "closed" and done["feedback_status"] == "complete"
    assert (done["outcome"], done["verification_status"]) == (outcome, verification_status)
    for absent in ("trajectory_lifecycle_filtered", "already_ended", "trajectory_ignored"):
        assert absent not in done


def test_s58_json_seed_commit_successful_task_with_verification(bridge, stub, scope):
    (memory,) = seed_memories(stub, scope, [CLAIM_42])
    s = activate(bridge, scope, f"Fix the double-close race in the session reaper. Note: {CLAIM_42}")
    assert ids(s["memories"], "memory_id") == [memory]
    claim = f"The reaper and Commit of {scope} both lock the session row"
    for _ in range(2):  # the second is MATCHED, and still an episode (11.5)
        data_of(
            bridge.call(
                "slowave_remember", {"session_id": s["session_id"], "scope": scope, "content": claim, "type": "fact"}
            )
        )
    example = substitute(SEED_COMMIT_SUCCESSFUL, sess_abc123=s["session_id"])

    assert bridge.call_json("slowave_commit", example) == seed_incomplete_feedback(outstanding_of(s))
    data_of(
        bridge.call(
            "slowave_feedback",
            {"retrieval_id": s["retrieval_id"], "memory_feedback": [{"memory_id": memory, "assessment": "used"}]},
        )
    )
    done = data_of(bridge.call_json("slowave_commit", example))
    assert_closed(done, s["session_id"], "success", "verified")
    assert done["episodes_formed"] == 2
    assert "session_note" in done and isinstance(done["session_note"], str)  # 4 session events, no recall
    assert "procedure_id" not in done


def test_s58_json_seed_commit_with_procedure(bridge, stub, scope):
    (memory,) = seed_memories(stub, scope, [CLAIM_42])
    s = activate(bridge, scope, f"Deploy the new auth service to staging. Note: {CLAIM_42}")
    assert memory in ids(s["memories"], "memory_id")
    example = substitute(SEED_COMMIT_WITH_PROCEDURE, sess_abc123=s["session_id"])

    assert bridge.call_json("slowave_commit", example) == seed_incomplete_feedback(outstanding_of(s))
    complete(bridge, s["retrieval_id"])
    done = data_of(bridge.call_json("slowave_commit", example))
    assert_closed(done, s["session_id"], "success", "verified")
    assert done["procedure_id"] == f"proc_{s['session_id']}"
    assert done["episodes_formed"] == 0 and "session_note" not in done  # activation + completion only

    given = json.loads(SEED_COMMIT_WITH_PROCEDURE)["procedure"]
    later = activate(bridge, scope, given["goal"], task_context={"environment": "staging"})
    procedures = {p["procedure_id"]: p for p in later["procedures"]}
    p = procedures[done["procedure_id"]]
    assert (p["goal"], p["summary"], p["context"]) == (given["goal"], given["summary"], given["context"])
    assert p["steps"] == given["steps"] and p["caveats"] == given["caveats"]
    assert p["outcome"] == "success" and p["verification_status"] == "verified"
    assert p["outcome_summary"] == json.loads(SEED_COMMIT_WITH_PROCEDURE)["outcome_summary"]
    assert RFC3339_Z.match(p["created_at"])
    assert set(p["evidence"]) == {"used", "not_used", "unassessable", "helped", "no_effect", "harmed", "unknown"}
    assert p["contributions"] == [] and set(p["ranking"]) == {"relevance", "learned", "score"}
    assessed = data_of(
        bridge.call(
            "slowave_feedback",
            {
                "retrieval_id": later["retrieval_id"],
                "coverage": "complete",
                "procedure_feedback": [
                    {
                        "procedure_id": p["procedure_id"],
                        "use": "used",
                        "effect": "helped",
                        "contribution": "Followed every step.",
                    }
                ],
            },
        )
    )
    assert assessed["rejected"] == [] and assessed["outstanding"] == {"memory_ids": [], "procedure_ids": []}
    data_of(bridge.call("slowave_commit", plain_commit(later["session_id"])))


def test_s58_json_seed_commit_with_trajectory(bridge, server, stub, scope):
    (memory,) = seed_memories(stub, scope, [CLAIM_42])
    s = activate(bridge, scope, f"Identify why the nightly build is failing. Note: {CLAIM_42}")
    data_of(
        bridge.call(
            "slowave_remember",
            {
                "session_id": s["session_id"],
                "scope": scope,
                "type": "fact",
                "content": f"The nightly build of {scope} needs SERVICE_TOKEN",
            },
        )
    )
    rec = data_of(
        bridge.call("slowave_recall", {"session_id": s["session_id"], "scope": scope, "query": f"Recall: {CLAIM_42}"})
    )
    assert memory in ids(s["memories"], "memory_id") and memory in ids(rec["memories"], "memory_id")
    example = substitute(SEED_COMMIT_WITH_TRAJECTORY, sess_abc123=s["session_id"])

    assert bridge.call_json("slowave_commit", example) == seed_incomplete_feedback(outstanding_of(s, rec))
    complete(bridge, s["retrieval_id"])
    assert bridge.call_json("slowave_commit", example) == seed_incomplete_feedback(outstanding_of(rec))
    complete(bridge, rec["retrieval_id"])
    done = data_of(bridge.call_json("slowave_commit", example))
    assert_closed(done, s["session_id"], "partial", "partially_verified")
    assert done["episodes_formed"] == 5 + 1  # five stored entries and the remembered claim
    assert "session_note" not in done  # the session made a recall call

    stored = json.loads(server.admin("session", s["session_id"], "--json"))["trajectory"]
    sent = json.loads(SEED_COMMIT_WITH_TRAJECTORY)["trajectory"]
    assert [(e["kind"], e["status"], e["summary"]) for e in stored] == [
        (e["kind"], e["status"], e["summary"]) for e in sent
    ]


def test_s58_json_seed_placeholder_session_is_a_lookup_error(bridge, server):
    """A literal placeholder only yields a lookup error, never a shape error (4.7)."""
    before = server.snapshot()
    for example in (SEED_COMMIT_SUCCESSFUL, SEED_COMMIT_WITH_PROCEDURE, SEED_COMMIT_WITH_TRAJECTORY):
        err = error_of(bridge.call_json("slowave_commit", example), "invalid_input", False)
        assert set(err) == {"code", "message", "retryable"}  # NOT_FOUND carries no BadRequest
    assert server.snapshot() == before


# ------------------------------------------------------------------------------------------ 62


def test_s62_json_batch_item_with_an_unknown_key_fails_alone(bridge, scope, stub):
    (x,) = seed_memories(stub, scope, [CLAIM_EXTRA])
    a = activate(bridge, scope, f"Notes: {CLAIM_EXTRA}.")
    r1 = data_of(bridge.call("slowave_recall", {"session_id": a["session_id"], "scope": scope, "query": CLAIM_EXTRA}))
    r2 = data_of(
        bridge.call("slowave_recall", {"session_id": a["session_id"], "scope": scope, "query": f"Again: {CLAIM_EXTRA}"})
    )
    assert all(ids(r["memories"], "memory_id") == [x] for r in (a, r1, r2))

    results = data_of(
        bridge.call(
            "slowave_feedback",
            {
                "items": [
                    {"retrieval_id": a["retrieval_id"], "memory_feedback": [{"memory_id": x, "assessment": "used"}]},
                    {"retrieval_id": r1["retrieval_id"], "coverage": "complete", "outcome": "success"},
                    {"retrieval_id": r2["retrieval_id"], "coverage": "complete"},
                ]
            },
        )
    )["results"]
    assert [r["ok"] for r in results] == [True, False, True]
    assert results[1] == {
        "ok": False,
        "error": {"code": "invalid_input", "message": results[1]["error"]["message"], "retryable": False},
    }
    assert "items[1].outcome" in results[1]["error"]["message"]
    assert results[0]["data"]["retrieval_id"] == a["retrieval_id"]
    assert results[0]["data"]["applied"]["strengthened"] == [x]
    assert results[2]["data"]["retrieval_id"] == r2["retrieval_id"] and results[2]["data"]["coverage"] == "complete"

    # Items 1 and 3 were recorded, item 2 was not: only its retrieval still blocks the commit.
    assert bridge.call("slowave_commit", plain_commit(a["session_id"])) == seed_incomplete_feedback(outstanding_of(r1))
    complete(bridge, r1["retrieval_id"])
    data_of(bridge.call("slowave_commit", plain_commit(a["session_id"])))


# ------------------------------------------------------------------------------------------ HTTP, keys

API_KEY = "swk_mcp-bridge-0123456789abcdefghijklmnopqrstu"


@contextmanager
def http_bridge(args: list[str]) -> Iterator[str]:
    """`slowave-mcp --http 127.0.0.1:0`; yields the URL it announces on stderr."""
    proc = subprocess.Popen(
        [str(BRIDGE), "--http", "127.0.0.1:0", *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []

    def pump() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.put(line)

    threading.Thread(target=pump, daemon=True).start()

    def announced() -> str | None:
        while not lines.empty():
            seen.append(lines.get())
        assert proc.poll() is None, "slowave-mcp exited:\n" + "".join(seen)
        found = [m.group(0) for line in seen if (m := re.search(r"http://\S+/mcp", line))]
        return found[0] if found else None

    try:
        yield wait_until(announced, timeout=90, what="slowave-mcp to announce its HTTP address")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=30)


def test_streamable_http_with_an_api_key(make_server):
    keyed = make_server(api_keys=(KeyEntry("acme", hash_key(API_KEY)),))
    scope = new_scope()
    with http_bridge(["--target", keyed.address, "--api-key", API_KEY]) as url, start_blocking_portal() as portal:
        with portal.wrap_async_context_manager(_http_session(url)) as session:
            b = Bridge(portal, session)
            a = activate(b, scope, "Check the HTTP transport")
            assert a["memory_state"] == "cold_start"
            data_of(b.call("slowave_commit", plain_commit(a["session_id"])))
            err = error_of(b.call("slowave_commit", {"session_id": a["session_id"]}), "invalid_input", False)
            assert sorted(f["path"] for f in err["field_errors"]) == sorted(
                ["final_goal", "outcome", "outcome_summary", "verification"]
            )

    # Without the key the same server refuses, in the seed's shape (4.2: unauthenticated).
    connection = connect(keyed.address)
    try:
        refused = execute("slowave_activate", {"task": "t", "initial_goal": "g", "scope": scope}, connection.invoke)
    finally:
        connection.close()
    assert set(error_of(refused, "unauthenticated", False)) == {"code", "message", "retryable"}
