"""Conformance: request validation, error details and the validation order (behaviour §3, 4.2–4.5, 5.1, 7.2, 9.2).

Section-14 checklist items 2, 3, 13, 14, 15, 16, 60 and 64, over real gRPC. Every refused request
is checked to leave the database unchanged (`Server.snapshot()` before and after); where the
contract says the refusal still touches the session (behaviour §2.3), everything but that touch is
compared and the touch itself is asserted.
"""

from __future__ import annotations

import json
import math
from typing import Any

import grpc
import pytest
from google.protobuf import struct_pb2

from slowave.storage import tables
from tests.support import (
    ErrorDetails,
    activate,
    check_error,
    commit,
    commit_request,
    expect_error,
    new_scope,
    pb,
    remember,
    res,
    seed_memories,
)

DOMAIN = "slowave.ai"
INVALID = grpc.StatusCode.INVALID_ARGUMENT
UNKNOWN_TOKEN = "cont_" + "A1b2C3d4E5" * 4 + "xyz"  # well-formed (43 characters), never minted
UNKNOWN_CURSOR = "cur_" + "Zz9_" * 8  # shaped like a minted cursor, never minted
CLAIM = "Deploy port equals 8080 on alpha clusters"
SESSION_COLUMNS = list(tables.sessions.c.keys())


# ------------------------------------------------------------------------------------------ helpers


def check_invalid(err: ErrorDetails, paths: list[str]) -> None:
    check_error(err, INVALID, "INVALID_INPUT", "invalid_input", False, paths)


def struct(data: dict) -> struct_pb2.Struct:
    s = struct_pb2.Struct()
    s.update(data)
    return s


def nested(levels: int) -> dict:
    """An object `levels` objects deep (the top-level object has depth 1, behaviour §3.5)."""
    value: Any = "leaf"
    for _ in range(levels):
        value = {"level": value}
    return value


def canonical_size(value: dict) -> int:
    """Behaviour §3.5's canonical JSON, written from the contract: sorted keys, no white space, non-ASCII
    unescaped, integral numbers without fraction."""

    def norm(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: norm(x) for k, x in v.items()}
        if isinstance(v, list):
            return [norm(x) for x in v]
        if isinstance(v, float) and v.is_integer():
            return int(v)
        return v

    return len(json.dumps(norm(value), sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def sessions_without(snapshot: dict, *columns: str) -> list[tuple]:
    drop = {SESSION_COLUMNS.index(c) for c in columns}
    return [tuple(v for i, v in enumerate(row) if i not in drop) for row in snapshot["sessions"]]


def session_of(snapshot: dict, session_id: str) -> dict:
    for row in snapshot["sessions"]:
        if row[0] == session_id:
            return dict(zip(SESSION_COLUMNS, row))
    raise AssertionError(f"session {session_id} not in snapshot")


def assert_only_touched(before: dict, after: dict, session_id: str, *, recall: bool) -> None:
    """A refusal after the session resolved writes only the activity touch (and, for a Recall, the
    recall count) of an open session (behaviour §2.3, 7.2): rows, ledger and every other column unchanged."""
    assert after["counts"] == before["counts"]
    assert after["ledger"] == before["ledger"]
    assert sessions_without(after, "last_activity_at", "recall_calls") == sessions_without(
        before, "last_activity_at", "recall_calls"
    )
    old, new = session_of(before, session_id), session_of(after, session_id)
    assert new["last_activity_at"] > old["last_activity_at"], "the refused request did not touch the session"
    assert new["recall_calls"] == old["recall_calls"] + (1 if recall else 0)


def activate_request(scope: str, **kw: Any) -> pb.ActivateRequest:
    kw.setdefault("task", "Investigate the build")
    kw.setdefault("initial_goal", "Investigate")
    return pb.ActivateRequest(scope=scope, **kw)


# ------------------------------------------------------------------------------------------ 2


@pytest.mark.parametrize("goal", ["", "   ", "\t\n  "])
def test_s02_blank_initial_goal_is_rejected(server, stub, scope, goal):
    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(scope, initial_goal=goal), timeout=30))
    check_invalid(err, ["initial_goal"])
    # No session, retrieval, catalog, cursor or continuity token was created (behaviour §2.2).
    assert server.snapshot() == before


def test_s02_oversized_initial_goal_is_rejected(server, stub, scope):
    """Related limit (behaviour §3.4): 4 KiB of UTF-8, measured in bytes, not characters."""
    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(scope, initial_goal="é" * 2049), timeout=30))  # 4098 B
    check_invalid(err, ["initial_goal"])
    assert server.snapshot() == before
    ok = stub.Activate(activate_request(scope, initial_goal="é" * 2048), timeout=30)  # exactly 4096 bytes
    assert ok.session_id.startswith("sess_")


# ------------------------------------------------------------------------------------------ 3


@pytest.mark.parametrize(
    "bad_scope",
    [
        "project",
        ":x",
        "a: ",
        "",
        "   ",
        "a:",
        ":",
        "  :x  ",
        " :  ",
        "ab",
        "p:" + "x" * 255,
    ],
)
def test_s03_malformed_scope_is_rejected(server, stub, bad_scope):
    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(bad_scope), timeout=30))
    check_invalid(err, ["scope"])
    assert server.snapshot() == before


def test_s03_padded_scope_is_trimmed_and_matched(make_server):
    # A private database, so that the literal scope `project:x` is fresh.
    srv = make_server()
    stub = srv.stub
    a = stub.Activate(activate_request(" project:x "), timeout=30)
    assert a.memory_state == res.MEMORY_STATE_COLD_START
    assert json.loads(srv.admin("session", a.session_id, "--json"))["scope"] == "project:x"

    stored = remember(stub, a.session_id, "project:x", CLAIM)
    assert stored.scope == "project:x" and stored.disposition == pb.DISPOSITION_CREATED
    again = remember(stub, a.session_id, "\tproject:x  ", CLAIM)  # trimmed the same way
    assert (again.disposition, again.memory_id, again.scope) == (pb.DISPOSITION_MATCHED, stored.memory_id, "project:x")
    rec = stub.Recall(pb.RecallRequest(session_id=a.session_id, scope="project:x", query=CLAIM), timeout=30)
    assert [m.memory_id for m in rec.memories] == [stored.memory_id]

    later = stub.Activate(activate_request("project:x", task=CLAIM), timeout=30)
    assert later.memory_state == res.MEMORY_STATE_AVAILABLE
    assert [m.memory_id for m in later.memories] == [stored.memory_id]


@pytest.mark.parametrize("good_scope", ["x:y", "workflow:a:b:c", "domain: spaced id "])
def test_s03_scope_edge_forms_are_accepted(make_server, good_scope):
    """At least 3 characters with a `:`; split at the first `:`; the id may contain colons (behaviour §3.2)."""
    srv = make_server()
    a = srv.stub.Activate(activate_request(good_scope), timeout=30)
    assert remember(srv.stub, a.session_id, good_scope.strip(), CLAIM).scope == good_scope.strip()


# ------------------------------------------------------------------------------------------ 13


def _case_variants(scope: str) -> list[str]:
    return [
        scope.upper(),
        scope[0].upper() + scope[1:],
        scope[:-1] + scope[-1].upper() if scope[-1].isalpha() else scope.replace("t-", "T-", 1),
    ]


@pytest.mark.parametrize("form", ["scalar", "batch"])
@pytest.mark.parametrize("variant", [0, 1, 2])
def test_s13_remember_scope_differing_by_case_is_mismatch(server, stub, scope, form, variant):
    a = activate(stub, scope)
    other = _case_variants(scope)[variant]
    assert other != scope and other.casefold() == scope.casefold()
    if form == "scalar":
        request = pb.RememberRequest(session_id=a.session_id, scope=other, content=CLAIM, type=res.MEMORY_TYPE_FACT)
    else:
        request = pb.RememberRequest(
            session_id=a.session_id, scope=other, memories=[pb.RememberItem(content=CLAIM, type=res.MEMORY_TYPE_FACT)]
        )
    before = server.snapshot()
    err = expect_error(lambda: stub.Remember(request, timeout=30))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SCOPE_MISMATCH", "invalid_input", False)
    # The refusal comes at stage 4, after the open session resolved, so behaviour §2.3 requires the
    # activity touch: compare counts, ledger and every other session column instead.
    assert_only_touched(before, server.snapshot(), a.session_id, recall=False)
    # Nothing was stored: the same claim in the session's own scope is new.
    assert remember(stub, a.session_id, scope, CLAIM).disposition == pb.DISPOSITION_CREATED


def test_s13_remember_on_ended_session_reports_ended_before_scope(server, stub, scope):
    """Stage 4 order (behaviour §6): an ended session is reported before a scope mismatch."""
    a = activate(stub, scope)
    commit(stub, a.session_id)
    before = server.snapshot()
    err = expect_error(lambda: remember(stub, a.session_id, scope.upper(), CLAIM))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SESSION_ENDED", "invalid_input", False)
    assert server.snapshot() == before


# ------------------------------------------------------------------------------------------ 14

# (task_context, expected path, exact?) – behaviour §3.5; the scenario asks for "a path under task_context".
BAD_TASK_CONTEXTS = {
    "null": ({"env": None}, "task_context.env", True),
    "nested_null": ({"ci": {"runner": None}}, "task_context.ci.runner", True),
    "list_of_objects": ({"tools": [{"name": "helm"}]}, "task_context.tools", False),
    "list_of_lists": ({"tools": [["helm"]]}, "task_context.tools", False),
    "list_with_null": ({"tags": ["a", None]}, "task_context.tags", False),
    "depth_9": (nested(9), "task_context", False),
    "size_17_kib": ({"blob": "x" * 17 * 1024}, "task_context", True),
    "key_9x": ({"9x": "value"}, "task_context.9x", True),
    "key_with_space": ({"build tool": "make"}, "task_context.build tool", True),
    "non_finite": ({"ratio": math.inf}, "task_context.ratio", True),
    "nan": ({"ratio": math.nan}, "task_context.ratio", True),
    "keys_normalising_alike": ({"Env": "a", " env": "b"}, "task_context.", False),
}


def _check_task_context_error(err: ErrorDetails, path: str, exact: bool) -> None:
    assert err.code == INVALID and err.has_error_info, (err.code, err.message)
    assert (err.reason, err.domain) == ("INVALID_INPUT", DOMAIN)
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert len(err.violations) == 1, err.violations
    (got,) = err.paths
    assert got == "task_context" or got.startswith("task_context."), got
    if exact:
        assert got == path, got
    else:
        assert got.startswith(path), got


@pytest.mark.parametrize("case", list(BAD_TASK_CONTEXTS))
def test_s14_activate_task_context_violations(server, stub, scope, case):
    context, path, exact = BAD_TASK_CONTEXTS[case]
    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(scope, task_context=struct(context)), timeout=30))
    _check_task_context_error(err, path, exact)
    assert server.snapshot() == before


@pytest.mark.parametrize("case", ["null", "list_of_objects", "depth_9", "size_17_kib", "key_9x"])
def test_s14_recall_task_context_violations(server, stub, scope, case):
    """The same rules for a fresh Recall (behaviour §7); a stage-2 refusal does not even touch the session."""
    context, path, exact = BAD_TASK_CONTEXTS[case]
    a = activate(stub, scope)
    before = server.snapshot()
    err = expect_error(
        lambda: stub.Recall(
            pb.RecallRequest(session_id=a.session_id, scope=scope, query="build", task_context=struct(context)),
            timeout=30,
        )
    )
    _check_task_context_error(err, path, exact)
    assert server.snapshot() == before


def test_s14_task_context_within_rules_is_accepted(server, stub, scope):
    context = {"Level": nested(7), " Env ": "staging", "tools": ["helm", "helm", 3, True], "python.version": "3.12"}
    assert canonical_size(context) < 16384
    a = stub.Activate(activate_request(scope, task_context=struct(context)), timeout=30)  # depth 8 in all
    assert a.session_id.startswith("sess_")


# ------------------------------------------------------------------------------------------ 15


def test_s15_commit_lists_all_four_violations(server, stub, scope):
    (memory,) = seed_memories(stub, scope, [CLAIM])
    a = activate(stub, scope, task=CLAIM)
    assert [m.memory_id for m in a.memories] == [memory]  # unassessed: validation precedes the gate
    request = pb.CommitRequest(
        session_id=a.session_id,
        final_goal="  ",
        outcome=res.OUTCOME_UNSPECIFIED,
        outcome_summary="",
        verification=pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary=" \n\t"),
    )
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(request, timeout=30))
    check_invalid(err, ["outcome", "final_goal", "outcome_summary", "verification.summary"])
    # Stage 2: rejected before the session is resolved, so not even the activity touch happens.
    assert server.snapshot() == before


def test_s15_commit_outcome_unknown_is_rejected(server, stub, scope):
    """`UNKNOWN` is reserved for the reaper (behaviour §9, 13.2)."""
    a = activate(stub, scope)
    before = server.snapshot()
    err = expect_error(lambda: commit(stub, a.session_id, outcome=res.OUTCOME_UNKNOWN))
    check_invalid(err, ["outcome"])
    assert server.snapshot() == before


# ------------------------------------------------------------------------------------------ 16


@pytest.mark.parametrize("session_id", ["sess_abc123", "  sess_abc123  ", "sess_000000000000"])
def test_s16_commit_unknown_session_is_not_found(server, stub, session_id):
    before = server.snapshot()
    err = expect_error(lambda: stub.Commit(commit_request(session_id), timeout=30))
    # Not a shape error: NOT_FOUND with code invalid_input and no BadRequest (behaviour §3.3, 4.2).
    check_error(err, grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input", False)
    assert server.snapshot() == before


def test_s16_recall_and_remember_unknown_session_are_not_found(server, stub, scope):
    before = server.snapshot()
    for call in (
        lambda: stub.Recall(pb.RecallRequest(session_id="sess_abc123", scope=scope, query="build"), timeout=30),
        lambda: stub.Recall(
            pb.RecallRequest(session_id="sess_abc123", scope=scope, continue_from=UNKNOWN_CURSOR), timeout=30
        ),
        lambda: remember(stub, "sess_abc123", scope, CLAIM),
    ):
        check_error(expect_error(call), grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input", False)
    assert server.snapshot() == before


# ------------------------------------------------------------------------------------------ 60


def test_s60_unknown_cursor_on_ended_session_is_session_ended(server, stub, scope):
    a = activate(stub, scope)
    commit(stub, a.session_id)
    before = server.snapshot()
    for call_scope in (scope, scope.upper()):  # ended is reported before a scope mismatch (stage 4)
        err = expect_error(
            lambda: stub.Recall(
                pb.RecallRequest(session_id=a.session_id, scope=call_scope, continue_from=UNKNOWN_CURSOR), timeout=30
            )
        )
        check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SESSION_ENDED", "invalid_input", False)
    # An ended session is not touched (behaviour §2.3).
    assert server.snapshot() == before


def test_s60_unknown_cursor_with_mismatched_scope_is_scope_mismatch(server, stub, scope):
    a = activate(stub, scope)
    request = pb.RecallRequest(session_id=a.session_id, scope=scope.upper(), continue_from=UNKNOWN_CURSOR)
    before = server.snapshot()
    err = expect_error(lambda: stub.Recall(request, timeout=30))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SCOPE_MISMATCH", "invalid_input", False)
    # Refused at stage 4 after the open session resolved: behaviour §2.3 / 7.2 require the activity touch
    # and the recall count, nothing else.
    middle = server.snapshot()
    assert_only_touched(before, middle, a.session_id, recall=True)

    # With the right scope the unknown cursor is reached: stage 5, CURSOR_NOT_FOUND (also a touch).
    err = expect_error(
        lambda: stub.Recall(
            pb.RecallRequest(session_id=a.session_id, scope=scope, continue_from=UNKNOWN_CURSOR), timeout=30
        )
    )
    check_error(err, grpc.StatusCode.NOT_FOUND, "CURSOR_NOT_FOUND", "invalid_input", False)
    assert_only_touched(middle, server.snapshot(), a.session_id, recall=True)


def test_s60_blank_task_with_unknown_token_reports_only_task(server, stub, scope):
    before = server.snapshot()
    err = expect_error(
        lambda: stub.Activate(activate_request(scope, task="  ", continuity_id=UNKNOWN_TOKEN), timeout=30)
    )
    check_invalid(err, ["task"])  # stage 2 fails first; the token lookup (stage 3) never runs
    assert len(err.violations) == 1
    assert server.snapshot() == before


def test_s60_unknown_token_alone_is_invalid_continuity_id(server, stub, scope):
    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(scope, continuity_id=UNKNOWN_TOKEN), timeout=30))
    check_invalid(err, ["continuity_id"])
    assert len(err.violations) == 1
    assert server.snapshot() == before


def test_s60_malformed_token_and_blank_task_reported_together(server, stub, scope):
    """A malformed token is a stage-2 rule, reported with every other violation (behaviour §5)."""
    before = server.snapshot()
    err = expect_error(
        lambda: stub.Activate(activate_request(scope, task="", continuity_id="cont_tooshort"), timeout=30)
    )
    check_invalid(err, ["task", "continuity_id"])
    assert server.snapshot() == before


def test_s60_token_of_another_scope_is_scope_mismatch(server, stub, scope):
    token = activate(stub, scope).continuity_id
    other = new_scope()
    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(other, continuity_id=token), timeout=30))
    check_error(err, grpc.StatusCode.FAILED_PRECONDITION, "SCOPE_MISMATCH", "invalid_input", False)
    assert server.snapshot() == before  # Activate is all-or-nothing (behaviour §2.2)
    resumed = stub.Activate(activate_request(scope, continuity_id=f"  {token} "), timeout=30)
    assert (resumed.continuity_id, resumed.continuity_state) == (token, res.CONTINUITY_STATE_CONTINUED)


# ------------------------------------------------------------------------------------------ 64


def _sized_context(total: int) -> dict:
    """A task context whose canonical JSON is exactly `total` bytes."""
    context = {"blob": ""}
    context["blob"] = "x" * (total - canonical_size(context))
    assert canonical_size(context) == total
    return context


def _sized_context_canonical_forms(total: int) -> dict:
    """Same, exercising the canonical form: unsorted and nested keys, an integral double written
    without fraction, a fraction in shortest form, a boolean, non-ASCII characters unescaped (2 bytes)."""
    context: dict = {"z": True, "num": 3.0, "frac": 0.5, "a": {"y": 1.0, "b": "ü"}, "s": ""}
    room = total - canonical_size(context)
    context["s"] = "é" * (room // 2) + "x" * (room % 2)
    assert canonical_size(context) == total
    return context


def _sized_context_after_normalisation(total: int) -> dict:
    """Same, measured after normalisation (behaviour §3.5): keys are trimmed and lowercased and duplicate
    list items removed before the size is taken, so the value as sent is larger than `total`."""
    normalised = {"tags": ["alpha", "beta"], "blob": ""}
    normalised["blob"] = "x" * (total - canonical_size(normalised))
    assert canonical_size(normalised) == total
    sent = {"  TAGS ": ["alpha", "beta", "alpha", "beta"], "BLOB": normalised["blob"]}
    assert canonical_size(sent) > total + 10
    return sent


@pytest.mark.parametrize("build", [_sized_context, _sized_context_canonical_forms, _sized_context_after_normalisation])
def test_s64_task_context_size_boundary(server, stub, scope, build):
    accepted = stub.Activate(activate_request(scope, task_context=struct(build(16384))), timeout=30)
    assert accepted.session_id.startswith("sess_")

    before = server.snapshot()
    err = expect_error(lambda: stub.Activate(activate_request(scope, task_context=struct(build(16385))), timeout=30))
    check_invalid(err, ["task_context"])
    assert server.snapshot() == before


def test_s64_recall_task_context_size_boundary(server, stub, scope):
    """The same limit on a fresh Recall's own task_context (stage 2, behaviour §7)."""
    a = activate(stub, scope)
    ok = stub.Recall(
        pb.RecallRequest(
            session_id=a.session_id, scope=scope, query="build", task_context=struct(_sized_context(16384))
        ),
        timeout=30,
    )
    assert ok.retrieval_id.startswith("rec_")
    b = activate(stub, scope)
    before = server.snapshot()
    err = expect_error(
        lambda: stub.Recall(
            pb.RecallRequest(
                session_id=b.session_id, scope=scope, query="build", task_context=struct(_sized_context(16385))
            ),
            timeout=30,
        )
    )
    check_invalid(err, ["task_context"])
    assert server.snapshot() == before


# ------------------------------------------------------------------------------ U+0000 (service reading)


@pytest.mark.parametrize(
    "where",
    [
        "task",
        "scope",
        "content",
        "memory_id",
        "task_context value",
        "task_context list item",
        "procedure.context key",
        "procedure.context value",
    ],
)
def test_nul_character_is_invalid_argument_on_the_field_and_stores_nothing(server, where):
    """PostgreSQL text cannot hold U+0000, so both backends refuse it at validation (the contract is
    silent): a precise violation instead of an internal error on one backend only."""
    stub, scope = server.stub, new_scope()
    a = activate(stub, scope, task="Prepare the release")
    before = server.snapshot()
    if where == "task":
        call = lambda: stub.Activate(pb.ActivateRequest(task="deploy\x00now", initial_goal="go", scope=scope))
        path = "task"
    elif where == "scope":
        call = lambda: stub.Activate(pb.ActivateRequest(task="deploy", initial_goal="go", scope="project:a\x00b"))
        path = "scope"
    elif where == "content":
        call = lambda: remember(stub, a.session_id, scope, "port\x008080")
        path = "content"
    elif where == "memory_id":
        call = lambda: stub.Feedback(
            pb.FeedbackRequest(
                retrieval_id=a.retrieval_id, memory_feedback=[pb.MemoryFeedbackEntry(memory_id="sch_\x001")]
            )
        )
        path = "memory_feedback[0].memory_id"
    elif where.startswith("task_context"):
        value = "prod\x00" if where.endswith("value") else ["prod", "eu\x00west"]
        call = lambda: stub.Activate(
            pb.ActivateRequest(task="deploy", initial_goal="go", scope=scope, task_context=struct({"env": value}))
        )
        path = "task_context.env" if where.endswith("value") else "task_context.env[1]"
    else:
        context = {"re\x00gion": "eu"} if where.endswith("key") else {"region": "eu\x00"}
        call = lambda: stub.Commit(
            commit_request(
                a.session_id,
                procedure=pb.CommitProcedure(
                    summary="Deploy with the pipeline.", steps=["run it"], context=struct(context)
                ),
            )
        )
        path = "procedure.context.re\\u0000gion" if where.endswith("key") else "procedure.context.region"
    err = expect_error(call)
    check_invalid(err, [path])
    assert "U+0000" in err.violations[0][1]
    assert server.snapshot() == before  # a shape refusal comes before the session is even resolved
