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
  the activity touch that behaviour §2.3 / 7.2 require of a refusal after the named session resolved
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

from slowave.storage import tables
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


# A failing property is shrunk to a minimal request, which can take minutes of calls.
pytestmark = pytest.mark.timeout(900)


def fuzz_settings(examples: int) -> settings:
    return settings(
        max_examples=max(1, int(examples * SCALE)),
        deadline=None,
        derandomize=True,
        database=None,
        suppress_health_check=[
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
            HealthCheck.filter_too_much,
            HealthCheck.function_scoped_fixture,
        ],
        print_blob=False,
    )


# ------------------------------------------------------------------------------------------ the world

SESSION_COLUMNS = list(tables.sessions.c.keys())
TOUCH_COLUMNS = {SESSION_COLUMNS.index("last_activity_at"), SESSION_COLUMNS.index("recall_calls")}
WIDGETS = [
    f"Widget rule {w} keeps the gizmo calibrated."
    for w in (
        "alpha",
        "bravo",
        "charlie",
        "delta",
        "echo",
        "foxtrot",
        "golf",
        "hotel",
        "india",
        "juliet",
        "kilo",
        "lima",
    )
]

GATE = ["Gate sentinel claim about turbines.", "Gate sentinel claim about rotors."]


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
    gate_scope: str

    @property
    def all_ids(self) -> list[str]:
        return [
            *self.memory_ids[:3],
            *self.foreign_memory_ids,
            self.open_session,
            self.activation_id,
            self.recall_id,
            self.cursor,
            self.continuity_id,
            self.closed_session,
            self.closed_retrieval,
            self.procedure_id,
            self.foreign_session,
            self.foreign_retrieval,
        ]


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
    rec = stub.Recall(
        pb.RecallRequest(session_id=a.session_id, scope=scope, query="gizmo widget calibrated"), timeout=CALL_TIMEOUT
    )
    f = activate(stub, other, task="Foreign gadget rule")
    # Memories no fuzzed Feedback can reach (and retire): Commit's gate always has something to refuse.
    gate = new_scope("gate")
    seed_memories(stub, gate, GATE)
    return World(
        scope,
        other,
        mids,
        foreign_mids,
        a.session_id,
        a.retrieval_id,
        rec.retrieval_id,
        a.continue_from,
        a.continuity_id,
        c.session_id,
        c.retrieval_id,
        f"proc_{c.session_id}",
        f.session_id,
        f.retrieval_id,
        gate,
    )


# ------------------------------------------------------------------------------------------ strategies

INT32 = st.integers(-(2**31), 2**31 - 1)


def texts(limit: int) -> st.SearchStrategy[str]:
    """Blank, random, NUL-bearing, and sized around `limit` bytes in 1-, 2- and 4-byte characters."""
    return st.one_of(
        st.sampled_from(["", " ", "\t\n ", "\u3000", "ok", "nul\x00inside", "\x00", "mixed é 漢 😀 text"]),
        st.text(max_size=24),
        st.text(max_size=8).map(lambda t: f"{t}\x00{t}"),  # PostgreSQL text cannot hold U+0000
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
    return st.one_of(
        st.sampled_from(list(enum.values())), st.sampled_from([-1, max(enum.values()) + 1, 2**31 - 1]), INT32
    )


JUNK_IDS = [
    "",
    "   ",
    "sess_000000000000",
    "ctx_ffffffffffff",
    "rec_000000000000",
    "sch_0",
    "sch_01",
    "sch_-1",
    "sch_99999999",
    "sch_" + "9" * 30,
    "proc_sess_000000000000",
    "x" * 256,
    "x" * 257,
    "é" * 257,
    "nul\x00id",
]
VALID_TEXT = st.text(st.characters(categories=["L", "N", "P", "S"]), min_size=1, max_size=24).map(lambda t: f"Fuzz {t}")


def valid_ids(*valid: str) -> st.SearchStrategy[str]:
    """Real ids, as minted or padded with white space (identifiers are trimmed)."""
    good = st.sampled_from(list(valid))
    return st.one_of(good, good.map(lambda v: f"  {v}\t"))


def other_ids(world: World) -> st.SearchStrategy[str]:
    """Other objects' ids (foreign scope or session, wrong kind, ended), well-formed unknowns, junk."""
    return st.one_of(st.sampled_from(world.all_ids), st.sampled_from(JUNK_IDS), st.text(max_size=16))


def valid_scope(world: World) -> st.SearchStrategy[str]:
    return st.sampled_from([world.scope, f" {world.scope}\t"])


def odd_scopes(world: World) -> st.SearchStrategy[str]:
    odd = [
        "",
        "   ",
        "a:",
        ":b",
        "ab",
        ":",
        "project",
        "p:" + "x" * 254,
        "p:" + "x" * 255,
        world.scope.upper(),
        world.other_scope,
        "nul:\x00",
    ]
    return st.one_of(st.sampled_from(odd), st.text(max_size=12))


class Fields:
    """Draws a request's fields. In three examples of four one field (or none) is perturbed and all
    the others are valid, so that the later validation stages and the stores are reached; in the
    fourth every field is drawn wild."""

    def __init__(self, data: Any, names: list[str]) -> None:
        self.data = data
        self.wild = data.draw(st.integers(0, 3), "wild") == 0
        self.target = None if self.wild else data.draw(st.sampled_from([*names, None]), "perturbed field")

    def perturbs(self, name: str) -> bool:
        return self.wild or self.target == name

    def __call__(self, name: str, valid: st.SearchStrategy, other: st.SearchStrategy) -> Any:
        if self.wild:
            return self.data.draw(st.one_of(valid, other), name)
        return self.data.draw(other if name == self.target else valid, name)


KEYS = st.one_of(
    st.sampled_from(
        [
            "env",
            "Env",
            " env ",
            "ENV",
            "lang",
            "a.b:c-d_e",
            "",
            " ",
            "1abc",
            "k" * 64,
            "k" * 65,
            "ключ",
            "with space",
            "tools",
            "x\x00y",
        ]
    ),
    st.text(max_size=8),
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -math.inf, 0.0, -0.0, 1e308, 5e-324, 2.0**53 + 1]),
    st.text(max_size=12),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=4)),
    max_leaves=16,
)


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


VALID_CONTEXT = st.dictionaries(
    st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True),
    st.one_of(
        st.text(max_size=8),
        st.booleans(),
        st.integers(-1000, 1000).map(float),
        st.lists(st.text(max_size=5), max_size=3),
    ),
    max_size=3,
)


def valid_timestamps() -> st.SearchStrategy[timestamp_pb2.Timestamp]:
    return st.builds(timestamp_pb2.Timestamp, seconds=st.integers(0, 4102444800), nanos=st.integers(0, 999_999_999))


def timestamps() -> st.SearchStrategy[timestamp_pb2.Timestamp]:
    seconds = st.one_of(
        st.integers(-62135596800, 253402300799), st.sampled_from([-62135596801, 253402300800, -(2**63), 2**63 - 1])
    )
    nanos = st.one_of(st.integers(0, 999_999_999), st.sampled_from([-1, 10**9, -(2**31), 2**31 - 1]))
    return st.builds(timestamp_pb2.Timestamp, seconds=seconds, nanos=nanos)


def lists_of(strategy: st.SearchStrategy, limit: int) -> st.SearchStrategy[list]:
    """Short random lists, or `limit` ± 1 copies of one element."""
    return st.one_of(
        st.lists(strategy, max_size=4),
        st.tuples(strategy, st.integers(limit - 1, limit + 1)).map(lambda p: [p[0]] * p[1]),
    )


def setopt(message: Any, **fields: Any) -> Any:
    """Sets the fields that are not None (None = leave unset): scalars, repeated, Structs, messages."""
    for name, value in fields.items():
        if value is None:
            continue
        target = getattr(message, name)
        if isinstance(value, dict):
            target.SetInParent()
            target.update(value)  # in place: deep Structs never pass through a parse here
        elif isinstance(value, list):
            target.extend(value)
        elif hasattr(value, "DESCRIPTOR"):
            target.CopyFrom(value)
        else:
            setattr(message, name, value)
    return message


# ------------------------------------------------------------------------------------------ properties


def _sessions_without_touch(snapshot: dict, session_id: str | None) -> list[tuple]:
    return [
        tuple(v for i, v in enumerate(row) if i not in TOUCH_COLUMNS) if row[0] == session_id else tuple(row)
        for row in snapshot["sessions"]
    ]


def _named_session(request: Any) -> str | None:
    value = getattr(request, "session_id", None)
    return value.strip() or None if value else None


def _parsed(rpc: str, raw: bytes) -> Any:
    try:
        return REQUESTS[rpc].FromString(raw)
    except Exception:
        return None


def _describe(rpc: str, request: Any, raw: bool) -> str:
    return f"{rpc}({'raw ' if raw else ''}{str(request)[:3000]!r})"


def check_call(
    server: Server, rpc: str, request: Any, *, raw: bool = False
) -> tuple[grpc.StatusCode, Any, ErrorDetails | None]:
    """Runs one call and checks the properties every call has; returns (code, response, details)."""
    before = server.snapshot()
    if raw:
        method = server.channel.unary_unary(
            f"/slowave.v1.MemoryService/{rpc}", request_serializer=lambda b: b, response_deserializer=lambda b: b
        )
        call = lambda: method(request, timeout=CALL_TIMEOUT)
    else:
        call = lambda: getattr(server.stub, rpc)(request, timeout=CALL_TIMEOUT)
    try:
        response, code, err = call(), grpc.StatusCode.OK, None
    except grpc.RpcError as exc:
        response, err = None, details_of(exc)
        code = err.code
    assert code not in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN), (
        f"{code} {err.message if err else ''}: {_describe(rpc, request, raw)}"
    )
    assert_serving(server.channel)
    if err is None:
        return code, response, None
    if code == grpc.StatusCode.INVALID_ARGUMENT:
        assert err.has_error_info and err.domain == "slowave.ai" and err.reason == "INVALID_INPUT", (
            err,
            _describe(rpc, request, raw),
        )
        assert err.violations, (
            f"INVALID_ARGUMENT without a field violation: {err.message}: {_describe(rpc, request, raw)}"
        )
    elif code != grpc.StatusCode.RESOURCE_EXHAUSTED:  # oversized messages: refused by gRPC itself (behaviour §4.1)
        assert err.has_error_info and err.domain == "slowave.ai", (err, _describe(rpc, request, raw))
    after = server.snapshot()
    if after != before:
        # Only a refusal after the named session resolved may touch it (behaviour §2.3, 7.2).
        named = _named_session(_parsed(rpc, request) if raw else request)
        assert named is not None, f"{code} refusal changed the store: {_describe(rpc, request, raw)}"
        assert after["counts"] == before["counts"], (before["counts"], after["counts"], _describe(rpc, request, raw))
        assert after["ledger"] == before["ledger"], f"{code} refusal changed the ledger: {_describe(rpc, request, raw)}"
        assert _sessions_without_touch(after, named) == _sessions_without_touch(before, named), (
            f"{code} refusal changed more than the activity touch of {named}: {_describe(rpc, request, raw)}"
        )
    return code, response, err


def expected_item(content: str, type_: int, occurred: timestamp_pb2.Timestamp | None) -> str | None:
    """'error' or 'data' when the item's own rules decide it; None when the oracle cannot tell."""
    blank = not content.strip()
    if blank or len(content.encode()) > 16384 or "\x00" in content or type_ not in range(1, 11):
        return "error"
    if occurred is not None and not (-62135596800 <= occurred.seconds <= 253402300799 and 0 <= occurred.nanos < 10**9):
        return "error"
    return "data"


# ------------------------------------------------------------------------------------------ Activate

CONTINUITY_VARIANTS = [
    "cont_" + "A" * 32,
    "cont_" + "A" * 96,
    "cont_" + "A" * 97,
    "cont_" + "A" * 31,
    "cont_bad!" + "A" * 32,
    "cont_" + "A" * 32 + "\x00",
]


@fuzz_settings(60)
@given(data=st.data())
def test_fuzz_activate(fuzz_server, world, data):
    f = Fields(
        data, ["task", "initial_goal", "scope", "page_size", "continuity_id", "task_context", "semantic_context"]
    )
    request = setopt(
        pb.ActivateRequest(),
        task=f("task", VALID_TEXT, texts(4096)),
        initial_goal=f("initial_goal", VALID_TEXT, texts(4096)),
        scope=f("scope", valid_scope(world), odd_scopes(world)),
        page_size=f("page_size", optional(st.integers(1, 10)), st.one_of(st.sampled_from([0, 11, -1]), INT32)),
        continuity_id=f(
            "continuity_id",
            optional(st.sampled_from([world.continuity_id, "", "  "])),
            st.one_of(other_ids(world), st.sampled_from(CONTINUITY_VARIANTS)),
        ),
        task_context=f("task_context", optional(VALID_CONTEXT), STRUCTS),
        semantic_context=f("semantic_context", optional(VALID_TEXT), texts(4096)),
    )
    code, response, _ = check_call(fuzz_server, "Activate", request)
    if code == grpc.StatusCode.OK:
        assert response.session_id.startswith("sess_") and len(response.memories) <= (request.page_size or 5)
    elif not f.wild and f.target is None:
        raise AssertionError(f"a valid Activate was refused: {code}")


# ------------------------------------------------------------------------------------------ Remember


def remember_items(valid: bool) -> st.SearchStrategy[pb.RememberItem]:
    """Valid items, or items mixing valid and broken parts (a batch item's own rules fail only it)."""
    pick = (lambda good, bad: good) if valid else (lambda good, bad: st.one_of(good, good, bad))
    return st.builds(
        lambda content, type_, occurred: setopt(pb.RememberItem(content=content, type=type_), occurred_at=occurred),
        pick(VALID_TEXT, texts(16384)),
        pick(st.integers(1, 10), enum_numbers(res.MemoryType)),
        pick(optional(valid_timestamps()), timestamps()),
    )


@fuzz_settings(80)
@given(data=st.data())
def test_fuzz_remember(fuzz_server, world, data):
    f = Fields(data, ["form", "session_id", "scope", "content", "type", "occurred_at", "memories"])
    form = f(
        "form", st.sampled_from(["scalar", "batch"]), st.sampled_from(["both", "neither", "content only", "type only"])
    )
    request = pb.RememberRequest(
        session_id=f("session_id", valid_ids(world.open_session), other_ids(world)),
        scope=f("scope", valid_scope(world), odd_scopes(world)),
    )
    if form in ("scalar", "both", "content only", "type only"):
        setopt(
            request,
            content=f("content", VALID_TEXT, texts(16384)) if form != "type only" else None,
            type=f("type", st.integers(1, 10), enum_numbers(res.MemoryType)) if form != "content only" else None,
            occurred_at=f("occurred_at", optional(valid_timestamps()), timestamps()),
        )
    items: list[pb.RememberItem] = []
    if form in ("batch", "both"):
        items = f(
            "memories",
            st.lists(remember_items(valid=True), min_size=1, max_size=4),
            lists_of(remember_items(valid=False), 100),
        )
        request.memories.extend(items)
        if form == "batch" and f.perturbs("occurred_at"):
            request.occurred_at.CopyFrom(f("occurred_at", valid_timestamps(), timestamps()))  # scalar-only field
    code, response, _ = check_call(fuzz_server, "Remember", request)
    if code != grpc.StatusCode.OK:
        assert f.wild or f.target is not None, f"a valid Remember was refused: {code}"
        return
    if not items:
        assert response.WhichOneof("result") == "memory" and response.memory.stored
        return
    results = response.batch.results
    assert [r.index for r in results] == list(range(len(items))), "one result per item, in order"
    for item, result in zip(items, results):
        expected = expected_item(item.content, item.type, item.occurred_at if item.HasField("occurred_at") else None)
        got = result.WhichOneof("result")
        if expected == "error":
            assert got == "error" and result.error.code == "invalid_input" and not result.error.retryable, (
                item,
                result,
            )
        else:  # OK means the session is open and in scope: every valid item is stored
            assert got == "data" and result.data.stored and result.data.scope == world.scope, (item, result)


# ------------------------------------------------------------------------------------------ Recall


@fuzz_settings(70)
@given(data=st.data())
def test_fuzz_recall(fuzz_server, world, data):
    f = Fields(
        data,
        [
            "mode",
            "session_id",
            "scope",
            "query",
            "page_size",
            "task_context",
            "semantic_context",
            "evidence_mode",
            "continue_from",
        ],
    )
    mode = f("mode", st.sampled_from(["fresh", "continuation"]), st.sampled_from(["both", "neither"]))
    request = pb.RecallRequest(
        session_id=f("session_id", valid_ids(world.open_session), other_ids(world)),
        scope=f("scope", valid_scope(world), odd_scopes(world)),
    )
    if mode in ("continuation", "both"):
        request.continue_from = f(
            "continue_from", valid_ids(world.cursor), st.one_of(other_ids(world), st.just("cur_" + "Zz9_" * 8))
        )
    if mode in ("fresh", "both"):
        setopt(
            request,
            query=f("query", VALID_TEXT, texts(4096)),
            page_size=f("page_size", optional(st.integers(1, 10)), st.one_of(st.sampled_from([0, 11, -1]), INT32)),
            task_context=f("task_context", optional(VALID_CONTEXT), STRUCTS),
            semantic_context=f("semantic_context", optional(VALID_TEXT), texts(4096)),
        )
    request.evidence_mode = f(
        "evidence_mode", st.sampled_from([0, 1, 2] if mode == "fresh" else [0, 1]), enum_numbers(res.EvidenceMode)
    )
    code, response, _ = check_call(fuzz_server, "Recall", request)
    if code == grpc.StatusCode.OK:
        assert response.session_id == world.open_session and len(response.evidence) <= 8
    else:
        assert f.wild or f.target is not None, f"a valid Recall was refused: {code}"


# ------------------------------------------------------------------------------------------ Feedback


def memory_entries(world: World, valid: bool) -> st.SearchStrategy[pb.MemoryFeedbackEntry]:
    """Labels may be any number either way: an undefined one is a per-target rejection, not a refusal."""
    mid = st.sampled_from(world.memory_ids + world.foreign_memory_ids + JUNK_IDS[:11])
    return st.builds(
        lambda memory_id, assessment, stale, replacement, reason, relevance, effect: setopt(
            pb.MemoryFeedbackEntry(memory_id=memory_id, assessment=assessment),
            stale_reason=stale,
            replacement_memory_id=replacement,
            reason=reason,
            relevance=relevance,
            effect=effect,
        ),
        mid if valid else st.one_of(mid, other_ids(world)),
        enum_numbers(pb.MemoryAssessment),
        optional(enum_numbers(pb.StaleReason)),
        optional(mid if valid else other_ids(world)),
        optional(VALID_TEXT if valid else texts(4096)),
        optional(enum_numbers(pb.Relevance)),
        optional(enum_numbers(res.Effect)),
    )


def procedure_entries(world: World, valid: bool) -> st.SearchStrategy[pb.ProcedureFeedbackEntry]:
    pid = st.sampled_from([world.procedure_id, "proc_sess_000000000000"])
    text = VALID_TEXT if valid else texts(4096)
    return st.builds(
        lambda procedure_id, use, effect, contribution, reason: setopt(
            pb.ProcedureFeedbackEntry(procedure_id=procedure_id, use=use),
            effect=effect,
            contribution=contribution,
            reason=reason,
        ),
        pid if valid else st.one_of(pid, other_ids(world)),
        enum_numbers(pb.ProcedureUse),
        optional(enum_numbers(res.Effect)),
        optional(text),
        optional(text),
    )


def feedback_fields(world: World, f: Fields, prefix: str, *, long_lists: bool) -> dict:
    retrievals = (world.activation_id, world.recall_id, world.closed_retrieval, world.foreign_retrieval)
    many = lists_of if long_lists else (lambda strategy, _limit: st.lists(strategy, max_size=3))
    return dict(
        retrieval_id=f(prefix + "retrieval_id", valid_ids(*retrievals), other_ids(world)),
        memory_feedback=f(
            prefix + "memory_feedback",
            st.lists(memory_entries(world, True), max_size=3),
            many(memory_entries(world, False), 200),
        ),
        procedure_feedback=f(
            prefix + "procedure_feedback",
            st.lists(procedure_entries(world, True), max_size=2),
            st.lists(procedure_entries(world, False), max_size=2),
        ),
        retrieval_quality=f(prefix + "retrieval_quality", optional(VALID_TEXT), texts(4096)),
        missing=f(prefix + "missing", st.lists(VALID_TEXT, max_size=2), many(texts(4096), 200)),
        coverage=f(prefix + "coverage", optional(st.sampled_from([0, 1, 2])), enum_numbers(pb.Coverage)),
    )


@fuzz_settings(60)
@given(data=st.data())
def test_fuzz_feedback(fuzz_server, world, data):
    names = ["retrieval_id", "memory_feedback", "procedure_feedback", "retrieval_quality", "missing", "coverage"]
    f = Fields(data, ["form", "items", *names, *(f"items[0].{n}" for n in names)])
    form = f("form", st.sampled_from(["scalar", "batch"]), st.sampled_from(["both", "neither"]))
    request = pb.FeedbackRequest()
    items: list[pb.FeedbackItem] = []
    if form in ("scalar", "both"):
        setopt(request, **feedback_fields(world, f, "", long_lists=True))
    if form in ("batch", "both"):
        count = f("items", st.integers(1, 3), st.sampled_from([0, 100, 101]))
        # A hundred items repeat the first few: item fields keep short lists (or the request is huge).
        drawn = [
            setopt(pb.FeedbackItem(), **feedback_fields(world, f, f"items[{min(i, 1)}].", long_lists=False))
            for i in range(min(count, 3))
        ]
        items = [drawn[i % len(drawn)] for i in range(count)] if drawn else []
        request.items.extend(items)
        if f.perturbs("coverage"):
            request.coverage = f("coverage", st.sampled_from([0, 1]), enum_numbers(pb.Coverage))
    code, response, _ = check_call(fuzz_server, "Feedback", request)
    if code != grpc.StatusCode.OK:
        return  # valid feedback may still be refused: NOT_FOUND for the scalar form's unknown retrieval
    if items:
        assert len(response.batch.results) == len(items), "one result per item"
        for item, result in zip(items, response.batch.results):
            if result.WhichOneof("result") == "data":
                assert result.data.retrieval_id == item.retrieval_id.strip()
            else:
                assert result.error.code in ("invalid_input", "not_found"), result.error
    else:
        assert response.record.retrieval_id == request.retrieval_id.strip()


# ------------------------------------------------------------------------------------------ Commit


def trajectory_entries(valid: bool) -> st.SearchStrategy[pb.TrajectoryEntry]:
    return st.builds(
        lambda kind, summary, status: pb.TrajectoryEntry(kind=kind, summary=summary, status=status),
        st.sampled_from([1, 2]) if valid else enum_numbers(pb.TrajectoryKind),
        VALID_TEXT
        if valid
        else st.one_of(texts(1000), st.sampled_from(["Called slowave Activate", "é" * 1000, "😀" * 1001])),
        st.sampled_from([0, 1, 2, 3, 4]) if valid else enum_numbers(pb.TrajectoryStatus),
    )


def verifications(valid: bool) -> st.SearchStrategy[pb.Verification | None]:
    if valid:
        return st.builds(
            lambda status, summary, refs: pb.Verification(status=status, summary=summary, evidence_refs=refs),
            st.sampled_from([1, 2, 3]),
            VALID_TEXT,
            st.lists(VALID_TEXT, max_size=2),
        )
    return st.one_of(
        st.none(),
        st.builds(
            lambda status, summary, refs: pb.Verification(status=status, summary=summary, evidence_refs=refs),
            enum_numbers(res.VerificationStatus),
            texts(4096),
            lists_of(texts(4096), 200),
        ),
    )


def procedures(valid: bool) -> st.SearchStrategy[pb.CommitProcedure | None]:
    if valid:
        return optional(
            st.builds(
                lambda goal, summary, context, steps: setopt(
                    pb.CommitProcedure(), goal=goal, summary=summary, context=context, steps=steps
                ),
                optional(VALID_TEXT),
                VALID_TEXT,
                optional(VALID_CONTEXT),
                st.lists(VALID_TEXT, max_size=3),
            )
        )
    return st.builds(
        lambda goal, summary, context, steps, caveats: setopt(
            pb.CommitProcedure(), goal=goal, summary=summary, context=context, steps=steps, caveats=caveats
        ),
        optional(texts(4096)),
        optional(texts(4096)),
        optional(STRUCTS),
        lists_of(texts(4096), 200),
        lists_of(texts(4096), 200),
    )


@fuzz_settings(60)
@given(data=st.data())
def test_fuzz_commit(fuzz_server, world, data):
    f = Fields(data, ["session", "final_goal", "outcome", "outcome_summary", "verification", "procedure", "trajectory"])
    target = f("session", st.sampled_from(["fresh", "fresh", "gated", "closed"]), st.just("other"))
    stub = fuzz_server.stub
    if target == "fresh":  # nothing exposed: the gate passes, a valid request closes it
        session_id = activate(stub, new_scope("empty"), task="Nothing to find here").session_id
    elif target == "gated":  # exposures without feedback: FAILED_PRECONDITION incomplete_feedback
        session_id = activate(stub, world.gate_scope, task=" ".join(GATE)).session_id
    elif target == "closed":
        session_id = world.closed_session
    else:  # anything but the world's open session, which the other tests need open
        session_id = data.draw(other_ids(world).filter(lambda v: v.strip() != world.open_session), "session_id")
    request = pb.CommitRequest(
        session_id=session_id,
        final_goal=f("final_goal", VALID_TEXT, texts(4096)),
        outcome=f("outcome", st.sampled_from([1, 2, 3]), enum_numbers(res.Outcome)),
        outcome_summary=f("outcome_summary", VALID_TEXT, texts(4096)),
    )
    setopt(
        request,
        verification=f("verification", verifications(True), verifications(False)),
        procedure=f("procedure", procedures(True), procedures(False)),
        trajectory=f(
            "trajectory", st.lists(trajectory_entries(True), max_size=3), lists_of(trajectory_entries(False), 32)
        ),
    )
    code, response, err = check_call(fuzz_server, "Commit", request)
    if code == grpc.StatusCode.OK:
        assert response.committed and response.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
        if target in ("fresh", "closed"):
            assert response.operation == (
                pb.COMMIT_OPERATION_UPDATED if target == "closed" else pb.COMMIT_OPERATION_CLOSED
            )
    elif target == "gated" and code == grpc.StatusCode.FAILED_PRECONDITION:
        assert err.reason == "INCOMPLETE_FEEDBACK" and err.outstanding
    if target == "gated" and not f.wild and f.target is None:
        assert code == grpc.StatusCode.FAILED_PRECONDITION, f"the gate let an unassessed session close: {code}"
    elif code != grpc.StatusCode.OK:
        assert f.wild or f.target is not None, f"a valid Commit was refused: {code} {err}"


# ------------------------------------------------------------------------------------------ raw bytes

REQUESTS = {
    "Activate": pb.ActivateRequest,
    "Remember": pb.RememberRequest,
    "Recall": pb.RecallRequest,
    "Feedback": pb.FeedbackRequest,
    "Commit": pb.CommitRequest,
}
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
        "Remember": pb.RememberRequest(
            session_id=world.open_session, scope=world.scope, content="Raw fuzz claim", type=res.MEMORY_TYPE_FACT
        ),
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
            lambda p: (valid if p[2] else b"") + _string_field(p[0], p[1])
        ),
        st.just(valid + _varint(7 << 3 | 2) + _varint(1000)),  # a length past the end
        st.just(_varint(1 << 3 | 7)),  # wire type 7 does not exist
    )


@fuzz_settings(20)
@pytest.mark.parametrize("rpc", sorted(REQUESTS))
@given(data=st.data())
def test_fuzz_raw_bytes(fuzz_server, world, rpc, data):
    raw = data.draw(raw_requests(world, rpc), "bytes")
    code, _, err = check_call(fuzz_server, rpc, raw, raw=True)
    try:
        REQUESTS[rpc].FromString(raw)
    except Exception:
        assert code == grpc.StatusCode.INVALID_ARGUMENT and err.paths == [""], (code, err)


@pytest.mark.parametrize("rpc", ["Feedback", "Commit"])
def test_refusal_with_hundreds_of_violations_still_reaches_the_client(fuzz_server, world, rpc):
    """Every entry of every list invalid: the status details stay within gRPC's default 8 KiB
    metadata limit, so the client gets INVALID_ARGUMENT with its BadRequest — not RESOURCE_EXHAUSTED
    "received metadata size exceeds soft limit" — and the BadRequest says how many it left out."""
    long = "x" * 4097
    if rpc == "Feedback":
        request = pb.FeedbackRequest(
            retrieval_id=world.activation_id,
            missing=[long] * 200,
            memory_feedback=[
                pb.MemoryFeedbackEntry(memory_id="m" * 257, assessment=1, reason=long) for _ in range(200)
            ],
        )
        total = 600
    else:
        request = pb.CommitRequest(
            session_id=world.closed_session,
            final_goal="g",
            outcome=1,
            outcome_summary="s",
            verification=pb.Verification(status=1, summary="v", evidence_refs=[long] * 200),
            procedure=pb.CommitProcedure(summary="p", steps=[long] * 200, caveats=[long] * 200),
        )
        total = 600
    for _ in range(3):  # the soft limit refuses oversized metadata at random: one answer could be luck
        code, _, err = check_call(fuzz_server, rpc, request)
        assert code == grpc.StatusCode.INVALID_ARGUMENT, code
        assert 10 < len(err.violations) < total and "more violations not listed" in err.violations[-1][1], (
            err.violations[-1]
        )


def test_server_still_serves_a_whole_cycle_after_fuzzing(fuzz_server, world):
    """Runs last in this module: after every fuzzed call the service still works end to end."""
    stub = fuzz_server.stub
    a = activate(stub, world.scope, task=WIDGETS[0])
    assess_all(stub, a)
    assert commit(stub, a.session_id).committed
