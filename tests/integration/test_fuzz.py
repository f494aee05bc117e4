"""Property-based fuzzing of every RPC over real gRPC (issue #7, hypothesis).

Requests are generated from the contract's edges rather than from valid examples alone: blank,
boundary and oversized texts (limits in bytes, multi-byte characters on both sides of them, NUL
characters), identifiers that are valid, padded, foreign (another session's or scope's), of the wrong
kind, well-formed but unknown or simply random, enum fields with undefined numbers (negative, huge),
Structs with keys that break or collide under normalisation, nulls, NaN and infinities, lists of
objects, nesting beyond the limit (and beyond protobuf's own parse depth), canonical JSON over 16 KiB,
Timestamps out of range, batch forms mixing valid and invalid items and breaking the form rules, and
raw bytes sent to each method (random, mutated valid encodings, invalid UTF-8 such as an unpaired
surrogate in a string field).

Properties, for every call:

* never INTERNAL or UNKNOWN; the server stays up (health SERVING after each example);
* a call refused as a whole changes nothing stored (`Server.snapshot()` before and after), except
  the activity touch that spec 2.3 / 7.2 require of a refusal after the named session resolved
  (only `last_activity_at` and `recall_calls` of that session may change);
* every INVALID_ARGUMENT carries ErrorInfo INVALID_INPUT and a BadRequest with at least one field
  violation; every other refusal of the service carries an ErrorInfo;
* an OK batch answers each item, in order; an item breaking its own rules fails alone
  (`invalid_input`) and a valid one in an open session of the right scope is stored.

Budget: derandomized (the same examples on every run, CI is reproducible) with a fixed number of
examples per RPC, about a minute per backend. Each test prints nothing unless it fails, when
hypothesis reports the shrunk request.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from google.protobuf import timestamp_pb2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from slowave.api.protovalues import python_to_struct
from slowave.storage import tables
from slowave.v1 import memory_service_pb2 as pbm
from tests.support import (
    ErrorDetails,
    Server,
    activate,
    assert_serving,
    assess_all,
    commit,
    details_of,
    new_scope,
    pb,
    res,
    seed_memories,
    start_test_server,
)

# Examples per test; SLOWAVE_FUZZ_SCALE multiplies them for a longer local run.
SCALE = float(os.environ.get("SLOWAVE_FUZZ_SCALE", "1"))
CALL_TIMEOUT = 60


def fuzz_settings(examples: int) -> settings:
    return settings(max_examples=max(1, int(examples * SCALE)), deadline=None, derandomize=True, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.large_base_example, HealthCheck.filter_too_much,
                                           HealthCheck.function_scoped_fixture],
                    print_blob=False)


# ------------------------------------------------------------------------------------------ the world

SESSION_COLUMNS = list(tables.sessions.c.keys())
TOUCH_COLUMNS = {SESSION_COLUMNS.index("last_activity_at"), SESSION_COLUMNS.index("recall_calls")}
WIDGETS = [f"Widget rule {w} keeps the gizmo calibrated." for w in
           ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet", "kilo", "lima")]


@dataclass
class World:
    """Real objects for the generated requests to name: valid, foreign, ended."""

    scope: str
    other_scope: str
    memory_ids: list[str]
    foreign_memory_ids: list[str]
    open_session: str
    activation_id: str
    recall_id: str
    cursor: str
    continuity_id: str
    closed_session: str
    closed_retrieval: str
    procedure_id: str
    foreign_session: str
    foreign_retrieval: str

    @property
    def all_ids(self) -> list[str]:
        return [*self.memory_ids[:3], *self.foreign_memory_ids, self.open_session, self.activation_id, self.recall_id,
                self.cursor, self.continuity_id, self.closed_session, self.closed_retrieval, self.procedure_id,
                self.foreign_session, self.foreign_retrieval]


@pytest.fixture(scope="module")
def fuzz_server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    """A server of its own: snapshots stay small and no other test's writes interleave."""
    srv = start_test_server(tmp_path_factory.mktemp("fuzz"))
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def world(fuzz_server: Server) -> World:
    stub = fuzz_server.stub
    scope, other = new_scope("fuzz"), new_scope("other")
    mids = seed_memories(stub, scope, WIDGETS)
    foreign_mids = seed_memories(stub, other, ["Foreign gadget rule keeps the sprocket oiled."])
    c = activate(stub, scope, task="Calibrate the gizmo widget rule")
    assess_all(stub, c)
    commit(stub, c.session_id, procedure=pb.CommitProcedure(summary="Calibrate widgets", steps=["Check the gizmo"]))
    a = activate(stub, scope, task=" ".join(WIDGETS), page_size=1)
    assert a.more_available, "the world needs a continuation cursor"
    rec = stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope, query="gizmo widget calibrated"),
                      timeout=CALL_TIMEOUT)
    f = activate(stub, other, task="Foreign gadget rule")
    return World(scope, other, mids, foreign_mids, a.session_id, a.retrieval_id, rec.retrieval_id, a.continue_from,
                 a.continuity_id, c.session_id, c.retrieval_id, f"proc_{c.session_id}", f.session_id, f.retrieval_id)


# ------------------------------------------------------------------------------------------ strategies

INT32 = st.integers(-2**31, 2**31 - 1)


def texts(limit: int) -> st.SearchStrategy[str]:
    """Blank, random, NUL-bearing, and sized around `limit` bytes in 1-, 2- and 4-byte characters."""
    return st.one_of(
        st.sampled_from(["", " ", "\t\n ", "\u3000", "ok", "nul\x00inside", "\x00", "mixed é 漢 😀 text"]),
        st.text(max_size=24),
        st.integers(limit - 1, limit + 1).map(lambda n: "a" * n),
        st.integers(limit // 2 - 1, limit // 2 + 1).map(lambda n: "é" * n),
        st.integers(limit // 4 - 1, limit // 4 + 1).map(lambda n: "😀" * n),
        st.just(" " * (limit + 1)),
        st.just("z" * (4 * limit + 7)),
    )


def optional(strategy: st.SearchStrategy) -> st.SearchStrategy:
    return st.one_of(st.none(), strategy)


def enum_numbers(enum: Any) -> st.SearchStrategy[int]:
    """Defined values, and the undefined numbers raw gRPC allows (enums are open)."""
    return st.one_of(st.sampled_from(list(enum.values())), st.sampled_from([-1, max(enum.values()) + 1, 2**31 - 1]), INT32)


def mostly(valid: st.SearchStrategy, other: st.SearchStrategy) -> st.SearchStrategy:
    """`valid` in about two of three examples: the deeper stages need requests that get past the first."""
    return st.integers(0, 2).flatmap(lambda n: valid if n else other)


def ids(world: World, *valid: str) -> st.SearchStrategy[str]:
    junk = ["", "   ", "sess_000000000000", "ctx_ffffffffffff", "rec_000000000000", "sch_0", "sch_01", "sch_-1",
            "sch_99999999", "sch_" + "9" * 30, "proc_sess_000000000000", "x" * 256, "x" * 257, "é" * 257, "nul\x00id"]
    other = st.one_of(st.sampled_from(world.all_ids), st.sampled_from(junk), st.text(max_size=16))
    if not valid:
        return other
    good = st.sampled_from(list(valid))
    return mostly(st.one_of(good, good.map(lambda v: f"  {v}\t")), other)


def scopes(world: World) -> st.SearchStrategy[str]:
    odd = ["", "   ", "a:", ":b", "ab", ":", "project", "p:" + "x" * 254, "p:" + "x" * 255, world.scope.upper(),
           world.other_scope, f" {world.scope} ", "nul:\x00"]
    return mostly(st.just(world.scope), st.one_of(st.sampled_from(odd), st.text(max_size=12)))


KEYS = st.one_of(
    st.sampled_from(["env", "Env", " env ", "ENV", "lang", "a.b:c-d_e", "", " ", "1abc", "k" * 64, "k" * 65, "ключ",
                     "with space", "tools", "x\x00y"]),
    st.text(max_size=8),
)
SCALARS = st.one_of(st.none(), st.booleans(), st.floats(allow_nan=True, allow_infinity=True),
                    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, 5e-324, 2.0**53 + 1]),
                    st.text(max_size=12))
JSON_VALUES = st.recursive(SCALARS, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                           st.dictionaries(KEYS, inner, max_size=4)), max_leaves=16)


def nested(levels: int) -> dict:
    value: Any = "leaf"
    for _ in range(levels):
        value = {"level": value}
    return value


STRUCTS = st.one_of(
    st.dictionaries(KEYS, JSON_VALUES, max_size=6),
    st.sampled_from([7, 8, 9, 20, 48, 49, 50, 51, 120]).map(nested),  # limit 8; protobuf's parse depth ~50
    st.integers(60, 400).map(lambda n: {f"key{i}": "v" * 60 for i in range(n)}),  # around and over 16 KiB
    st.just({"list": [{"object": 1}], "nested": [[1, 2]], "nul": None}),
)


def timestamps() -> st.SearchStrategy[timestamp_pb2.Timestamp]:
    seconds = st.one_of(st.integers(-62135596800, 253402300799),
                        st.sampled_from([-62135596801, 253402300800, -2**63, 2**63 - 1]))
    nanos = st.one_of(st.integers(0, 999_999_999), st.sampled_from([-1, 10**9, -2**31, 2**31 - 1]))
    return st.builds(timestamp_pb2.Timestamp, seconds=seconds, nanos=nanos)


def lists_of(strategy: st.SearchStrategy, limit: int) -> st.SearchStrategy[list]:
    """Short random lists, or `limit` ± 1 copies of one element."""
    return st.one_of(st.lists(strategy, max_size=4),
                     st.tuples(strategy, st.integers(limit - 1, limit + 1)).map(lambda p: [p[0]] * p[1]))


def setopt(message: Any, **fields: Any) -> Any:
    """Sets the fields that are not None (None = leave unset): scalars, repeated, Structs, messages."""
    for name, value in fields.items():
        if value is None:
            continue
        target = getattr(message, name)
        if isinstance(value, dict):
            target.SetInParent()
            python_to_struct(value, target)  # in place: deep Structs never pass through a parse here
        elif isinstance(value, list):
            target.extend(value)
        elif hasattr(value, "DESCRIPTOR"):
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


# ------------------------------------------------------------------------------------------ properties


def _sessions_without_touch(snapshot: dict, session_id: str | None) -> list[tuple]:
    return [tuple(v for i, v in enumerate(row) if i not in TOUCH_COLUMNS) if row[0] == session_id else tuple(row)
            for row in snapshot["sessions"]]


def _named_session(request: Any) -> str | None:
    value = getattr(request, "session_id", None)
    return value.strip() or None if value else None


def _describe(rpc: str, request: Any, raw: bool) -> str:
    return f"{rpc}({'raw ' if raw else ''}{str(request)[:3000]!r})"


def check_call(server: Server, rpc: str, request: Any, *, raw: bool = False) -> tuple[grpc.StatusCode, Any, ErrorDetails | None]:
    """Runs one call and checks the properties every call has; returns (code, response, details)."""
    before = server.snapshot()
    if raw:
        method = server.channel.unary_unary(f"/slowave.v1.MemoryService/{rpc}", request_serializer=lambda b: b,
                                            response_deserializer=lambda b: b)
        call = lambda: method(request, timeout=CALL_TIMEOUT)  # noqa: E731
    else:
        call = lambda: getattr(server.stub, rpc)(request, timeout=CALL_TIMEOUT)  # noqa: E731
    try:
        response, code, err = call(), grpc.StatusCode.OK, None
    except grpc.RpcError as exc:
        response, err = None, details_of(exc)
        code = err.code
    assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), f"{code} {err.message if err else ''}: {_describe(rpc, request, raw)}"
    assert_serving(server.channel)
    if err is None:
        return code, response, None
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert err.has_error_info and err.domain == "slowave.ai" and err.reason == "INVALID_INPUT", (err, _describe(rpc, request, raw))
        assert err.violations, f"INVALID_ARGUMENT without a field violation: {err.message}: {_describe(rpc, request, raw)}"
    elif code != grpc.StatusCode.RESOURCE_EXHAUSTED:  # oversized messages: refused by gRPC itself (spec 4.1)
        assert err.has_error_info and err.domain == "slowave.ai", (err, _describe(rpc, request, raw))
    after = server.snapshot()
    if after != before:
        # Only a refusal after the named session resolved may touch it (spec 2.3, 7.2).
        named = None if raw else _named_session(request)
        assert named is not None, f"{code} refusal changed the store: {_describe(rpc, request, raw)}"
        assert after["counts"] == before["counts"], (before["counts"], after["counts"], _describe(rpc, request, raw))
        assert after["ledger"] == before["ledger"], f"{code} refusal changed the ledger: {_describe(rpc, request, raw)}"
        assert _sessions_without_touch(after, named) == _sessions_without_touch(before, named), \
            f"{code} refusal changed more than the activity touch of {named}: {_describe(rpc, request, raw)}"
    return code, response, err


def expected_item(content: str, type_: int, occurred: timestamp_pb2.Timestamp | None) -> str | None:
    """'error' or 'data' when the item's own rules decide it; None when the oracle cannot tell."""
    blank = not content.strip()
    if blank or len(content.encode()) > 16384 or type_ not in range(1, 11):
        return "error"
    if occurred is not None and not (-62135596800 <= occurred.seconds <= 253402300799 and 0 <= occurred.nanos < 10**9):
        return "error"
    return "data"


# ------------------------------------------------------------------------------------------ Activate


@fuzz_settings(60)
@given(data=st.data())
def test_fuzz_activate(fuzz_server, world, data):
    request = setopt(
        pb.ActivateRequest(),
        task=data.draw(mostly(st.just("Calibrate the gizmo widget"), texts(4096)), "task"),
        initial_goal=data.draw(mostly(st.just("Calibrate"), texts(4096)), "initial_goal"),
        scope=data.draw(scopes(world), "scope"),
        page_size=data.draw(optional(st.one_of(st.sampled_from([0, 1, 10, 11, -1]), INT32)), "page_size"),
        continuity_id=data.draw(optional(ids(world, world.continuity_id, "cont_" + "A" * 32, "cont_" + "A" * 97,
                                             "cont_" + "A" * 31, "cont_bad!" + "A" * 32)), "continuity_id"),
        task_context=data.draw(optional(STRUCTS), "task_context"),
        semantic_context=data.draw(optional(texts(4096)), "semantic_context"),
    )
    code, response, _ = check_call(fuzz_server, "Activate", request)
    if code == grpc.StatusCode.OK:
        assert response.session_id.startswith("sess_") and len(response.memories) <= 10


# ------------------------------------------------------------------------------------------ Remember


def remember_items(world: World) -> st.SearchStrategy[pb.RememberItem]:
    return st.builds(
        lambda content, type_, occurred: setopt(pb.RememberItem(content=content, type=type_), occurred_at=occurred),
        mostly(st.text(min_size=1, max_size=30).map(lambda s: f"Fuzzed claim {s}"), texts(16384)),
        mostly(st.integers(1, 10), enum_numbers(res.MemoryType)),
        optional(timestamps()),
    )


@fuzz_settings(80)
@given(data=st.data())
def test_fuzz_remember(fuzz_server, world, data):
    form = data.draw(st.sampled_from(["scalar", "batch", "batch", "both", "neither", "partial"]), "form")
    request = pb.RememberRequest(session_id=data.draw(ids(world, world.open_session), "session_id"),
                                 scope=data.draw(scopes(world), "scope"))
    items: list[pb.RememberItem] = []
    if form in ("scalar", "both", "partial"):
        item = data.draw(remember_items(world), "claim")
        setopt(request, content=item.content if form != "partial" or data.draw(st.booleans()) else None,
               type=item.type if form != "partial" or data.draw(st.booleans()) else None,
               occurred_at=item.occurred_at if item.HasField("occurred_at") else None)
    if form in ("batch", "both"):
        items = data.draw(lists_of(remember_items(world), 100), "memories")
        request.memories.extend(items)
        if data.draw(st.integers(0, 9), "batch occurred_at") == 0:
            request.occurred_at.seconds = 1
    code, response, _ = check_call(fuzz_server, "Remember", request)
    if code != grpc.StatusCode.OK:
        return
    if not items:
        assert response.WhichOneof("result") == "memory" and response.memory.stored
        return
    results = response.batch.results
    assert [r.index for r in results] == list(range(len(items))), "one result per item, in order"
    in_scope = request.session_id.strip() == world.open_session and request.scope.strip() == world.scope
    for item, result in zip(items, results):
        expected = expected_item(item.content, item.type, item.occurred_at if item.HasField("occurred_at") else None)
        got = result.WhichOneof("result")
        if expected == "error":
            assert got == "error" and result.error.code == "invalid_input" and not result.error.retryable, (item, result)
        elif expected == "data" and in_scope:
            assert got == "data", (item, result)


# ------------------------------------------------------------------------------------------ Recall


@fuzz_settings(70)
@given(data=st.data())
def test_fuzz_recall(fuzz_server, world, data):
    continuation = data.draw(st.booleans(), "continuation")
    request = pb.RecallRequest(session_id=data.draw(ids(world, world.open_session), "session_id"),
                               scope=data.draw(scopes(world), "scope"))
    mixed = data.draw(st.integers(0, 4), "mix modes") == 0
    if continuation:
        setopt(request, continue_from=data.draw(ids(world, world.cursor), "continue_from"))
    if not continuation or mixed:
        setopt(request,
               query=data.draw(optional(mostly(st.just("gizmo widget rule"), texts(4096))), "query"),
               page_size=data.draw(optional(st.one_of(st.sampled_from([0, 1, 10, 11]), INT32)), "page_size"),
               task_context=data.draw(optional(STRUCTS), "task_context"),
               semantic_context=data.draw(optional(texts(4096)), "semantic_context"))
    request.evidence_mode = data.draw(mostly(st.sampled_from([0, 1, 2]), enum_numbers(res.EvidenceMode)), "evidence_mode")
    code, response, _ = check_call(fuzz_server, "Recall", request)
    if code == grpc.StatusCode.OK:
        assert response.session_id == world.open_session and len(response.evidence) <= 8


# ------------------------------------------------------------------------------------------ Feedback


def memory_entries(world: World) -> st.SearchStrategy[pb.MemoryFeedbackEntry]:
    return st.builds(
        lambda mid, assessment, stale, replacement, reason, relevance, effect: setopt(
            pb.MemoryFeedbackEntry(memory_id=mid, assessment=assessment), stale_reason=stale,
            replacement_memory_id=replacement, reason=reason, relevance=relevance, effect=effect),
        ids(world, *world.memory_ids),
        enum_numbers(pb.MemoryAssessment),
        optional(enum_numbers(pb.StaleReason)),
        optional(ids(world, *world.memory_ids)),
        optional(texts(4096)),
        optional(enum_numbers(pb.Relevance)),
        optional(enum_numbers(res.Effect)),
    )


def procedure_entries(world: World) -> st.SearchStrategy[pb.ProcedureFeedbackEntry]:
    return st.builds(
        lambda pid, use, effect, contribution, reason: setopt(
            pb.ProcedureFeedbackEntry(procedure_id=pid, use=use), effect=effect, contribution=contribution,
            reason=reason),
        ids(world, world.procedure_id),
        enum_numbers(pb.ProcedureUse),
        optional(enum_numbers(res.Effect)),
        optional(texts(4096)),
        optional(texts(4096)),
    )


def feedback_fields(world: World, data: Any, label: str, *, long_lists: bool = True) -> dict:
    retrievals = (world.activation_id, world.recall_id, world.closed_retrieval, world.foreign_retrieval)
    entries = lists_of if long_lists else (lambda strategy, _limit: st.lists(strategy, max_size=3))
    return dict(
        retrieval_id=data.draw(optional(ids(world, *retrievals)), f"{label}retrieval_id"),
        memory_feedback=data.draw(entries(memory_entries(world), 200), f"{label}memory_feedback"),
        procedure_feedback=data.draw(st.lists(procedure_entries(world), max_size=2), f"{label}procedure_feedback"),
        retrieval_quality=data.draw(optional(texts(4096)), f"{label}retrieval_quality"),
        missing=data.draw(entries(texts(4096), 200), f"{label}missing"),
        coverage=data.draw(optional(enum_numbers(pb.Coverage)), f"{label}coverage"),
    )


@fuzz_settings(80)
@given(data=st.data())
def test_fuzz_feedback(fuzz_server, world, data):
    form = data.draw(st.sampled_from(["scalar", "scalar", "batch", "both", "neither"]), "form")
    request = pb.FeedbackRequest()
    items: list[pb.FeedbackItem] = []
    if form in ("scalar", "both"):
        setopt(request, **feedback_fields(world, data, ""))
    if form in ("batch", "both"):
        count = data.draw(st.one_of(st.integers(1, 3), st.sampled_from([0, 100, 101])), "items")
        items = [setopt(pb.FeedbackItem(), **feedback_fields(world, data, f"items[{i}].", long_lists=False)) for i in range(min(count, 3))]
        items += [items[-1]] * (count - len(items)) if items else []
        request.items.extend(items)
        if data.draw(st.integers(0, 4), "top-level coverage") == 0:
            request.coverage = data.draw(enum_numbers(pb.Coverage))
    code, response, _ = check_call(fuzz_server, "Feedback", request)
    if code == grpc.StatusCode.OK and items:
        assert len(response.batch.results) == len(items), "one result per item"
        for item, result in zip(items, response.batch.results):
            if result.WhichOneof("result") == "data":
                assert result.data.retrieval_id == item.retrieval_id.strip()


# ------------------------------------------------------------------------------------------ Commit


def trajectory_entries() -> st.SearchStrategy[pb.TrajectoryEntry]:
    return st.builds(
        lambda kind, summary, status: pb.TrajectoryEntry(kind=kind, summary=summary, status=status),
        mostly(st.sampled_from([1, 2]), enum_numbers(pb.TrajectoryKind)),
        st.one_of(texts(1000), st.sampled_from(["Called slowave Activate", "a" * 1000, "é" * 1000, "😀" * 1001])),
        mostly(st.sampled_from([0, 1, 2, 3, 4]), enum_numbers(pb.TrajectoryStatus)),
    )


@fuzz_settings(60)
@given(data=st.data())
def test_fuzz_commit(fuzz_server, world, data):
    target = data.draw(st.sampled_from(["fresh", "fresh", "gated", "closed", "other"]), "session")
    stub = fuzz_server.stub
    if target == "fresh":  # nothing exposed: the gate passes, a valid request closes it
        session_id = activate(stub, new_scope("empty"), task="Nothing to find here").session_id
    elif target == "gated":  # exposures without feedback: FAILED_PRECONDITION incomplete_feedback
        session_id = activate(stub, world.scope, task=" ".join(WIDGETS[:2])).session_id
    elif target == "closed":
        session_id = world.closed_session
    else:  # anything but the world's open session, which the other tests need open
        session_id = data.draw(ids(world).filter(lambda v: v.strip() != world.open_session), "session_id")
    request = pb.CommitRequest(session_id=session_id,
                               final_goal=data.draw(mostly(st.just("Calibrate the gizmo"), texts(4096)), "final_goal"),
                               outcome=data.draw(mostly(st.sampled_from([1, 2, 3]), enum_numbers(res.Outcome)), "outcome"),
                               outcome_summary=data.draw(mostly(st.just("The gizmo was calibrated."), texts(4096)),
                                                         "outcome_summary"))
    if data.draw(st.integers(0, 5), "verification present"):
        setopt(request.verification,
               status=data.draw(mostly(st.sampled_from([1, 2, 3]), enum_numbers(res.VerificationStatus)), "status"),
               summary=data.draw(mostly(st.just("Tests passed."), texts(4096)), "verification.summary"),
               evidence_refs=data.draw(lists_of(texts(4096), 200), "evidence_refs"))
    if data.draw(st.booleans(), "procedure present"):
        setopt(request.procedure,
               goal=data.draw(optional(texts(4096)), "procedure.goal"),
               summary=data.draw(optional(texts(4096)), "procedure.summary"),
               context=data.draw(optional(STRUCTS), "procedure.context"),
               steps=data.draw(lists_of(texts(4096), 200), "procedure.steps"),
               caveats=data.draw(lists_of(texts(4096), 200), "procedure.caveats"))
        request.procedure.SetInParent()
    request.trajectory.extend(data.draw(lists_of(trajectory_entries(), 32), "trajectory"))
    code, response, err = check_call(fuzz_server, "Commit", request)
    if code == grpc.StatusCode.OK:
        assert response.committed and response.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
        assert response.operation == (pb.COMMIT_OPERATION_UPDATED if target == "closed" else pb.COMMIT_OPERATION_CLOSED) \
            or target == "other"
    elif target == "gated" and code == grpc.StatusCode.FAILED_PRECONDITION:
        assert err.reason == "INCOMPLETE_FEEDBACK" and err.outstanding


# ------------------------------------------------------------------------------------------ raw bytes

REQUESTS = {"Activate": pbm.ActivateRequest, "Remember": pbm.RememberRequest, "Recall": pbm.RecallRequest,
            "Feedback": pbm.FeedbackRequest, "Commit": pbm.CommitRequest}
# Invalid UTF-8 where protobuf requires UTF-8 strings: unpaired surrogates (CESU-8), overlong, stray bytes.
BAD_UTF8 = [b"\xed\xa0\x80", b"\xed\xbf\xbf", b"a\xed\xb0\x80b", b"\xc0\x80", b"\xff", b"\x80", b"\xf4\x90\x80\x80"]


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _string_field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _valid_bytes(world: World, rpc: str) -> bytes:
    return {
        "Activate": pb.ActivateRequest(task="Calibrate", initial_goal="Calibrate", scope=world.scope),
        "Remember": pb.RememberRequest(session_id=world.open_session, scope=world.scope, content="Raw fuzz claim",
                                       type=res.MEMORY_TYPE_FACT),
        "Recall": pb.RecallRequest(session_id=world.open_session, scope=world.scope, query="gizmo"),
        "Feedback": pb.FeedbackRequest(retrieval_id=world.recall_id),
        "Commit": pb.CommitRequest(session_id="sess_000000000000", final_goal="g", outcome=1, outcome_summary="s"),
    }[rpc].SerializeToString()


def raw_requests(world: World, rpc: str) -> st.SearchStrategy[bytes]:
    valid = _valid_bytes(world, rpc)
    strings = [f.number for f in REQUESTS[rpc].DESCRIPTOR.fields if f.type == f.TYPE_STRING]

    def mutate(edits: list[tuple[int, int]]) -> bytes:
        out = bytearray(valid)
        for position, byte in edits:
            out[position % len(out)] = byte
        return bytes(out)

    return st.one_of(
        st.binary(max_size=64),
        st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4).map(mutate),
        st.integers(1, len(valid) - 1).map(lambda n: valid[:n]),  # truncated
        st.tuples(st.sampled_from(strings), st.sampled_from(BAD_UTF8), st.booleans()).map(
            lambda p: (valid if p[2] else b"") + _string_field(p[0], p[1])),
        st.just(valid + _varint(7 << 3 | 2) + _varint(1000)),  # a length past the end
        st.just(_varint(1 << 3 | 7)),  # wire type 7 does not exist
    )


@fuzz_settings(25)
@pytest.mark.parametrize("rpc", sorted(REQUESTS))
@given(data=st.data())
def test_fuzz_raw_bytes(fuzz_server, world, rpc, data):
    raw = data.draw(raw_requests(world, rpc), "bytes")
    code, _, err = check_call(fuzz_server, rpc, raw, raw=True)
    try:
        REQUESTS[rpc].FromString(raw)
    except Exception:  # noqa: BLE001 - bytes protobuf cannot parse are invalid input as a whole
        assert code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == [""], (code, err)


def test_server_still_serves_a_whole_cycle_after_fuzzing(fuzz_server, world):
    """Runs last in this module: after every fuzzed call the service still works end to end."""
    stub = fuzz_server.stub
    a = activate(stub, world.scope, task=WIDGETS[0])
    assess_all(stub, a)
    assert commit(stub, a.session_id).committed
