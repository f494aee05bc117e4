"""Stage 2 of every RPC (behaviour §4.5): shape and content rules, read from protobuf requests.

Paths are protobuf field names with `[i]` for list positions (behaviour §4.3).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from google.protobuf import struct_pb2, timestamp_pb2

from slowave.api.validation import (
    activate_command,
    commit_command,
    feedback_command,
    recall_command,
    remember_command,
)
from slowave.domain.errors import InvalidInput
from slowave.domain.feedback_entries import FeedbackItem, MemoryEntry, ProcedureEntry
from slowave.service.commands import Claim
from slowave.v1 import memory_service_pb2 as pb
from slowave.v1 import resources_pb2 as res
from slowave.v1.resources_pb2 import ItemError

SCOPE = "project:alpha"


def struct(value: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(value)
    return s


def nested(levels: int) -> dict:
    value: object = "leaf"
    for _ in range(levels):
        value = {"a": value}
    return value  # type: ignore[return-value]


def violations(fn, req) -> list[str]:
    with pytest.raises(InvalidInput) as info:
        fn(req)
    err = info.value
    assert err.code == "invalid_input" and err.reason == "INVALID_INPUT" and err.retryable is False
    return [v.path for v in err.violations]


def ts(seconds: int = 1_700_000_000) -> timestamp_pb2.Timestamp:
    return timestamp_pb2.Timestamp(seconds=seconds)


# =========================================================================== Activate


def activate_req(**kw) -> pb.ActivateRequest:
    kw.setdefault("task", "Fix the deploy port")
    kw.setdefault("initial_goal", "Fix it")
    kw.setdefault("scope", SCOPE)
    return pb.ActivateRequest(**kw)


def test_activate_defaults_and_trimming():
    cmd = activate_command(activate_req(task="  Fix the port ", initial_goal=" Fix ", scope=" project:x "))
    assert (cmd.task, cmd.initial_goal, cmd.scope) == ("Fix the port", "Fix", "project:x")
    assert cmd.page_size == 5
    assert cmd.continuity_id is None
    assert cmd.task_context == {}
    assert cmd.semantic_context is None


@pytest.mark.parametrize("goal", ["", "   ", "\n\t"])
def test_activate_blank_initial_goal(goal):
    assert violations(activate_command, activate_req(initial_goal=goal)) == ["initial_goal"]


def test_activate_blank_task():
    assert violations(activate_command, activate_req(task=" ")) == ["task"]


@pytest.mark.parametrize("scope", ["project", ":x", "a: ", "", "x" * 250 + ":" + "y" * 10])
def test_activate_bad_scope(scope):
    assert violations(activate_command, activate_req(scope=scope)) == ["scope"]


@pytest.mark.parametrize("page_size", [0, -1, 11, 1000])
def test_activate_page_size_out_of_range(page_size):
    assert violations(activate_command, activate_req(page_size=page_size)) == ["page_size"]


@pytest.mark.parametrize("page_size", [1, 5, 10])
def test_activate_page_size_in_range(page_size):
    assert activate_command(activate_req(page_size=page_size)).page_size == page_size


def test_activate_text_limits():
    assert activate_command(activate_req(task="x" * 4096)).task == "x" * 4096
    assert violations(activate_command, activate_req(task="x" * 4097)) == ["task"]
    assert violations(activate_command, activate_req(initial_goal="é" * 2049)) == ["initial_goal"]
    assert violations(activate_command, activate_req(semantic_context="x" * 4097)) == ["semantic_context"]


def test_activate_semantic_context_blank_is_absent():
    assert activate_command(activate_req(semantic_context="  ")).semantic_context is None
    assert activate_command(activate_req(semantic_context=" more ")).semantic_context == "more"


def test_activate_continuity():
    token = "cont_" + "A" * 43
    assert activate_command(activate_req(continuity_id=f"  {token} ")).continuity_id == token
    assert activate_command(activate_req(continuity_id="   ")).continuity_id is None  # blank = absent
    assert activate_command(activate_req(continuity_id="")).continuity_id is None
    for bad in ("cont_short", "cont_" + "a" * 97, "cnt_" + "a" * 40, "cont_" + "!" * 40):
        assert violations(activate_command, activate_req(continuity_id=bad)) == ["continuity_id"]


def test_activate_reports_every_violation_at_once():
    req = activate_req(
        task="", initial_goal=" ", scope="project", page_size=11, continuity_id="bogus", semantic_context="x" * 5000
    )
    assert sorted(violations(activate_command, req)) == sorted(
        ["task", "initial_goal", "scope", "page_size", "continuity_id", "semantic_context"]
    )


def test_activate_task_context_normalised():
    cmd = activate_command(
        activate_req(task_context=struct({" Env ": "staging", "tools": ["helm", "helm", "kubectl"], "n": 3}))
    )
    assert cmd.task_context == {"env": "staging", "tools": ["helm", "kubectl"], "n": 3}


@pytest.mark.parametrize(
    "context",
    [
        {"x": None},  # a null
        {"tools": [{"name": "helm"}]},  # a list of objects
        nested(9),  # depth 9
        {"blob": "z" * 17 * 1024},  # 17 KiB
        {"9x": "v"},  # key `9x`
        {"tools": [["a"]]},
        {"tools": ["a", None]},
    ],
)
def test_activate_task_context_violations_checklist_14(context):
    paths = violations(activate_command, activate_req(task_context=struct(context)))
    assert paths and all(p == "task_context" or p.startswith("task_context.") for p in paths)


def test_activate_task_context_key_9x_path():
    assert violations(activate_command, activate_req(task_context=struct({"9x": 1}))) == ["task_context.9x"]
    assert violations(activate_command, activate_req(task_context=struct({"env": {"x": None}}))) == [
        "task_context.env.x"
    ]


def test_activate_task_context_depth_8_ok():
    assert activate_command(activate_req(task_context=struct(nested(8)))).task_context == nested(8)


def test_activate_task_context_canonical_size_boundary_checklist_64():
    n = 16384 - len('{"k":""}')
    assert activate_command(activate_req(task_context=struct({"k": "x" * n}))).task_context == {"k": "x" * n}
    assert violations(activate_command, activate_req(task_context=struct({"k": "x" * (n + 1)}))) == ["task_context"]


def test_activate_task_context_number_is_canonical_integer_for_size():
    # {"k":"…","n":3} — the float 3.0 of a Struct counts as `3`
    n = 16384 - len('{"k":"","n":3}')
    ok = activate_req(task_context=struct({"k": "x" * n, "n": 3}))
    assert activate_command(ok).task_context["n"] == 3  # exactly at the limit: accepted
    with pytest.raises(InvalidInput):
        activate_command(activate_req(task_context=struct({"k": "x" * (n + 1), "n": 3})))


# =========================================================================== Remember


def remember_req(**kw) -> pb.RememberRequest:
    kw.setdefault("session_id", "sess_0123456789ab")
    kw.setdefault("scope", SCOPE)
    return pb.RememberRequest(**kw)


def test_remember_scalar():
    cmd = remember_command(
        remember_req(content="  The deploy port is 8080 ", type=res.MEMORY_TYPE_FACT, occurred_at=ts())
    )
    assert cmd.batch is False
    assert cmd.session_id == "sess_0123456789ab" and cmd.scope == SCOPE
    assert cmd.claims == [Claim("The deploy port is 8080", "fact", datetime.fromtimestamp(1_700_000_000, UTC))]


@pytest.mark.parametrize(
    ("type_", "word"),
    [
        (res.MEMORY_TYPE_OPEN_QUESTION, "open_question"),
        (res.MEMORY_TYPE_LESSON, "lesson"),
        (res.MEMORY_TYPE_ARTIFACT, "artifact"),
    ],
)
def test_remember_type_words(type_, word):
    assert remember_command(remember_req(content="c", type=type_)).claims[0].type == word


def test_remember_only_content_is_a_violation_on_type():
    assert violations(remember_command, remember_req(content="c")) == ["type"]


def test_remember_only_type_is_a_violation_on_content():
    assert violations(remember_command, remember_req(type=res.MEMORY_TYPE_FACT)) == ["content"]


@pytest.mark.parametrize("type_", [res.MEMORY_TYPE_UNSPECIFIED, 99])
def test_remember_type_unspecified_or_undefined(type_):
    assert violations(remember_command, remember_req(content="c", type=type_)) == ["type"]


def test_remember_content_rules():
    assert violations(remember_command, remember_req(content="  ", type=res.MEMORY_TYPE_FACT)) == ["content"]
    assert (
        remember_command(remember_req(content="x" * 16384, type=res.MEMORY_TYPE_FACT)).claims[0].content == "x" * 16384
    )
    assert violations(remember_command, remember_req(content="x" * 16385, type=res.MEMORY_TYPE_FACT)) == ["content"]


def test_remember_both_forms():
    req = remember_req(
        content="c", type=res.MEMORY_TYPE_FACT, memories=[pb.RememberItem(content="d", type=res.MEMORY_TYPE_FACT)]
    )
    assert sorted(violations(remember_command, req)) == ["content", "type"]


def test_remember_neither_form_is_the_empty_path():
    assert violations(remember_command, remember_req()) == [""]


def test_remember_batch_outer_occurred_at_checklist_25():
    req = remember_req(memories=[pb.RememberItem(content="d", type=res.MEMORY_TYPE_FACT)], occurred_at=ts())
    assert violations(remember_command, req) == ["occurred_at"]


def test_remember_batch_of_101_checklist_61():
    items = [pb.RememberItem(content=f"c{i}", type=res.MEMORY_TYPE_FACT) for i in range(101)]
    assert violations(remember_command, remember_req(memories=items)) == ["memories"]
    cmd = remember_command(remember_req(memories=items[:100]))
    assert cmd.batch and len(cmd.claims) == 100


def test_remember_batch_item_errors_fail_only_their_item_checklist_61():
    items = [
        pb.RememberItem(content="first", type=res.MEMORY_TYPE_FACT, occurred_at=ts(1)),
        pb.RememberItem(content="   ", type=res.MEMORY_TYPE_FACT),
        pb.RememberItem(content="third", type=res.MEMORY_TYPE_DECISION),
        pb.RememberItem(content="x" * 16385, type=res.MEMORY_TYPE_UNSPECIFIED),
    ]
    cmd = remember_command(remember_req(memories=items))
    assert cmd.batch is True
    c0, e1, c2, e3 = cmd.claims
    assert c0 == Claim("first", "fact", datetime.fromtimestamp(1, UTC))
    assert c2 == Claim("third", "decision", None)
    assert isinstance(e1, ItemError)
    assert (e1.code, e1.retryable) == ("invalid_input", False)
    assert "memories[1].content" in e1.message
    assert isinstance(e3, ItemError)
    assert "memories[3].content" in e3.message and "memories[3].type" in e3.message


def test_remember_whole_call_rules_still_apply_in_batch():
    req = remember_req(session_id=" ", scope="nope", memories=[pb.RememberItem(content="d", type=res.MEMORY_TYPE_FACT)])
    assert sorted(violations(remember_command, req)) == ["scope", "session_id"]


def test_remember_session_id_limit():
    assert violations(remember_command, remember_req(session_id="s" * 257, content="c", type=res.MEMORY_TYPE_FACT)) == [
        "session_id"
    ]
    cmd = remember_command(remember_req(session_id=" sess_abc123 ", content="c", type=res.MEMORY_TYPE_FACT))
    assert cmd.session_id == "sess_abc123"  # well-formed; whether it resolves is a later stage


# =========================================================================== Recall


def recall_req(**kw) -> pb.RecallRequest:
    kw.setdefault("session_id", "sess_0123456789ab")
    kw.setdefault("scope", SCOPE)
    return pb.RecallRequest(**kw)


def test_recall_fresh_defaults():
    cmd = recall_command(recall_req(query=" deploy port "))
    assert cmd.continue_from is None
    assert cmd.query == "deploy port"
    assert cmd.page_size == 5
    assert cmd.task_context is None
    assert cmd.semantic_context is None
    assert cmd.evidence_mode == "references"


def test_recall_fresh_options():
    cmd = recall_command(
        recall_req(
            query="q",
            page_size=10,
            task_context=struct({"OS": "linux"}),
            semantic_context="ctx",
            evidence_mode=res.EVIDENCE_MODE_FULL,
        )
    )
    assert (cmd.page_size, cmd.task_context, cmd.semantic_context, cmd.evidence_mode) == (
        10,
        {"os": "linux"},
        "ctx",
        "full",
    )
    assert (
        recall_command(recall_req(query="q", evidence_mode=res.EVIDENCE_MODE_REFERENCES)).evidence_mode == "references"
    )


def test_recall_continue_from_with_query_checklist_20():
    assert violations(recall_command, recall_req(continue_from="cur_x", query="q")) == ["query"]


def test_recall_neither_checklist_20():
    assert violations(recall_command, recall_req()) == [""]


def test_recall_blank_query():
    assert violations(recall_command, recall_req(query="  ")) == ["query"]


def test_recall_blank_continue_from_is_absent():
    assert violations(recall_command, recall_req(continue_from="   ")) == [""]
    assert recall_command(recall_req(continue_from=" ", query="q")).query == "q"


def test_recall_continuation_forbids_fresh_fields_each_at_its_path():
    req = recall_req(
        continue_from="cur_x",
        query="q",
        page_size=3,
        task_context=struct({"a": 1}),
        semantic_context="s",
        evidence_mode=res.EVIDENCE_MODE_FULL,
    )
    assert sorted(violations(recall_command, req)) == sorted(
        ["query", "page_size", "task_context", "semantic_context", "evidence_mode"]
    )


def test_recall_continuation_allows_references_or_unspecified():
    for mode in (res.EVIDENCE_MODE_UNSPECIFIED, res.EVIDENCE_MODE_REFERENCES):
        cmd = recall_command(recall_req(continue_from=" cur_abc ", evidence_mode=mode))
        assert cmd.continue_from == "cur_abc"
        assert cmd.query is None


def test_recall_undefined_evidence_mode():
    assert violations(recall_command, recall_req(query="q", evidence_mode=9)) == ["evidence_mode"]


def test_recall_page_size_and_context_rules():
    assert violations(recall_command, recall_req(query="q", page_size=11)) == ["page_size"]
    assert violations(recall_command, recall_req(query="q", page_size=0)) == ["page_size"]
    assert violations(recall_command, recall_req(query="q", task_context=struct({"9x": 1}))) == ["task_context.9x"]
    assert violations(recall_command, recall_req(query="x" * 4097)) == ["query"]


# =========================================================================== Feedback


def mf(memory_id: str = "sch_1", assessment: int = pb.MEMORY_ASSESSMENT_USED, **kw) -> pb.MemoryFeedbackEntry:
    return pb.MemoryFeedbackEntry(memory_id=memory_id, assessment=assessment, **kw)


def pf(
    procedure_id: str = "proc_sess_0123456789ab", use: int = pb.PROCEDURE_USE_USED, **kw
) -> pb.ProcedureFeedbackEntry:
    return pb.ProcedureFeedbackEntry(procedure_id=procedure_id, use=use, **kw)


def test_feedback_scalar_minimal():
    cmd = feedback_command(pb.FeedbackRequest(retrieval_id=" ctx_a1b2c3d4e5f6 "))
    assert cmd.batch is False
    assert cmd.items == [FeedbackItem("ctx_a1b2c3d4e5f6", [], [], None, [], "partial")]


@pytest.mark.parametrize(
    ("coverage", "word"),
    [(pb.COVERAGE_UNSPECIFIED, "partial"), (pb.COVERAGE_PARTIAL, "partial"), (pb.COVERAGE_COMPLETE, "complete")],
)
def test_feedback_coverage(coverage, word):
    assert feedback_command(pb.FeedbackRequest(retrieval_id="ctx_a", coverage=coverage)).items[0].coverage == word


def test_feedback_undefined_coverage_checklist_65():
    assert violations(feedback_command, pb.FeedbackRequest(retrieval_id="ctx_a", coverage=7)) == ["coverage"]


def test_feedback_seed_example_used_irrelevant():
    req = pb.FeedbackRequest(
        retrieval_id="ctx_a1b2c3d4e5f6",
        memory_feedback=[mf("sch_42"), mf("sch_17", pb.MEMORY_ASSESSMENT_IRRELEVANT)],
        coverage=pb.COVERAGE_COMPLETE,
    )
    item = feedback_command(req).items[0]
    assert item.coverage == "complete"
    assert item.memory_feedback == [MemoryEntry("sch_42", "used"), MemoryEntry("sch_17", "irrelevant")]


def test_feedback_entry_fields_read_as_words_and_trimmed():
    req = pb.FeedbackRequest(
        retrieval_id="ctx_a",
        memory_feedback=[
            mf(
                " sch_1 ",
                pb.MEMORY_ASSESSMENT_STALE,
                stale_reason=pb.STALE_REASON_SUPERSEDED,
                replacement_memory_id=" sch_2 ",
                reason=" newer ",
                relevance=pb.RELEVANCE_RELEVANT,
                effect=res.EFFECT_UNKNOWN,
            )
        ],
        procedure_feedback=[
            pf(" proc_x ", pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_NO_EFFECT, contribution="  ", reason=" r ")
        ],
        retrieval_quality="  good  ",
        missing=["", " the staging URL ", "   "],
    )
    item = feedback_command(req).items[0]
    assert item.memory_feedback == [
        MemoryEntry("sch_1", "stale", "superseded", "sch_2", "newer", "relevant", "unknown")
    ]
    assert item.procedure_feedback == [ProcedureEntry("proc_x", "not_used", "no_effect", None, "r")]
    assert item.retrieval_quality == "good"
    assert item.missing == ["the staging URL"]


def test_feedback_blank_texts_count_as_absent():
    req = pb.FeedbackRequest(
        retrieval_id="ctx_a", retrieval_quality="  ", memory_feedback=[mf(replacement_memory_id="  ", reason=" ")]
    )
    item = feedback_command(req).items[0]
    assert item.retrieval_quality is None
    assert item.memory_feedback[0].replacement_memory_id is None
    assert item.memory_feedback[0].reason is None


def test_feedback_labels_are_not_checked_here_checklist_65():
    """Undefined or UNSPECIFIED labels become "unspecified" for a per-target rejection; absent stays None."""
    req = pb.FeedbackRequest(
        retrieval_id="ctx_a",
        memory_feedback=[
            mf(assessment=99),
            mf(
                assessment=pb.MEMORY_ASSESSMENT_UNSPECIFIED,
                stale_reason=pb.STALE_REASON_UNSPECIFIED,
                relevance=42,
                effect=77,
            ),
        ],
        procedure_feedback=[pf(use=99, effect=99), pf(use=pb.PROCEDURE_USE_UNSPECIFIED, effect=res.EFFECT_UNSPECIFIED)],
    )
    item = feedback_command(req).items[0]
    m0, m1 = item.memory_feedback
    assert (m0.assessment, m0.stale_reason, m0.relevance, m0.effect) == ("unspecified", None, None, None)
    assert (m1.assessment, m1.stale_reason, m1.relevance, m1.effect) == ("unspecified",) * 4
    p0, p1 = item.procedure_feedback
    assert (p0.use, p0.effect) == ("unspecified", "unspecified")
    assert (p1.use, p1.effect) == ("unspecified", "unspecified")


def test_feedback_items_with_retrieval_id_checklist_28():
    req = pb.FeedbackRequest(retrieval_id="ctx_a", items=[pb.FeedbackItem(retrieval_id="ctx_b")])
    assert violations(feedback_command, req) == ["retrieval_id"]


def test_feedback_items_with_complete_coverage_checklist_28():
    req = pb.FeedbackRequest(coverage=pb.COVERAGE_COMPLETE, items=[pb.FeedbackItem(retrieval_id="ctx_b")])
    assert violations(feedback_command, req) == ["coverage"]


def test_feedback_items_with_partial_coverage_ok_checklist_28():
    for coverage in (pb.COVERAGE_PARTIAL, pb.COVERAGE_UNSPECIFIED):
        cmd = feedback_command(pb.FeedbackRequest(coverage=coverage, items=[pb.FeedbackItem(retrieval_id="ctx_b")]))
        assert cmd.batch and cmd.items == [FeedbackItem("ctx_b")]


def test_feedback_items_with_every_scalar_field_one_violation_each():
    req = pb.FeedbackRequest(
        retrieval_id="ctx_a",
        memory_feedback=[mf()],
        procedure_feedback=[pf()],
        retrieval_quality="",
        missing=["x"],
        coverage=pb.COVERAGE_COMPLETE,
        items=[pb.FeedbackItem(retrieval_id="ctx_b")],
    )
    assert sorted(violations(feedback_command, req)) == sorted(
        ["retrieval_id", "memory_feedback", "procedure_feedback", "retrieval_quality", "missing", "coverage"]
    )


def test_feedback_items_with_an_empty_but_present_retrieval_quality():
    req = pb.FeedbackRequest(retrieval_quality="", items=[pb.FeedbackItem(retrieval_id="ctx_b")])
    assert violations(feedback_command, req) == ["retrieval_quality"]


def test_feedback_neither_form():
    assert violations(feedback_command, pb.FeedbackRequest()) == [""]


def test_feedback_scalar_without_retrieval_id():
    assert violations(feedback_command, pb.FeedbackRequest(memory_feedback=[mf()])) == ["retrieval_id"]
    assert violations(feedback_command, pb.FeedbackRequest(retrieval_id="   ")) == ["retrieval_id"]
    assert violations(feedback_command, pb.FeedbackRequest(retrieval_id="r" * 257)) == ["retrieval_id"]


def test_feedback_batch_of_101_items_checklist_30():
    items = [pb.FeedbackItem(retrieval_id=f"ctx_{i}") for i in range(101)]
    assert violations(feedback_command, pb.FeedbackRequest(items=items)) == ["items"]
    assert len(feedback_command(pb.FeedbackRequest(items=items[:100])).items) == 100


def test_feedback_scalar_entry_rules_are_whole_call_violations():
    req = pb.FeedbackRequest(
        retrieval_id="ctx_a",
        memory_feedback=[mf("sch_1"), mf("  "), mf("sch_2", reason="x" * 4097)],
        procedure_feedback=[pf(""), pf("proc_y", contribution="y" * 4097)],
        retrieval_quality="q" * 4097,
        missing=["ok", "m" * 4097],
    )
    assert sorted(violations(feedback_command, req)) == sorted(
        [
            "memory_feedback[1].memory_id",
            "memory_feedback[2].reason",
            "procedure_feedback[0].procedure_id",
            "procedure_feedback[1].contribution",
            "retrieval_quality",
            "missing[1]",
        ]
    )


def test_feedback_list_limits_200():
    ok = pb.FeedbackRequest(
        retrieval_id="ctx_a", memory_feedback=[mf(f"sch_{i + 1}") for i in range(200)], missing=["m"] * 200
    )
    assert len(feedback_command(ok).items[0].memory_feedback) == 200
    assert violations(feedback_command, pb.FeedbackRequest(retrieval_id="ctx_a", memory_feedback=[mf()] * 201)) == [
        "memory_feedback"
    ]
    assert violations(feedback_command, pb.FeedbackRequest(retrieval_id="ctx_a", procedure_feedback=[pf()] * 201)) == [
        "procedure_feedback"
    ]
    assert violations(feedback_command, pb.FeedbackRequest(retrieval_id="ctx_a", missing=["m"] * 201)) == ["missing"]


def test_feedback_batch_item_errors_fail_only_their_item_checklist_30():
    req = pb.FeedbackRequest(
        items=[
            pb.FeedbackItem(retrieval_id="ctx_a", memory_feedback=[mf("sch_1")], coverage=pb.COVERAGE_COMPLETE),
            pb.FeedbackItem(retrieval_id="ctx_b", missing=["gap"]),
            pb.FeedbackItem(retrieval_id="ctx_c", memory_feedback=[mf("")]),
        ]
    )
    cmd = feedback_command(req)
    assert cmd.batch is True
    first, second, third = cmd.items
    assert first == FeedbackItem("ctx_a", [MemoryEntry("sch_1", "used")], [], None, [], "complete")
    assert second == FeedbackItem("ctx_b", missing=["gap"])
    assert isinstance(third, ItemError)
    assert (third.code, third.retryable) == ("invalid_input", False)
    assert "items[2].memory_feedback[0].memory_id" in third.message


def test_feedback_batch_item_own_rules():
    req = pb.FeedbackRequest(
        items=[
            pb.FeedbackItem(retrieval_id="  "),
            pb.FeedbackItem(memory_feedback=[mf()]),
            pb.FeedbackItem(retrieval_id="ctx_c", coverage=7),
            pb.FeedbackItem(retrieval_id="ctx_d", memory_feedback=[mf()] * 201),
            pb.FeedbackItem(retrieval_id="ctx_e", missing=["x" * 4097], procedure_feedback=[pf(" ")]),
            pb.FeedbackItem(retrieval_id="ctx_f", memory_feedback=[mf(assessment=99)]),  # a per-target matter
        ]
    )
    errors = feedback_command(req).items
    expected = [
        ["items[0].retrieval_id"],
        ["items[1].retrieval_id"],
        ["items[2].coverage"],
        ["items[3].memory_feedback"],
        ["items[4].missing[0]", "items[4].procedure_feedback[0].procedure_id"],
    ]
    for err, paths in zip(errors, expected):
        assert isinstance(err, ItemError), err
        assert err.code == "invalid_input" and err.retryable is False
        for path in paths:
            assert path in err.message
    assert isinstance(errors[5], FeedbackItem) and errors[5].memory_feedback[0].assessment == "unspecified"


# =========================================================================== Commit


def verification(**kw) -> pb.Verification:
    kw.setdefault("status", res.VERIFICATION_STATUS_VERIFIED)
    kw.setdefault("summary", "Tests passed.")
    return pb.Verification(**kw)


def commit_req(**kw) -> pb.CommitRequest:
    kw.setdefault("session_id", "sess_0123456789ab")
    kw.setdefault("final_goal", "Fix the double-close race")
    kw.setdefault("outcome", res.OUTCOME_SUCCESS)
    kw.setdefault("outcome_summary", "Added a lock; the race no longer reproduces.")
    kw.setdefault("verification", verification())
    return pb.CommitRequest(**kw)


def test_commit_minimal():
    cmd = commit_command(
        commit_req(
            final_goal=" Goal ",
            outcome_summary=" Done. ",
            verification=verification(summary=" ok ", evidence_refs=["", " ci-1 ", " "]),
        )
    )
    assert (cmd.session_id, cmd.final_goal, cmd.outcome, cmd.outcome_summary) == (
        "sess_0123456789ab",
        "Goal",
        "success",
        "Done.",
    )
    assert (cmd.verification_status, cmd.verification_summary, cmd.evidence_refs) == ("verified", "ok", ["ci-1"])
    assert cmd.procedure is None
    assert cmd.trajectory == []


def test_commit_evidence_refs_blank_dropped_checklist_63():
    assert commit_command(commit_req(verification=verification(evidence_refs=[""]))).evidence_refs == []


def test_commit_four_violations_at_once_checklist_15():
    req = commit_req(
        outcome=res.OUTCOME_UNSPECIFIED, final_goal=" ", outcome_summary="", verification=verification(summary="  ")
    )
    assert sorted(violations(commit_command, req)) == sorted(
        ["outcome", "final_goal", "outcome_summary", "verification.summary"]
    )


@pytest.mark.parametrize("outcome", [res.OUTCOME_UNKNOWN, res.OUTCOME_UNSPECIFIED, 99])
def test_commit_outcome_rejected(outcome):
    assert violations(commit_command, commit_req(outcome=outcome)) == ["outcome"]


@pytest.mark.parametrize(
    ("outcome", "word"),
    [(res.OUTCOME_SUCCESS, "success"), (res.OUTCOME_PARTIAL, "partial"), (res.OUTCOME_FAILURE, "failure")],
)
def test_commit_outcome_words(outcome, word):
    assert commit_command(commit_req(outcome=outcome)).outcome == word


@pytest.mark.parametrize("status", [res.VERIFICATION_STATUS_UNSPECIFIED, 42])
def test_commit_verification_status_required(status):
    assert violations(commit_command, commit_req(verification=verification(status=status))) == ["verification.status"]


def test_commit_partially_verified_word():
    cmd = commit_command(commit_req(verification=verification(status=res.VERIFICATION_STATUS_PARTIALLY_VERIFIED)))
    assert cmd.verification_status == "partially_verified"


def test_commit_verification_missing_is_a_violation():
    req = pb.CommitRequest(session_id="sess_x", final_goal="g", outcome=res.OUTCOME_SUCCESS, outcome_summary="s")
    paths = violations(commit_command, req)
    assert paths and all(p.startswith("verification") for p in paths)


def test_commit_text_limits():
    assert violations(commit_command, commit_req(final_goal="g" * 4097)) == ["final_goal"]
    assert violations(commit_command, commit_req(outcome_summary="s" * 4097)) == ["outcome_summary"]
    assert violations(commit_command, commit_req(verification=verification(summary="v" * 4097))) == [
        "verification.summary"
    ]
    assert violations(commit_command, commit_req(verification=verification(evidence_refs=["ok", "e" * 4097]))) == [
        "verification.evidence_refs[1]"
    ]
    assert violations(commit_command, commit_req(verification=verification(evidence_refs=["e"] * 201))) == [
        "verification.evidence_refs"
    ]


def test_commit_session_id_is_not_a_shape_error_checklist_16():
    """The seed placeholder is well-formed: it fails later as NOT_FOUND, never here."""
    assert commit_command(commit_req(session_id="sess_abc123")).session_id == "sess_abc123"


# --------------------------------------------------------------------------- procedure


def test_commit_procedure_without_summary_or_steps_checklist_49():
    assert violations(commit_command, commit_req(procedure=pb.CommitProcedure(goal="g"))) == ["procedure"]
    assert violations(commit_command, commit_req(procedure=pb.CommitProcedure(summary="  ", steps=["", " "]))) == [
        "procedure"
    ]


def test_commit_procedure_only_summary_or_only_steps_checklist_49():
    p = commit_command(commit_req(procedure=pb.CommitProcedure(summary=" Build and deploy "))).procedure
    assert (p.goal, p.summary, p.steps, p.caveats, p.context) == (
        "Fix the double-close race",
        "Build and deploy",
        [],
        [],
        {},
    )
    p = commit_command(
        commit_req(procedure=pb.CommitProcedure(steps=[" one ", "", "two"], caveats=[" c ", " "]))
    ).procedure
    assert (p.summary, p.steps, p.caveats) == ("", ["one", "two"], ["c"])


def test_commit_procedure_goal_defaults_to_final_goal():
    p = commit_command(commit_req(final_goal=" Final ", procedure=pb.CommitProcedure(goal="  ", summary="s"))).procedure
    assert p.goal == "Final"
    p = commit_command(commit_req(procedure=pb.CommitProcedure(goal=" Deploy ", summary="s"))).procedure
    assert p.goal == "Deploy"


def test_commit_procedure_seed_example():
    proc = pb.CommitProcedure(
        goal="Deploy a new service version to the staging environment",
        summary="Build the Docker image, push to the registry, update the Helm chart version, and run the staging deploy workflow.",
        context=struct({"environment": "staging", "infra": "Kubernetes", "ci": "GitHub Actions"}),
        steps=["s1", "s2", "s3", "s4", "s5"],
        caveats=["c1", "c2"],
    )
    p = commit_command(commit_req(procedure=proc)).procedure
    assert p.context == {"environment": "staging", "infra": "Kubernetes", "ci": "GitHub Actions"}
    assert len(p.steps) == 5 and len(p.caveats) == 2


def test_commit_procedure_context_normalised_checklist_63():
    ctx = struct({"Python Version": "3.12", "tools": [{"name": "helm"}], "x": None})
    p = commit_command(commit_req(procedure=pb.CommitProcedure(summary="s", context=ctx))).procedure
    assert p.context == {"python_version": "3.12", "tools": [{"name": "helm"}]}


def test_commit_procedure_context_depth_9_checklist_44():
    paths = violations(commit_command, commit_req(procedure=pb.CommitProcedure(summary="s", context=struct(nested(9)))))
    assert paths and all(p.startswith("procedure.context") for p in paths)


def test_commit_procedure_limits():
    assert violations(commit_command, commit_req(procedure=pb.CommitProcedure(summary="s", steps=["x"] * 201))) == [
        "procedure.steps"
    ]
    assert violations(
        commit_command, commit_req(procedure=pb.CommitProcedure(summary="s", caveats=["ok", "c" * 4097]))
    ) == ["procedure.caveats[1]"]
    assert violations(commit_command, commit_req(procedure=pb.CommitProcedure(goal="g" * 4097, summary="s"))) == [
        "procedure.goal"
    ]
    assert violations(commit_command, commit_req(procedure=pb.CommitProcedure(summary="s" * 4097, steps=["a"]))) == [
        "procedure.summary"
    ]


# --------------------------------------------------------------------------- trajectory


def entry(summary: str = "Ran the tests", kind: int = pb.TRAJECTORY_KIND_ACTION, status: int = 0) -> pb.TrajectoryEntry:
    return pb.TrajectoryEntry(kind=kind, summary=summary, status=status)


def test_commit_trajectory_33_entries_checklist_45():
    assert violations(commit_command, commit_req(trajectory=[entry()] * 33)) == ["trajectory"]
    assert len(commit_command(commit_req(trajectory=[entry()] * 32)).trajectory) == 32


def test_commit_trajectory_counts_lifecycle_entries_before_filtering():
    entries = [entry("Called slowave_recall")] * 30 + [entry("Fixed it")] * 3
    assert violations(commit_command, commit_req(trajectory=entries)) == ["trajectory"]


def test_commit_trajectory_summary_1001_characters_checklist_45():
    assert violations(commit_command, commit_req(trajectory=[entry(), entry("x" * 1001)])) == ["trajectory[1].summary"]


def test_commit_trajectory_summary_limit_is_characters():
    assert commit_command(commit_req(trajectory=[entry("😀" * 1000)])).trajectory[0].summary == "😀" * 1000


def test_commit_trajectory_entry_rules():
    req = commit_req(
        trajectory=[
            entry("  "),
            entry("ok", kind=pb.TRAJECTORY_KIND_UNSPECIFIED),
            entry("ok", status=99),
            entry("ok", kind=7),
        ]
    )
    assert sorted(violations(commit_command, req)) == sorted(
        ["trajectory[0].summary", "trajectory[1].kind", "trajectory[2].status", "trajectory[3].kind"]
    )


def test_commit_trajectory_defaults_and_trimming():
    cmd = commit_command(
        commit_req(
            trajectory=[
                entry("  Reviewed the log.  ", pb.TRAJECTORY_KIND_ACTION, pb.TRAJECTORY_STATUS_SUCCEEDED),
                entry("Saw the failure", pb.TRAJECTORY_KIND_OBSERVATION),  # missing status → unknown
                entry("x", status=pb.TRAJECTORY_STATUS_STARTED),
                entry("y", status=pb.TRAJECTORY_STATUS_FAILED),
                entry("z", status=pb.TRAJECTORY_STATUS_UNKNOWN),
            ]
        )
    )
    assert [(s.kind, s.summary, s.status) for s in cmd.trajectory] == [
        ("action", "Reviewed the log.", "succeeded"),
        ("observation", "Saw the failure", "unknown"),
        ("action", "x", "started"),
        ("action", "y", "failed"),
        ("action", "z", "unknown"),
    ]


def test_commit_validation_reports_everything_at_once():
    req = commit_req(
        final_goal="", outcome=99, procedure=pb.CommitProcedure(), trajectory=[entry("x" * 1001)] + [entry()] * 32
    )
    assert sorted(violations(commit_command, req)) == sorted(
        ["final_goal", "outcome", "procedure", "trajectory", "trajectory[0].summary"]
    )


# --------------------------------------------------------------------------- vocabularies
# Validation reads its vocabularies from the enum descriptors: a value added to the proto is
# accepted without a Python edit. The expected word is spelled here from the enum's own name.


def defined(enum, *, but: tuple[str, ...] = ()) -> list[tuple[int, str]]:
    prefix = re.sub(r"(?<!^)(?=[A-Z])", "_", enum.DESCRIPTOR.name).upper() + "_"
    words = [(v.number, v.name.removeprefix(prefix).lower()) for v in enum.DESCRIPTOR.values if v.number]
    return [(n, w) for n, w in words if w not in but]


@pytest.mark.parametrize(("number", "word"), defined(res.MemoryType))
def test_every_memory_type_is_accepted(number, word):
    assert remember_command(remember_req(content="c", type=number)).claims[0].type == word


@pytest.mark.parametrize(("number", "word"), defined(res.EvidenceMode))
def test_every_evidence_mode_is_accepted(number, word):
    assert recall_command(recall_req(query="q", evidence_mode=number)).evidence_mode == word


@pytest.mark.parametrize(("number", "word"), defined(pb.Coverage))
def test_every_coverage_is_accepted(number, word):
    assert feedback_command(pb.FeedbackRequest(retrieval_id="ctx_a", coverage=number)).items[0].coverage == word


@pytest.mark.parametrize(("number", "word"), defined(res.Outcome, but=("unknown",)))
def test_every_outcome_an_agent_may_claim_is_accepted(number, word):
    assert commit_command(commit_req(outcome=number)).outcome == word


@pytest.mark.parametrize(("number", "word"), defined(res.VerificationStatus))
def test_every_verification_status_is_accepted(number, word):
    assert commit_command(commit_req(verification=verification(status=number))).verification_status == word


@pytest.mark.parametrize(("number", "word"), defined(pb.TrajectoryKind))
def test_every_trajectory_kind_is_accepted(number, word):
    assert commit_command(commit_req(trajectory=[entry(kind=number)])).trajectory[0].kind == word


@pytest.mark.parametrize(("number", "word"), defined(pb.TrajectoryStatus))
def test_every_trajectory_status_is_accepted(number, word):
    assert commit_command(commit_req(trajectory=[entry(status=number)])).trajectory[0].status == word


@pytest.mark.parametrize(
    ("field", "enum"),
    [
        ("assessment", pb.MemoryAssessment),
        ("stale_reason", pb.StaleReason),
        ("relevance", pb.Relevance),
        ("effect", res.Effect),
    ],
)
def test_every_memory_label_is_read_as_its_word(field, enum):
    for number, word in defined(enum):
        item = feedback_command(pb.FeedbackRequest(retrieval_id="ctx_a", memory_feedback=[mf(**{field: number})]))
        assert getattr(item.items[0].memory_feedback[0], field) == word


@pytest.mark.parametrize(("field", "enum"), [("use", pb.ProcedureUse), ("effect", res.Effect)])
def test_every_procedure_label_is_read_as_its_word(field, enum):
    for number, word in defined(enum):
        item = feedback_command(pb.FeedbackRequest(retrieval_id="ctx_a", procedure_feedback=[pf(**{field: number})]))
        assert getattr(item.items[0].procedure_feedback[0], field) == word
