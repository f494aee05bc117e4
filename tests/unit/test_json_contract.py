"""The JSON bridge's translation (behaviour §4.6), called directly: JSON → protobuf requests, protobuf
responses and gRPC statuses → the seed's `{ok, data}` / `{ok: false, error}` envelopes.

`execute` gets a recording fake in place of the network, so each test sees exactly which request
the bridge would send, or that it sends none.
"""

from __future__ import annotations

import json
import socket
from datetime import UTC, datetime
from typing import Any

import grpc
import jsonschema
import pytest
from google.protobuf import any_pb2, message_factory, struct_pb2
from google.protobuf.message import Message
from google.rpc import code_pb2, error_details_pb2, status_pb2
from grpc_status import rpc_status

from slowave.v1 import errors_pb2
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res
from slowave_mcp.channel import connect
from slowave_mcp.json_contract import TOOLS, execute, translate
from slowave_mcp.json_to_proto import fill_message
from slowave_mcp.proto_to_json import render_message, render_status
from slowave_mcp.tools import DESCRIPTIONS, input_schema

SCOPE = "project:alpha"


class Recorder:
    """Stands in for the gRPC call: records each request and answers with a canned response."""

    def __init__(self, response: Message | None = None, raises: Exception | None = None) -> None:
        self.calls: list[tuple[str, Message]] = []
        self.response, self.raises = response, raises

    def __call__(self, rpc: str, request: Message) -> Message:
        self.calls.append((rpc, request))
        if self.raises is not None:
            raise self.raises
        assert self.response is not None
        return self.response

    @property
    def request(self) -> Message:
        assert len(self.calls) == 1, self.calls
        return self.calls[0][1]


class FakeRpcError(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """What a failed unary call raises: code, details, and the rich status in the trailers."""

    def __init__(self, status: status_pb2.Status | None, code: grpc.StatusCode, message: str) -> None:
        self._code, self._message = code, message
        self._trailers = rpc_status.to_status(status).trailing_metadata if status is not None else ()

    def code(self):
        return self._code

    def details(self):
        return self._message

    def trailing_metadata(self):
        return self._trailers

    def initial_metadata(self):
        return ()

    def is_active(self):
        return False

    def time_remaining(self):
        return None

    def cancel(self):
        return False

    def add_callback(self, callback):
        return False


def packed(*details: Message) -> list[any_pb2.Any]:
    out = []
    for d in details:
        a = any_pb2.Any()
        a.Pack(d)
        out.append(a)
    return out


def error_info(code: str, retryable: bool, reason: str = "X") -> error_details_pb2.ErrorInfo:
    return error_details_pb2.ErrorInfo(
        reason=reason, domain="slowave.ai", metadata={"code": code, "retryable": "true" if retryable else "false"}
    )


def rpc_error(grpc_code: grpc.StatusCode, message: str, *details: Message) -> FakeRpcError:
    status = status_pb2.Status(code=grpc_code.value[0], message=message, details=packed(*details))
    return FakeRpcError(status, grpc_code, message)


def bad_request(*paths: str) -> error_details_pb2.BadRequest:
    return error_details_pb2.BadRequest(
        field_violations=[
            error_details_pb2.BadRequest.FieldViolation(field=p, description=f"{p} is wrong") for p in paths
        ]
    )


def invalid(envelope: dict[str, Any]) -> list[str]:
    """The field_errors paths of an invalid_input envelope (and checks its fixed parts)."""
    assert envelope["ok"] is False, envelope
    err = envelope["error"]
    assert err["code"] == "invalid_input" and err["retryable"] is False, err
    assert set(err) == {"code", "message", "retryable", "field_errors"}, err
    return [f["path"] for f in err["field_errors"]]


def activate_args(**kw: Any) -> dict[str, Any]:
    return {"task": "Fix the reaper", "initial_goal": "Fix it", "scope": SCOPE, **kw}


def commit_args(**kw: Any) -> dict[str, Any]:
    return {
        "session_id": "sess_1",
        "final_goal": "Fix it",
        "outcome": "success",
        "outcome_summary": "Fixed.",
        "verification": {"status": "verified", "summary": "Tests pass."},
        **kw,
    }


def record(**kw: Any) -> pb.FeedbackRecord:
    kw.setdefault("retrieval_id", "ctx_1")
    kw.setdefault("session_id", "sess_1")
    r = pb.FeedbackRecord(**kw)
    for name in ("implicitly_assessed", "outstanding", "applied"):
        getattr(r, name).SetInParent()
    r.recorded_at.FromDatetime(datetime(2026, 8, 20, 9, 30, tzinfo=UTC))
    return r


# ------------------------------------------------------------------------------ JSON → protobuf


def test_keys_are_protobuf_field_names_and_a_full_request_translates():
    fake = Recorder(pb.ActivateResponse())
    envelope = execute(
        "slowave_activate",
        activate_args(
            page_size=3,
            continuity_id="cont_" + "a" * 43,
            semantic_context="more",
            task_context={"env": "staging", "tools": ["helm", "kubectl"], "depth": {"k": 1.5}},
        ),
        fake,
    )
    assert envelope["ok"] is True
    rpc, req = fake.calls[0]
    assert rpc == "Activate"
    assert req.task == "Fix the reaper" and req.initial_goal == "Fix it" and req.scope == SCOPE
    assert req.page_size == 3 and req.HasField("page_size")
    assert req.continuity_id == "cont_" + "a" * 43 and req.semantic_context == "more"
    assert dict(req.task_context["depth"]) == {"k": 1.5}
    assert list(req.task_context["tools"]) == ["helm", "kubectl"]


def test_camel_case_json_names_are_unknown_keys():
    args = {"task": "t", "initialGoal": "g", "scope": SCOPE, "pageSize": 3}
    fake = Recorder(pb.ActivateResponse())
    envelope = execute("slowave_activate", args, fake)
    assert invalid(envelope) == ["initialGoal", "pageSize"]
    assert all(f["message"] == "extra input is not permitted" for f in envelope["error"]["field_errors"])
    assert fake.calls == []


def test_unknown_keys_at_every_level_are_all_reported_with_their_paths():
    args = commit_args(
        verification={"status": "verified", "summary": "ok", "confidence": 0.9},
        procedure={"summary": "s", "owner": "me"},
        trajectory=[{"kind": "action", "summary": "a"}, {"kind": "action", "summary": "b", "at": 1}],
        outcome_reason="luck",
    )
    fake = Recorder()
    paths = invalid(execute("slowave_commit", args, fake))
    assert sorted(paths) == sorted(["verification.confidence", "procedure.owner", "trajectory[1].at", "outcome_reason"])
    assert fake.calls == []


def test_struct_contents_are_passed_through_for_the_service_to_judge():
    """Unknown keys inside a Struct are data, and a null inside one is the service's rule (3.5)."""
    fake = Recorder(pb.CommitResponse())
    execute(
        "slowave_commit",
        commit_args(
            procedure={"summary": "s", "context": {"Python Version": "3.12", "x": None, "tools": [{"name": "helm"}]}}
        ),
        fake,
    )
    context = fake.request.procedure.context
    assert context["Python Version"] == "3.12"
    assert context.fields["x"].WhichOneof("kind") == "null_value"
    assert context["tools"][0]["name"] == "helm"


@pytest.mark.parametrize(
    "path,args",
    [
        ("task", activate_args(task=None)),
        ("task_context", activate_args(task_context=None)),
        ("verification.summary", commit_args(verification={"status": "verified", "summary": None})),
        ("trajectory[0]", commit_args(trajectory=[None])),
        ("procedure.steps[1]", commit_args(procedure={"steps": ["a", None]})),
    ],
)
def test_null_for_any_key_is_invalid_input(path, args):
    tool = "slowave_activate" if "task" in args else "slowave_commit"
    fake = Recorder()
    envelope = execute(tool, args, fake)
    assert invalid(envelope) == [path]
    assert envelope["error"]["field_errors"][0]["message"] == "must not be null"
    assert fake.calls == []


@pytest.mark.parametrize("value", ["3", 3.0, True, None, [3], 2**31])
def test_json_types_must_match_page_size(value):
    """Scenario 18's JSON half: `"3"`, `3.0` and `true` are not integers."""
    fake = Recorder()
    assert invalid(execute("slowave_activate", activate_args(page_size=value), fake)) == ["page_size"]
    assert fake.calls == []


def test_page_size_out_of_range_is_left_to_the_service():
    """11 is a well-typed integer: the service owns the 1..10 rule and answers it (scenario 18)."""
    fake = Recorder(pb.ActivateResponse())
    execute("slowave_activate", activate_args(page_size=11), fake)
    assert fake.request.page_size == 11


@pytest.mark.parametrize(
    "tool,args,path",
    [
        ("slowave_activate", activate_args(task=42), "task"),
        ("slowave_activate", activate_args(task_context=["env"]), "task_context"),
        ("slowave_activate", activate_args(task_context="env=staging"), "task_context"),
        ("slowave_commit", commit_args(verification="verified"), "verification"),
        ("slowave_commit", commit_args(trajectory={"kind": "action"}), "trajectory"),
        (
            "slowave_commit",
            commit_args(verification={"status": "verified", "summary": "s", "evidence_refs": "ci/1"}),
            "verification.evidence_refs",
        ),
        (
            "slowave_commit",
            commit_args(verification={"status": "verified", "summary": "s", "evidence_refs": [7]}),
            "verification.evidence_refs[0]",
        ),
        ("slowave_feedback", {"retrieval_id": "ctx_1", "missing": [True]}, "missing[0]"),
    ],
)
def test_wrong_json_types_are_invalid_input_at_their_path(tool, args, path):
    assert invalid(execute(tool, args, Recorder())) == [path]


def test_arguments_must_be_an_object_and_absent_arguments_are_empty():
    fake = Recorder(pb.FeedbackResponse())
    execute("slowave_feedback", None, fake)
    assert fake.request == pb.FeedbackRequest()  # the service answers "either retrieval_id or items"
    refused = Recorder()
    assert invalid(execute("slowave_feedback", [["retrieval_id", "ctx_1"]], refused)) == [""]  # type: ignore[arg-type]
    assert refused.calls == []


@pytest.mark.parametrize(
    "word,number",
    [
        ("success", res.OUTCOME_SUCCESS),
        ("partial", res.OUTCOME_PARTIAL),
        ("failure", res.OUTCOME_FAILURE),
        ("unknown", res.OUTCOME_UNKNOWN),  # a real value; the service rejects it on input (13.2)
    ],
)
def test_enum_strings_are_lowercase_names_without_prefix(word, number):
    fake = Recorder(pb.CommitResponse())
    execute(
        "slowave_commit",
        commit_args(
            outcome=word,
            verification={"status": "partially_verified", "summary": "s"},
            trajectory=[{"kind": "observation", "summary": "x", "status": "failed"}],
        ),
        fake,
    )
    assert fake.request.outcome == number
    assert fake.request.verification.status == res.VERIFICATION_STATUS_PARTIALLY_VERIFIED
    assert fake.request.trajectory[0].kind == pb.TRAJECTORY_KIND_OBSERVATION
    assert fake.request.trajectory[0].status == pb.TRAJECTORY_STATUS_FAILED


def test_multi_word_enum_values():
    fake = Recorder(pb.RememberResponse())
    execute("slowave_remember", {"session_id": "s", "scope": SCOPE, "content": "c", "type": "open_question"}, fake)
    assert fake.request.type == res.MEMORY_TYPE_OPEN_QUESTION


@pytest.mark.parametrize("word", ["unspecified", "SUCCESS", "OUTCOME_SUCCESS", "Success", "bogus", "", 1])
def test_unspecified_prefixed_uppercase_unknown_or_non_string_enum_values_are_invalid(word):
    envelope = execute("slowave_commit", commit_args(outcome=word), Recorder())
    assert invalid(envelope) == ["outcome"]
    assert "success, partial, failure" in envelope["error"]["field_errors"][0]["message"]


@pytest.mark.parametrize(
    "tool,args,path",
    [
        ("slowave_feedback", {"retrieval_id": "ctx_1", "coverage": "bogus"}, "coverage"),  # scenario 35
        ("slowave_feedback", {"retrieval_id": "ctx_1", "coverage": "unspecified"}, "coverage"),
        ("slowave_feedback", {"items": [{"retrieval_id": "ctx_1"}], "coverage": "everything"}, "coverage"),
        (
            "slowave_recall",
            {"session_id": "s", "scope": SCOPE, "query": "q", "evidence_mode": "unspecified"},
            "evidence_mode",
        ),
        (
            "slowave_commit",
            commit_args(trajectory=[{"kind": "action", "summary": "a", "status": "unspecified"}]),
            "trajectory[0].status",
        ),
        ("slowave_commit", commit_args(verification={"status": "checked", "summary": "s"}), "verification.status"),
    ],
)
def test_non_label_enums_reject_unknown_strings_even_where_unspecified_has_a_default(tool, args, path):
    fake = Recorder()
    assert invalid(execute(tool, args, fake)) == [path]
    assert fake.calls == []


@pytest.mark.parametrize("word", ["bogus", "unspecified", "USED"])
def test_feedback_label_fields_send_unknown_strings_as_present_unspecified(word):
    """The one exception (4.6): the service then rejects that entry alone (10.2), siblings land."""
    fake = Recorder(pb.FeedbackResponse(record=record()))
    envelope = execute(
        "slowave_feedback",
        {
            "retrieval_id": "ctx_1",
            "memory_feedback": [
                {"memory_id": "sch_1", "assessment": word, "stale_reason": word, "relevance": word, "effect": word},
                {"memory_id": "sch_2", "assessment": "used"},
            ],
            "procedure_feedback": [{"procedure_id": "proc_1", "use": word, "effect": word}],
        },
        fake,
    )
    assert envelope["ok"] is True
    m, sibling = fake.request.memory_feedback
    assert m.assessment == pb.MEMORY_ASSESSMENT_UNSPECIFIED
    for name in ("stale_reason", "relevance", "effect"):
        assert m.HasField(name) and getattr(m, name) == 0, name
    assert sibling.assessment == pb.MEMORY_ASSESSMENT_USED and not sibling.HasField("effect")
    p = fake.request.procedure_feedback[0]
    assert p.use == pb.PROCEDURE_USE_UNSPECIFIED and p.HasField("effect") and p.effect == res.EFFECT_UNSPECIFIED


def test_feedback_labels_still_need_a_json_string():
    envelope = execute(
        "slowave_feedback",
        {
            "retrieval_id": "ctx_1",
            "memory_feedback": [
                {"memory_id": "sch_1", "assessment": 1},
                {"memory_id": "sch_2", "assessment": "used", "effect": None},
            ],
        },
        Recorder(),
    )
    assert invalid(envelope) == ["memory_feedback[0].assessment", "memory_feedback[1].effect"]


def test_feedback_labels_translate_every_valid_word():
    fake = Recorder(pb.FeedbackResponse(record=record()))
    execute(
        "slowave_feedback",
        {
            "retrieval_id": "ctx_1",
            "memory_feedback": [
                {
                    "memory_id": "sch_1",
                    "assessment": "stale",
                    "stale_reason": "superseded",
                    "replacement_memory_id": "sch_2",
                    "reason": "moved",
                    "relevance": "uncertain",
                    "effect": "unknown",
                },
                {"memory_id": "sch_3", "assessment": "already_known"},
            ],
            "procedure_feedback": [{"procedure_id": "proc_1", "use": "not_used", "effect": "no_effect"}],
        },
        fake,
    )
    m = fake.request.memory_feedback[0]
    assert (m.assessment, m.stale_reason, m.relevance, m.effect) == (
        pb.MEMORY_ASSESSMENT_STALE,
        pb.STALE_REASON_SUPERSEDED,
        pb.RELEVANCE_UNCERTAIN,
        res.EFFECT_UNKNOWN,
    )
    assert m.replacement_memory_id == "sch_2" and m.reason == "moved"
    assert fake.request.memory_feedback[1].assessment == pb.MEMORY_ASSESSMENT_ALREADY_KNOWN
    p = fake.request.procedure_feedback[0]
    assert (p.use, p.effect) == (pb.PROCEDURE_USE_NOT_USED, res.EFFECT_NO_EFFECT)


@pytest.mark.parametrize(
    "text,expected",
    [
        ("2026-08-20T09:30:00Z", datetime(2026, 8, 20, 9, 30, tzinfo=UTC)),
        ("2026-08-20T11:30:00+02:00", datetime(2026, 8, 20, 9, 30, tzinfo=UTC)),
        ("2026-08-20t04:00:00-05:30", datetime(2026, 8, 20, 9, 30, tzinfo=UTC)),
        ("2026-08-20T09:30:00.123456789z", datetime(2026, 8, 20, 9, 30, 0, 123456, tzinfo=UTC)),
    ],
)
def test_occurred_at_is_rfc3339_with_an_explicit_offset(text, expected):
    fake = Recorder(pb.RememberResponse())
    execute(
        "slowave_remember",
        {"session_id": "s", "scope": SCOPE, "content": "c", "type": "fact", "occurred_at": text},
        fake,
    )
    ts = fake.request.occurred_at
    assert ts.ToDatetime(tzinfo=UTC) == expected
    if text.endswith("789z"):
        assert ts.nanos == 123456789


@pytest.mark.parametrize(
    "text",
    [
        "2026-08-20T09:30:00",  # scenario 25: no offset
        "2026-08-20 09:30:00Z",
        "2026-08-20",
        "2026-02-30T09:30:00Z",
        "2026-08-20T25:00:00Z",
        "2026-08-20T09:30:00+24:00",
        "yesterday",
        1724146200,
    ],
)
def test_occurred_at_without_offset_or_malformed_is_invalid_input(text):
    fake = Recorder()
    envelope = execute(
        "slowave_remember",
        {"session_id": "s", "scope": SCOPE, "content": "c", "type": "fact", "occurred_at": text},
        fake,
    )
    assert invalid(envelope) == ["occurred_at"]
    assert fake.calls == []


@pytest.mark.parametrize(
    "tool,args,field",
    [
        ("slowave_feedback", {"retrieval_id": "ctx_1", "retrieval_quality": ""}, "retrieval_quality"),
        ("slowave_recall", {"session_id": "s", "scope": SCOPE, "continue_from": ""}, "continue_from"),
        ("slowave_recall", {"session_id": "s", "scope": SCOPE, "query": "q", "task_context": {}}, "task_context"),
        ("slowave_commit", commit_args(procedure={}), "procedure"),
        ("slowave_remember", {"session_id": "s", "scope": SCOPE, "content": ""}, "content"),
    ],
)
def test_a_present_key_sets_the_field_even_when_empty(tool, args, field):
    fake = Recorder(_empty_response(tool))
    execute(tool, args, fake)
    assert fake.request.HasField(field)


def _empty_response(tool: str) -> Message:
    return {
        "slowave_feedback": pb.FeedbackResponse(record=record()),
        "slowave_recall": pb.RecallResponse(),
        "slowave_commit": pb.CommitResponse(),
        "slowave_remember": pb.RememberResponse(),
        "slowave_activate": pb.ActivateResponse(),
    }[tool]


# ------------------------------------------------------------------------------ batch forms


@pytest.mark.parametrize(
    "scalar",
    [
        {"retrieval_id": "ctx_1"},
        {"memory_feedback": []},
        {"procedure_feedback": []},
        {"missing": []},
        {"retrieval_quality": ""},
    ],
)
def test_items_with_any_scalar_feedback_key_even_empty_fails_the_whole_call(scalar):
    """Protobuf lists carry no presence, so the bridge itself enforces the exclusion (4.6, 8.1)."""
    fake = Recorder()
    envelope = execute("slowave_feedback", {"items": [{"retrieval_id": "ctx_2"}], **scalar}, fake)
    assert invalid(envelope) == list(scalar)
    assert fake.calls == []


def test_items_with_top_level_coverage_complete_fails_and_partial_is_accepted():
    fake = Recorder()
    assert invalid(
        execute("slowave_feedback", {"items": [{"retrieval_id": "ctx_2"}], "coverage": "complete"}, fake)
    ) == ["coverage"]
    assert fake.calls == []
    ok = Recorder(pb.FeedbackResponse(batch=pb.FeedbackBatch(results=[pb.FeedbackItemResult(data=record())])))
    assert execute("slowave_feedback", {"items": [{"retrieval_id": "ctx_1"}], "coverage": "partial"}, ok)["ok"]
    assert ok.request.coverage == pb.COVERAGE_PARTIAL and len(ok.request.items) == 1


def test_a_translation_problem_inside_one_item_fails_only_that_item():
    """Scenario 62's translation half: the item is not sent; its result sits at its position."""
    response = pb.FeedbackResponse(
        batch=pb.FeedbackBatch(
            results=[
                pb.FeedbackItemResult(data=record(retrieval_id="ctx_1")),
                pb.FeedbackItemResult(
                    error=res.ItemError(code="not_found", message="no such retrieval", retryable=False)
                ),
            ]
        )
    )
    fake = Recorder(response)
    envelope = execute(
        "slowave_feedback",
        {
            "items": [
                {"retrieval_id": "ctx_1", "coverage": "complete"},
                {
                    "retrieval_id": "ctx_2",
                    "outcome": "success",
                    "memory_feedback": [{"memory_id": "sch_1", "assessment": 2}],
                },
                {"retrieval_id": "ctx_3"},
            ]
        },
        fake,
    )
    assert [i.retrieval_id for i in fake.request.items] == ["ctx_1", "ctx_3"]
    assert fake.request.items[0].coverage == pb.COVERAGE_COMPLETE
    assert envelope["ok"] is True
    first, second, third = envelope["data"]["results"]
    assert first["ok"] is True and first["data"]["retrieval_id"] == "ctx_1"
    assert second == {
        "ok": False,
        "error": {"code": "invalid_input", "retryable": False, "message": second["error"]["message"]},
    }
    assert "items[1].outcome" in second["error"]["message"]
    assert "items[1].memory_feedback[0].assessment" in second["error"]["message"]
    assert third == {"ok": False, "error": {"code": "not_found", "message": "no such retrieval", "retryable": False}}


@pytest.mark.parametrize("bad_item", [None, "ctx_1", [], {"retrieval_id": None}, {"retrieval_id": 7}])
def test_a_batch_whose_every_item_fails_translation_makes_no_rpc(bad_item):
    fake = Recorder()
    envelope = execute("slowave_feedback", {"items": [bad_item, {"bogus": 1}]}, fake)
    assert fake.calls == []
    assert envelope["ok"] is True
    assert [r["ok"] for r in envelope["data"]["results"]] == [False, False]
    assert "items[1].bogus" in envelope["data"]["results"][1]["error"]["message"]


def test_whole_call_problems_fail_the_call_with_the_item_problems_listed_alongside():
    fake = Recorder()
    envelope = execute(
        "slowave_feedback",
        {
            "items": [{"retrieval_id": "ctx_1", "bogus": 1}, {"retrieval_id": "ctx_2"}],
            "retrieval_id": "ctx_0",
            "outcome": "success",
        },
        fake,
    )
    assert sorted(invalid(envelope)) == sorted(["retrieval_id", "outcome", "items[0].bogus"])
    assert fake.calls == []


def test_service_field_errors_get_the_bridge_item_problems_appended():
    fake = Recorder(
        raises=rpc_error(
            grpc.StatusCode.INVALID_ARGUMENT,
            "invalid input: scope",
            error_info("invalid_input", False, "INVALID_INPUT"),
            bad_request("scope"),
        )
    )
    envelope = execute(
        "slowave_remember",
        {
            "session_id": "s",
            "scope": "nope",
            "memories": [{"content": "a", "type": "fact"}, {"content": "b", "type": "gossip"}],
        },
        fake,
    )
    assert len(fake.request.memories) == 1
    assert invalid(envelope) == ["scope", "memories[1].type"]
    assert envelope["error"]["message"] == "invalid input: scope"


def test_more_than_100_items_fail_the_whole_call_even_when_some_would_be_dropped():
    fake = Recorder()
    items = [{"retrieval_id": f"ctx_{i}"} for i in range(100)] + [{"retrieval_id": "ctx_x", "bogus": True}]
    assert invalid(execute("slowave_feedback", {"items": items}, fake)) == ["items", "items[100].bogus"]
    assert fake.calls == []


def test_remember_batch_results_carry_the_agents_index():
    response = pb.RememberResponse(
        batch=pb.RememberBatch(
            results=[
                pb.RememberItemResult(
                    index=0,
                    data=pb.RememberResult(
                        stored=True,
                        memory_id="sch_1",
                        disposition=pb.DISPOSITION_CREATED,
                        type=res.MEMORY_TYPE_FACT,
                        scope=SCOPE,
                        source_event_id="evt_1",
                        similar=["sch_3"],
                        possibly_supersedes=["sch_2"],
                    ),
                ),
                pb.RememberItemResult(
                    index=1,
                    error=res.ItemError(
                        code="invalid_input",
                        message="invalid item: memories[1].content: must not be blank",
                        retryable=False,
                    ),
                ),
            ]
        )
    )
    fake = Recorder(response)
    envelope = execute(
        "slowave_remember",
        {
            "session_id": "s",
            "scope": SCOPE,
            "memories": [
                {"content": "a", "type": "fact"},
                {"content": "b", "type": "fact", "occurred_at": "2026-08-20T09:30:00"},
                {"content": "", "type": "fact"},
            ],
        },
        fake,
    )
    assert [m.content for m in fake.request.memories] == ["a", ""]
    results = envelope["data"]["results"]
    assert [(r["index"], r["ok"]) for r in results] == [(0, True), (1, False), (2, False)]
    assert results[0]["data"] == {
        "stored": True,
        "memory_id": "sch_1",
        "disposition": "created",
        "type": "fact",
        "scope": SCOPE,
        "source_event_id": "evt_1",
        "similar": ["sch_3"],
        "possibly_supersedes": ["sch_2"],
    }
    assert "memories[1].occurred_at" in results[1]["error"]["message"]
    # The service's own item error keeps its text; only its position is the agent's.
    assert results[2]["error"] == {
        "code": "invalid_input",
        "message": "invalid item: memories[1].content: must not be blank",
        "retryable": False,
    }


@pytest.mark.parametrize(
    "extra,paths",
    [
        ({"occurred_at": "2026-08-20T09:30:00Z"}, ["occurred_at"]),  # scenario 25
        ({"content": "c"}, ["content", "type"]),
        ({"type": "fact"}, ["content", "type"]),
    ],
)
def test_remember_batch_form_rules(extra, paths):
    fake = Recorder()
    envelope = execute(
        "slowave_remember",
        {"session_id": "s", "scope": SCOPE, "memories": [{"content": "a", "type": "fact"}], **extra},
        fake,
    )
    assert invalid(envelope) == paths
    assert fake.calls == []


def test_scalar_forms_render_the_record_itself():
    fake = Recorder(
        pb.RememberResponse(
            memory=pb.RememberResult(
                stored=True,
                memory_id="sch_9",
                scope=SCOPE,
                disposition=pb.DISPOSITION_MATCHED,
                type=res.MEMORY_TYPE_LESSON,
            )
        )
    )
    envelope = execute("slowave_remember", {"session_id": "s", "scope": SCOPE, "content": "c", "type": "lesson"}, fake)
    assert envelope == {
        "ok": True,
        "data": {
            "stored": True,
            "memory_id": "sch_9",
            "disposition": "matched",
            "type": "lesson",
            "scope": SCOPE,
            "source_event_id": "",
            "similar": [],  # lists are always present
            "possibly_supersedes": [],
        },
    }
    fb = execute("slowave_feedback", {"retrieval_id": "ctx_1"}, Recorder(pb.FeedbackResponse(record=record())))
    assert fb["data"]["retrieval_id"] == "ctx_1" and "results" not in fb["data"]


# ------------------------------------------------------------------------------ protobuf → JSON


def test_rendering_presence_enums_timestamps_and_structs():
    memory = res.Memory(
        memory_id="sch_1",
        content="c",
        type=res.MEMORY_TYPE_OPEN_QUESTION,
        pathway="direct",
        ranking=res.RankingSignals(relevance=0.7, learned=0.0, score=0.7),
        provenance=res.Provenance(source_kind="explicit_remember", source_event_id="evt_1"),
    )
    proc = res.Procedure(procedure_id="proc_sess_1", goal="g", outcome=res.OUTCOME_FAILURE)
    proc.context.update({"python": 3, "ratio": 0.5, "tags": ["a"], "nested": {"on": True}})
    proc.created_at.FromDatetime(datetime(2026, 8, 20, 9, 30, 1, 500000, tzinfo=UTC))
    response = pb.ActivateResponse(
        retrieval_id="ctx_1",
        session_id="sess_1",
        memory_state=res.MEMORY_STATE_AVAILABLE,
        memories=[memory],
        procedures=[proc],
        relevant_total=1,
    )
    data = render_message(response)
    assert data["memory_state"] == "available" and data["continuity_state"] == "unspecified"
    assert data["warnings"] == [] and data["more_available"] is False and data["relevant_total"] == 1
    assert "continue_from" not in data and "accessible_field" not in data  # optional / message: only when set
    m = data["memories"][0]
    assert m["type"] == "open_question"
    assert m["ranking"] == {"relevance": 0.7, "learned": 0.0, "score": 0.7}
    assert m["provenance"] == {"source_kind": "explicit_remember", "source_event_id": "evt_1"}
    p = data["procedures"][0]
    assert p["context"] == {"python": 3, "ratio": 0.5, "tags": ["a"], "nested": {"on": True}}
    assert isinstance(p["context"]["python"], int)
    assert p["created_at"] == "2026-08-20T09:30:01.500Z"
    assert p["outcome"] == "failure" and p["steps"] == [] and p["caveats"] == []
    assert "evidence" not in p  # a message field the service always sets; here unset, so absent
    json.dumps(data)  # plain JSON all the way down


def test_optional_counts_render_only_when_set_and_as_numbers():
    plain = render_message(
        pb.CommitResponse(
            session_id="s",
            committed=True,
            operation=pb.COMMIT_OPERATION_CLOSED,
            feedback_status=pb.FEEDBACK_STATUS_COMPLETE,
            episodes_formed=0,
        )
    )
    assert plain["episodes_formed"] == 0 and plain["operation"] == "closed" and plain["feedback_status"] == "complete"
    for absent in (
        "trajectory_lifecycle_filtered",
        "session_note",
        "already_ended",
        "trajectory_ignored",
        "procedure_id",
    ):
        assert absent not in plain
    filtered = render_message(pb.CommitResponse(trajectory_lifecycle_filtered=4, already_ended=True))
    assert filtered["trajectory_lifecycle_filtered"] == 4 and filtered["already_ended"] is True


def test_an_enum_number_unknown_to_the_bridge_is_rendered_not_refused():
    assert render_message(pb.RememberResult(type=99))["type"] == 99


# ------------------------------------------------------------------------------ errors


def test_seed_incomplete_feedback_error_verbatim():
    err = rpc_error(
        grpc.StatusCode.FAILED_PRECONDITION,
        "feedback is incomplete",
        error_info("incomplete_feedback", True, "INCOMPLETE_FEEDBACK"),
        errors_pb2.IncompleteFeedback(
            outstanding=[
                errors_pb2.OutstandingRetrieval(retrieval_id="ctx_a1b2c3d4e5f6", memory_ids=["sch_42", "sch_17"])
            ]
        ),
    )
    assert execute("slowave_commit", commit_args(), Recorder(raises=err)) == {
        "ok": False,
        "error": {
            "code": "incomplete_feedback",
            "message": "feedback is incomplete",
            "retryable": True,
            "outstanding": [
                {"retrieval_id": "ctx_a1b2c3d4e5f6", "memory_ids": ["sch_42", "sch_17"], "procedure_ids": []}
            ],
        },
    }


def test_bad_request_becomes_field_errors():
    err = rpc_error(
        grpc.StatusCode.INVALID_ARGUMENT,
        "invalid input: verification.summary, trajectory[3].summary",
        error_info("invalid_input", False, "INVALID_INPUT"),
        bad_request("verification.summary", "trajectory[3].summary"),
    )
    envelope = execute("slowave_commit", commit_args(), Recorder(raises=err))
    assert envelope == {
        "ok": False,
        "error": {
            "code": "invalid_input",
            "message": "invalid input: verification.summary, trajectory[3].summary",
            "retryable": False,
            "field_errors": [
                {"path": "verification.summary", "message": "verification.summary is wrong"},
                {"path": "trajectory[3].summary", "message": "trajectory[3].summary is wrong"},
            ],
        },
    }


@pytest.mark.parametrize(
    "grpc_code,code,retryable",
    [
        (grpc.StatusCode.NOT_FOUND, "invalid_input", False),
        (grpc.StatusCode.NOT_FOUND, "not_found", False),
        (grpc.StatusCode.FAILED_PRECONDITION, "invalid_input", False),
        (grpc.StatusCode.UNAVAILABLE, "internal_error", True),
        (grpc.StatusCode.UNAUTHENTICATED, "unauthenticated", False),
        (grpc.StatusCode.PERMISSION_DENIED, "permission_denied", False),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "resource_exhausted", True),
    ],
)
def test_code_and_retryable_come_from_error_info_and_nothing_else_is_added(grpc_code, code, retryable):
    err = rpc_error(
        grpc_code, "human text", error_info(code, retryable), error_details_pb2.RetryInfo()
    )  # a detail the envelope has no key for
    assert execute("slowave_recall", {"session_id": "s", "scope": SCOPE, "query": "q"}, Recorder(raises=err)) == {
        "ok": False,
        "error": {"code": code, "message": "human text", "retryable": retryable},
    }


@pytest.mark.parametrize(
    "grpc_code,message,code,retryable",
    [
        (grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded", "internal_error", True),
        (grpc.StatusCode.UNAVAILABLE, "failed to connect to all addresses", "internal_error", True),
        (grpc.StatusCode.INTERNAL, "boom", "internal_error", True),
        (
            grpc.StatusCode.RESOURCE_EXHAUSTED,
            "Received message larger than max (9437184 vs. 8388608)",
            "invalid_input",
            False,
        ),
        (grpc.StatusCode.RESOURCE_EXHAUSTED, "Concurrent RPC limit exceeded!", "internal_error", True),
    ],
)
def test_statuses_without_error_info(grpc_code, message, code, retryable):
    err = FakeRpcError(None, grpc_code, message)
    assert execute("slowave_activate", activate_args(), Recorder(raises=err)) == {
        "ok": False,
        "error": {"code": code, "message": message, "retryable": retryable},
    }


def test_outstanding_only_for_incomplete_feedback_and_field_errors_only_with_bad_request():
    status = status_pb2.Status(
        code=code_pb2.FAILED_PRECONDITION,
        message="m",
        details=packed(error_info("invalid_input", False, "SESSION_ENDED"), errors_pb2.IncompleteFeedback()),
    )
    assert render_status(grpc.StatusCode.FAILED_PRECONDITION, "m", status) == {
        "ok": False,
        "error": {"code": "invalid_input", "message": "m", "retryable": False},
    }


def test_an_unreachable_server_is_a_retryable_internal_error():
    with socket.socket() as s:  # a port nobody listens on once this socket closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    connection = connect(f"127.0.0.1:{port}", timeout=10)
    try:
        envelope = execute("slowave_activate", activate_args(), connection.invoke)
    finally:
        connection.close()
    assert envelope["ok"] is False
    assert envelope["error"]["code"] == "internal_error" and envelope["error"]["retryable"] is True
    assert set(envelope["error"]) == {"code", "message", "retryable"}


# ------------------------------------------------------------------------------ tool schemas


def _schema_matches_descriptor(schema: dict[str, Any], descriptor) -> None:
    assert schema["type"] == "object" and schema["additionalProperties"] is False
    assert list(schema["properties"]) == [f.name for f in descriptor.fields]
    for fd in descriptor.fields:
        prop = schema["properties"][fd.name]
        element = prop["items"] if fd.is_repeated else prop
        if fd.is_repeated:
            assert prop["type"] == "array"
        if fd.enum_type is not None:
            assert "unspecified" not in element["enum"] and len(element["enum"]) == len(fd.enum_type.values) - 1
        elif fd.message_type is not None and fd.message_type.full_name.startswith("slowave.v1."):
            _schema_matches_descriptor(element, fd.message_type)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_input_schemas_follow_the_request_messages(tool):
    schema = input_schema(tool)
    _schema_matches_descriptor(schema, TOOLS[tool].request.DESCRIPTOR)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert len(DESCRIPTIONS[tool]) > 200


SEED_FEEDBACK = """{
  "retrieval_id": "ctx_a1b2c3d4e5f6",
  "memory_feedback": [
    {"memory_id": "sch_42", "assessment": "used"},
    {"memory_id": "sch_17", "assessment": "irrelevant"}
  ],
  "coverage": "complete"
}"""


def test_schemas_accept_the_seed_example_and_refuse_unknown_keys():
    validator = jsonschema.Draft202012Validator(input_schema("slowave_feedback"))
    assert list(validator.iter_errors(json.loads(SEED_FEEDBACK))) == []
    assert list(validator.iter_errors({"retrieval_id": "ctx_1", "outcome": "success"}))
    commit = jsonschema.Draft202012Validator(input_schema("slowave_commit"))
    assert list(commit.iter_errors(commit_args(procedure={"context": {"any": ["thing"]}}))) == []
    assert list(commit.iter_errors(commit_args(outcome="unspecified")))


def test_translate_is_pure():
    t = translate("slowave_feedback", json.loads(SEED_FEEDBACK))
    assert not t.whole and t.request.coverage == pb.COVERAGE_COMPLETE
    assert [(e.memory_id, e.assessment) for e in t.request.memory_feedback] == [
        ("sch_42", pb.MEMORY_ASSESSMENT_USED),
        ("sch_17", pb.MEMORY_ASSESSMENT_IRRELEVANT),
    ]


def test_struct_objects_round_trip_through_the_request_and_back():
    s = struct_pb2.Struct()
    fake = Recorder(pb.ActivateResponse())
    execute("slowave_activate", activate_args(task_context={"env": "staging", "n": 2}), fake)
    s.CopyFrom(fake.request.task_context)
    assert render_message(res.Procedure(context=s))["context"] == {"env": "staging", "n": 2}


def test_text_the_wire_cannot_carry_is_invalid_input_not_a_crash():
    """JSON allows a lone surrogate (`"\\ud800"`); UTF-8, and so protobuf, does not."""
    fake = Recorder()
    assert invalid(execute("slowave_activate", activate_args(task="\ud800", task_context={"k": "\udfff"}), fake)) == [
        "task",
        "task_context",
    ]
    assert fake.calls == []


@pytest.mark.parametrize("api_key,metadata", [("swk_k1", (("authorization", "Bearer swk_k1"),)), (None, ())])
def test_the_api_key_travels_as_bearer_metadata_on_every_call(api_key, metadata):
    seen: list[tuple[Message, float, tuple]] = []

    class Stub:
        def Activate(self, request, timeout, metadata):
            seen.append((request, timeout, metadata))
            return pb.ActivateResponse(session_id="sess_1")

    connection = connect("127.0.0.1:1", api_key=api_key, timeout=7)
    connection.stub = Stub()  # type: ignore[assignment]
    try:
        assert execute("slowave_activate", activate_args(), connection.invoke)["data"]["session_id"] == "sess_1"
    finally:
        connection.close()
    assert [(t, m) for _, t, m in seen] == [(7, metadata)]


def _request_messages(descriptor, seen=None):
    """Every message a tool's arguments can hold, found by walking the request descriptors."""
    seen = {} if seen is None else seen
    if descriptor.full_name not in seen and not descriptor.full_name.startswith("google.protobuf."):
        seen[descriptor.full_name] = descriptor
        for f in descriptor.fields:
            if f.message_type is not None:
                _request_messages(f.message_type, seen)
    return seen


REQUEST_ENUM_FIELDS = [
    (message, field)
    for tool in TOOLS.values()
    for message in _request_messages(tool.request.DESCRIPTOR).values()
    for field in message.fields
    if field.enum_type is not None
]


@pytest.mark.parametrize(("message", "field"), REQUEST_ENUM_FIELDS, ids=lambda x: x.name)
def test_every_word_of_every_request_enum_is_translated(message, field):
    for value in field.enum_type.values:
        if value.number == 0:
            continue
        word = value.name.removeprefix(field.enum_type.values_by_number[0].name.removesuffix("UNSPECIFIED")).lower()
        target, problems = message_factory.GetMessageClass(message)(), []
        fill_message(target, {field.name: [word] if field.is_repeated else word}, "", problems)
        assert problems == []
        assert getattr(target, field.name) == ([value.number] if field.is_repeated else value.number)
