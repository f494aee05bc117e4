"""SDK value conversion: plain Python values → request messages, response messages → dataclasses."""

from __future__ import annotations

import dataclasses
import typing
from datetime import UTC, datetime, timedelta, timezone

import pytest
from google.protobuf import struct_pb2
from google.protobuf.descriptor import Descriptor

from slowave.v1 import errors_pb2
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res
from slowave_client import calls, inputs
from slowave_client.errors import InvalidRequest
from slowave_client.results import (
    ActivateResult,
    CommitResult,
    FeedbackItemResult,
    Memory,
    RecallResult,
    RememberItemResult,
    as_json,
    from_message,
)
from slowave_client.values import (
    build_message,
    enum_name,
    enum_value,
    enum_words,
    from_struct,
    to_struct,
    to_timestamp,
)
from slowave_mcp.proto_to_json import render_message

ASSESSMENT = pb.MemoryAssessment.DESCRIPTOR
MEMORY_TYPE = res.MemoryType.DESCRIPTOR


@pytest.mark.parametrize(
    "spelling",
    ["used", "USED", " Used ", "memory_assessment_used", "MEMORY_ASSESSMENT_USED", pb.MEMORY_ASSESSMENT_USED],
)
def test_enum_values_accept_seed_names_proto_names_and_ints(spelling):
    assert enum_value(ASSESSMENT, spelling) == pb.MEMORY_ASSESSMENT_USED


def test_enum_hyphens_and_multiword_names():
    assert enum_value(MEMORY_TYPE, "open-question") == res.MEMORY_TYPE_OPEN_QUESTION
    assert enum_value(res.Effect.DESCRIPTOR, "no_effect") == res.EFFECT_NO_EFFECT


def test_unknown_enum_name_lists_the_choices():
    with pytest.raises(ValueError) as info:
        enum_value(MEMORY_TYPE, "rumour")
    assert "rumour" in str(info.value) and "open_question" in str(info.value) and "unspecified" not in str(info.value)


def test_enum_rejects_booleans_and_other_types():
    with pytest.raises(ValueError):
        enum_value(MEMORY_TYPE, True)
    with pytest.raises(ValueError):
        enum_value(MEMORY_TYPE, 1.0)  # type: ignore[arg-type]


def test_enum_names_are_lowercase_without_prefix_and_tolerate_unknown_numbers():
    assert enum_name(res.MemoryState.DESCRIPTOR, res.MEMORY_STATE_COLD_START) == "cold_start"
    assert enum_name(res.VerificationStatus.DESCRIPTOR, 2) == "partially_verified"
    assert enum_name(res.MemoryState.DESCRIPTOR, 99) == "unrecognized:99"


def test_struct_round_trip_keeps_integers_integral():
    value = {"env": "staging", "retries": 3, "ratio": 0.5, "tags": ["a", 1], "nested": {"ok": True}}
    back = from_struct(to_struct(value))
    assert back == value
    assert isinstance(back["retries"], int) and isinstance(back["ratio"], float)


def test_timestamps_need_an_explicit_offset():
    ts = to_timestamp("2026-01-31T12:00:00+02:00")
    assert ts.ToDatetime(tzinfo=UTC) == datetime(2026, 1, 31, 10, 0, tzinfo=UTC)
    assert to_timestamp("2026-01-31T10:00:00Z") == ts
    assert to_timestamp(datetime(2026, 1, 31, 10, tzinfo=UTC)) == ts
    with pytest.raises(ValueError, match="offset"):
        to_timestamp(datetime(2026, 1, 31, 10))
    with pytest.raises(ValueError, match="RFC 3339"):
        to_timestamp("yesterday")


def test_build_message_fills_nested_values_from_plain_python():
    request = build_message(
        pb.CommitRequest,
        {
            "session_id": "sess_1",
            "final_goal": "g",
            "outcome": "partial",
            "outcome_summary": "s",
            "verification": {"status": "partially_verified", "summary": "v", "evidence_refs": ["ci#1"]},
            "procedure": {"context": {"env": "staging"}, "steps": ["one", "two"]},
            "trajectory": [{"kind": "action", "summary": "ran tests", "status": "succeeded"}],
        },
    )
    assert request.outcome == res.OUTCOME_PARTIAL
    assert request.verification.status == res.VERIFICATION_STATUS_PARTIALLY_VERIFIED
    assert list(request.verification.evidence_refs) == ["ci#1"]
    assert request.procedure.context["env"] == "staging" and list(request.procedure.steps) == ["one", "two"]
    assert request.trajectory[0].kind == pb.TRAJECTORY_KIND_ACTION
    assert request.trajectory[0].status == pb.TRAJECTORY_STATUS_SUCCEEDED


def test_none_means_absent_and_present_empty_values_set_the_field():
    request = build_message(
        pb.ActivateRequest, {"task": "t", "page_size": None, "continuity_id": "", "task_context": {}}
    )
    assert not request.HasField("page_size")
    assert request.HasField("continuity_id") and request.continuity_id == ""
    assert request.HasField("task_context")


def test_build_message_reports_every_problem_with_its_path():
    with pytest.raises(InvalidRequest) as info:
        build_message(
            pb.FeedbackRequest,
            {
                "retrieval_id": 7,
                "colour": "red",
                "missing": "not a list",
                "coverage": "everything",
                "memory_feedback": [
                    {"memory_id": "sch_1", "assessment": "used", "effect": "huge"},
                    None,
                    {"memory_id": "sch_2", "extra": 1},
                ],
            },
        )
    paths = [v.field for v in info.value.field_violations]
    assert sorted(paths) == sorted(
        [
            "retrieval_id",
            "colour",
            "missing",
            "coverage",
            "memory_feedback[0].effect",
            "memory_feedback[1]",
            "memory_feedback[2].extra",
        ]
    )
    assert info.value.code == "invalid_input" and info.value.status is None and not info.value.retryable


def test_build_message_checks_scalar_types():
    with pytest.raises(InvalidRequest) as info:
        build_message(
            pb.ActivateRequest, {"page_size": True, "task": ["x"], "semantic_context": 3, "task_context": "env=staging"}
        )
    assert {v.field for v in info.value.field_violations} == {"page_size", "task", "semantic_context", "task_context"}
    with pytest.raises(InvalidRequest):
        build_message(pb.ActivateRequest, {"page_size": 2**40})


def test_build_message_accepts_messages_and_rejects_the_wrong_one():
    entry = pb.MemoryFeedbackEntry(memory_id="sch_1", assessment=pb.MEMORY_ASSESSMENT_STALE)
    request = build_message(pb.FeedbackRequest, {"retrieval_id": "ctx_1", "memory_feedback": [entry]})
    assert request.memory_feedback[0] == entry
    with pytest.raises(InvalidRequest):
        build_message(pb.FeedbackRequest, {"memory_feedback": [pb.ProcedureFeedbackEntry(procedure_id="p")]})


def test_prepared_calls_build_requests_from_keywords_and_shorthands():
    fb = calls.feedback("ctx_1", {"sch_1": "used", "sch_2": "irrelevant"}, coverage="complete", missing=["x"])
    assert [(e.memory_id, e.assessment) for e in fb.request.memory_feedback] == [
        ("sch_1", pb.MEMORY_ASSESSMENT_USED),
        ("sch_2", pb.MEMORY_ASSESSMENT_IRRELEVANT),
    ]
    assert fb.request.coverage == pb.COVERAGE_COMPLETE and list(fb.request.missing) == ["x"]
    batch = calls.remember_batch("sess_1", "project:x", [("claim one", "fact"), {"content": "two", "type": 3}])
    assert [(m.content, m.type) for m in batch.request.memories] == [
        ("claim one", res.MEMORY_TYPE_FACT),
        ("two", res.MEMORY_TYPE_DECISION),
    ]
    items = calls.feedback_batch([{"retrieval_id": "ctx_1", "memory_feedback": {"sch_1": "stale"}}])
    assert items.request.items[0].memory_feedback[0].assessment == pb.MEMORY_ASSESSMENT_STALE


def test_only_calls_safe_to_repeat_are_marked_idempotent():
    assert not calls.activate("t", "g", "project:x").idempotent
    assert not calls.recall("sess_1", "project:x", "query").idempotent
    assert not calls.recall("sess_1", "project:x", continue_from="   ").idempotent
    assert calls.recall("sess_1", "project:x", continue_from="cur_abc").idempotent
    assert calls.remember("sess_1", "project:x", "c", "fact").idempotent
    assert calls.feedback("ctx_1", coverage="complete").idempotent
    assert calls.health().idempotent
    with pytest.raises(ValueError, match="unknown method"):
        calls.prepare("Forget", {})


def _memory(memory_id: str, **provenance: object) -> pb.Memory:
    return res.Memory(
        memory_id=memory_id,
        content="c",
        type=res.MEMORY_TYPE_LESSON,
        pathway="direct",
        ranking=res.RankingSignals(relevance=0.5, learned=0.1, score=0.6),
        provenance=res.Provenance(source_kind="consolidated", **provenance),
    )


def test_results_mirror_the_response_with_python_types():
    response = pb.ActivateResponse(
        retrieval_id="ctx_1",
        session_id="sess_1",
        memory_state=res.MEMORY_STATE_AVAILABLE,
        memories=[_memory("sch_1", source_outcome=res.OUTCOME_FAILURE), _memory("sch_2")],
        warnings=[res.RetrievalWarning(code="known_gap", message="m")],
        continuity_state=res.CONTINUITY_STATE_STARTED,
        relevant_total=2,
        more_available=True,
        continue_from="cur_x",
        accessible_field=res.AccessibleField(extra_candidates=3, kinds=["fact"], approx_extra_tokens=9),
    )
    result = from_message(ActivateResult, response)
    assert result.memory_state == "available" and result.continuity_state == "started"
    assert isinstance(result.memories, tuple) and isinstance(result.memories[0], Memory)
    assert result.memories[0].type == "lesson" and result.memories[0].ranking.score == 0.6
    assert result.memories[0].provenance.source_outcome == "failure"
    assert result.memories[1].provenance.source_outcome is None  # optional, unset
    assert result.memories[1].provenance.excerpt is None
    assert result.continue_from == "cur_x" and result.accessible_field.kinds == ("fact",)
    assert from_message(ActivateResult, pb.ActivateResponse()).continue_from is None


def test_commit_optionals_are_none_unless_sent():
    plain = from_message(
        CommitResult, pb.CommitResponse(session_id="s", committed=True, operation=pb.COMMIT_OPERATION_CLOSED)
    )
    assert plain.operation == "closed" and plain.already_ended is None and plain.trajectory_ignored is None
    update = from_message(
        CommitResult, pb.CommitResponse(operation=pb.COMMIT_OPERATION_UPDATED, already_ended=True, trajectory_ignored=0)
    )
    assert update.already_ended is True and update.trajectory_ignored == 0


def test_batch_items_and_json_rendering():
    ok = from_message(
        RememberItemResult,
        pb.RememberItemResult(
            index=0,
            data=pb.RememberResult(
                stored=True,
                memory_id="sch_1",
                disposition=pb.DISPOSITION_CREATED,
                type=res.MEMORY_TYPE_FACT,
                possibly_supersedes=["sch_0"],
            ),
        ),
    )
    failed = from_message(FeedbackItemResult, pb.FeedbackItemResult(error=res.ItemError(code="not_found", message="m")))
    assert ok.ok and ok.data.disposition == "created" and ok.error is None
    assert ok.data.possibly_supersedes == ("sch_0",) and ok.data.similar == ()
    assert not failed.ok and failed.data is None and failed.error.code == "not_found"
    assert as_json(ok) == {
        "ok": True,
        "index": 0,
        "data": {
            "stored": True,
            "memory_id": "sch_1",
            "disposition": "created",
            "type": "fact",
            "scope": "",
            "source_event_id": "",
            "similar": [],
            "possibly_supersedes": ["sch_0"],
        },
    }
    assert as_json(failed) == {"ok": False, "error": {"code": "not_found", "message": "m", "retryable": False}}


def test_json_rendering_of_times_and_structs():
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone(timedelta(hours=2)))
    record = res.EvidenceRecord(evidence_id="evt_1", source_kind=res.EVIDENCE_SOURCE_KIND_EVENT)
    record.recorded_at.FromDatetime(when.astimezone(UTC))
    procedure = res.Procedure(procedure_id="proc_1", context=struct_pb2.Struct())
    procedure.context.update({"n": 2})
    response = pb.RecallResponse(evidence=[record], procedures=[procedure])
    rendered = as_json(from_message(RecallResult, response))
    assert rendered["evidence"][0]["recorded_at"] == "2026-01-02T01:04:05Z"
    assert "occurred_at" not in rendered["evidence"][0] and "content" not in rendered["evidence"][0]
    assert rendered["procedures"][0]["context"] == {"n": 2}


# ------------------------------------------------------------------- what is read from the proto

ENUMS = [enum for module in (res, pb, errors_pb2) for enum in module.DESCRIPTOR.enum_types_by_name.values()]


@pytest.mark.parametrize("enum", ENUMS, ids=lambda e: e.name)
def test_every_enum_value_is_accepted_and_named_by_its_word(enum):
    for value in enum.values:
        if value.number == 0:
            continue
        word = enum_name(enum, value.number)
        assert value.name.endswith("_" + word.upper())
        assert enum_value(enum, word) == enum_value(enum, value.name) == value.number
        assert word in enum_words(enum)


def _result_classes(cls: type, message: Descriptor):
    """`cls` and every result class nested in it, each with the message it mirrors."""
    yield cls, message
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        field = message.fields_by_name[f.name]
        if field.message_type is not None and not field.message_type.full_name.startswith("google.protobuf."):
            nested = next(a for a in (hints[f.name], *typing.get_args(hints[f.name])) if dataclasses.is_dataclass(a))
            yield from _result_classes(nested, field.message_type)


@pytest.mark.parametrize(
    ("cls", "message"),
    [
        (ActivateResult, pb.ActivateResponse),
        (RecallResult, pb.RecallResponse),
        (RememberItemResult, pb.RememberItemResult),
        (FeedbackItemResult, pb.FeedbackItemResult),
        (CommitResult, pb.CommitResponse),
    ],
)
def test_every_result_class_has_exactly_the_fields_of_its_message(cls, message):
    for result, descriptor in _result_classes(cls, message.DESCRIPTOR):
        assert [f.name for f in dataclasses.fields(result)] == [f.name for f in descriptor.fields], result


def test_as_json_renders_a_result_as_the_bridge_renders_its_message():
    when = datetime(2026, 1, 2, 3, 4, 5, 120000, tzinfo=UTC)
    procedure = res.Procedure(
        procedure_id="proc_1",
        outcome=res.OUTCOME_FAILURE,
        verification_status=res.VERIFICATION_STATUS_UNVERIFIED,
        evidence=res.ProcedureEvidence(used=1, helped=1),
        contributions=[res.ProcedureContribution(effect=res.EFFECT_HELPED, contribution="c")],
        ranking=res.RankingSignals(relevance=0.25, learned=0.5, score=0.75),
    )
    procedure.created_at.FromDatetime(when)
    procedure.contributions[0].recorded_at.FromDatetime(when)
    procedure.context.update({"env": "staging", "retries": 3})
    record = res.EvidenceRecord(evidence_id="evt_1", source_kind=res.EVIDENCE_SOURCE_KIND_EVENT, content="x")
    record.recorded_at.FromDatetime(when)
    response = pb.RecallResponse(
        retrieval_id="rec_1",
        memories=[_memory("sch_1", source_outcome=res.OUTCOME_SUCCESS, excerpt=res.Excerpt(source_chars=2))],
        procedures=[procedure],
        more_available=True,
        continue_from="cur_1",
        accessible_field=res.AccessibleField(extra_candidates=1, kinds=["fact"]),
        evidence=[record],
        evidence_mode=res.EVIDENCE_MODE_FULL,
    )
    response.memories[0].created_at.FromDatetime(when)
    assert as_json(from_message(RecallResult, response)) == render_message(response)


@pytest.mark.parametrize(
    ("shape", "message"),
    [
        (inputs.MemoryFeedbackInput, pb.MemoryFeedbackEntry),
        (inputs.ProcedureFeedbackInput, pb.ProcedureFeedbackEntry),
        (inputs.FeedbackItemInput, pb.FeedbackItem),
        (inputs.RememberItemInput, pb.RememberItem),
        (inputs.VerificationInput, pb.Verification),
        (inputs.ProcedureInput, pb.CommitProcedure),
        (inputs.TrajectoryEntryInput, pb.TrajectoryEntry),
    ],
)
def test_every_input_shape_has_exactly_the_fields_of_its_message(shape, message):
    assert list(shape.__annotations__) == [f.name for f in message.DESCRIPTOR.fields]
