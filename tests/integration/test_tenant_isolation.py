"""Tenant isolation (behaviour §3.1): another tenant's id behaves exactly like an id that does not exist,
and the same scope string in two tenants names two independent stores.

One server, tenants `alpha` and `beta`. Alpha builds a world (sessions open and closed, retrievals
of both kinds with cursors, memories, a procedure, feedback events, a continuity token, a knowledge
gap); beta then names each of alpha's ids in every RPC and field that takes one. Each case compares
the answer with the one for a never-minted id of the same shape (not just the expected code), and
every row alpha owns is compared before and after.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
import pytest
from sqlalchemy import select

from slowave.storage import tables as t
from tests.support import (
    activate,
    assess_all,
    commit,
    commit_request,
    details_of,
    keyed_stub,
    new_scope,
    pb,
    remember,
    res,
    start_keyed_server,
    used,
)

KEY_ALPHA = "swk_alpha-0123456789abcdefghijklmnopqrstuvwxyzAB"
KEY_BETA = "swk_beta-0123456789abcdefghijklmnopqrstuvwxyzABC"


def _token(n: int) -> str:
    return secrets.token_urlsafe(n)[:n].replace("-", "a").replace("_", "b")


def ghost_ids() -> dict[str, str]:
    """Well-formed ids of every kind that were never minted."""
    return {
        "session": "sess_" + secrets.token_hex(6),
        "activation": "ctx_" + secrets.token_hex(6),
        "recall": "rec_" + secrets.token_hex(6),
        "memory": "sch_987654321",
        "procedure": "proc_sess_" + secrets.token_hex(6),
        "cursor": "cur_" + _token(32),
        "continuity": "cont_" + _token(43),
        "feedback_event": "fbe_" + secrets.token_hex(16),
    }


def tokened_claim(text: str) -> str:
    """Claims made of random tokens: nothing else in the store is admitted by them."""
    return f"{text} zk{uuid.uuid4().hex[:10]} zj{uuid.uuid4().hex[:10]}."


@dataclass
class World:
    srv: Any
    alpha: Any
    beta: Any
    scope: str
    ids: dict[str, str]  # alpha's ids by kind
    claims: list[str]
    memory_ids: list[str]
    procedure_goal: str
    gap_text: str
    fragment_scope: str
    beta_session: str
    beta_retrieval: str
    beta_memory: str


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> World:
    srv = start_keyed_server(tmp_path_factory.mktemp("tenants"), {KEY_ALPHA: "alpha", KEY_BETA: "beta"})
    alpha, beta = keyed_stub(srv.channel, KEY_ALPHA), keyed_stub(srv.channel, KEY_BETA)
    scope = new_scope()
    claims = [tokened_claim(f"Alpha fact {i}") for i in range(4)]

    # Alpha: memories, then a procedure (from a session of its own), then the sessions under test.
    seed = activate(alpha, scope, task="seeding", initial_goal="seed")
    memory_ids = [remember(alpha, seed.session_id, scope, c).memory_id for c in claims]
    assess_all(alpha, seed)
    commit(alpha, seed.session_id, outcome_summary=tokened_claim("seeded"))
    procedure_goal = tokened_claim("Rotate the alpha signing keys")
    capture = activate(alpha, scope, task=tokened_claim("capture"), initial_goal="capture")
    assess_all(alpha, capture)
    procedure_id = commit(
        alpha,
        capture.session_id,
        outcome_summary=tokened_claim("captured"),
        procedure=pb.CommitProcedure(goal=procedure_goal, summary="Rotate, publish, revoke."),
    ).procedure_id

    a = activate(alpha, scope, task=" ".join(claims), page_size=1)
    assert a.more_available and a.continue_from, "the activation needs a second page (cursor)"
    r = alpha.Recall(
        pb.RecallRequest(session_id=a.session_id, scope=scope, query=" ".join(claims), page_size=1), timeout=30
    )
    assert r.more_available and r.continue_from
    gap_text = tokened_claim("How are alpha's backups verified?")
    fb = alpha.Feedback(
        pb.FeedbackRequest(
            retrieval_id=a.retrieval_id, memory_feedback=[used(a.memories[0].memory_id)], missing=[gap_text]
        ),
        timeout=30,
    ).record
    p = activate(alpha, scope, task=procedure_goal)
    assert [x.procedure_id for x in p.procedures] == [procedure_id]
    closed = activate(alpha, scope, task=tokened_claim("closed session"))
    assess_all(alpha, closed)
    commit(alpha, closed.session_id, outcome_summary=tokened_claim("closed"))
    fragment = f"project:Frag-{uuid.uuid4().hex[:8]}"
    f = activate(alpha, fragment, task="fragment")
    remember(alpha, f.session_id, fragment, tokened_claim("Alpha keeps a fragment"))

    # Beta: one open session in the same scope whose retrieval exposes a memory of beta's own.
    bseed = activate(beta, scope, task="beta seeding", initial_goal="seed")
    beta_memory = remember(beta, bseed.session_id, scope, claims[0]).memory_id
    assess_all(beta, bseed)
    commit(beta, bseed.session_id, outcome_summary=tokened_claim("beta seeded"))
    b = activate(beta, scope, task=claims[0])
    assert [m.memory_id for m in b.memories] == [beta_memory]

    ids = {
        "session": a.session_id,
        "activation": a.retrieval_id,
        "recall": r.retrieval_id,
        "memory": a.memories[0].memory_id,
        "procedure": procedure_id,
        "cursor": a.continue_from,
        "recall_cursor": r.continue_from,
        "continuity": a.continuity_id,
        "feedback_event": fb.accepted_event_ids[0],
        "closed_session": closed.session_id,
        "closed_retrieval": closed.retrieval_id,
        "procedure_retrieval": p.retrieval_id,
    }
    srv.consolidate()
    yield World(
        srv,
        alpha,
        beta,
        scope,
        ids,
        claims,
        memory_ids,
        procedure_goal,
        gap_text,
        fragment,
        b.session_id,
        b.retrieval_id,
        beta_memory,
    )
    srv.stop()


def owned_rows(srv, tenant: str) -> dict[str, list[tuple]]:
    """Every row the tenant owns, in every table (rows without a tenant column through their owner)."""
    srv.consolidate()
    out: dict[str, list[tuple]] = {}
    with srv.running.ctx.db.engine.connect() as conn:
        for name, table in t.metadata.tables.items():
            if "tenant" in table.c:
                out[name] = sorted(tuple(r) for r in conn.execute(select(table).where(table.c.tenant == tenant)))
        retrievals = select(t.retrievals.c.id).where(t.retrievals.c.tenant == tenant)
        sessions = select(t.sessions.c.id).where(t.sessions.c.tenant == tenant)
        for table in (t.exposures, t.cursors):
            out[table.name] = sorted(
                tuple(r) for r in conn.execute(select(table).where(table.c.retrieval_id.in_(retrievals)))
            )
        lk = t.session_memory_links
        out[lk.name] = sorted(tuple(r) for r in conn.execute(select(lk).where(lk.c.session_id.in_(sessions))))
        out["tenants"] = [tuple(r) for r in conn.execute(select(t.tenants).where(t.tenants.c.name == tenant))]
    return out


# ---------------------------------------------------------------------------------- outcomes


def outcome(call: Callable[[], Any]) -> tuple:
    """What a caller can observe, minus messages (which quote the id they were given)."""
    try:
        response = call()
    except grpc.RpcError as err:
        d = details_of(err)
        return ("error", d.code, d.reason, d.domain, tuple(sorted(d.metadata.items())), tuple(sorted(d.paths)))
    if isinstance(response, pb.FeedbackResponse):
        if response.WhichOneof("result") == "record":
            return ("record", _record(response.record))
        return (
            "batch",
            tuple(
                ("error", x.error.code, x.error.retryable)
                if x.WhichOneof("result") == "error"
                else ("data", _record(x.data))
                for x in response.batch.results
            ),
        )
    return ("ok", type(response).__name__)


def _record(record: pb.FeedbackRecord) -> tuple:
    return (
        record.session_id,
        tuple((x.target_kind, x.reason, x.field) for x in record.rejected),
        len(record.accepted_event_ids),
        tuple(record.applied.retired),
    )


@dataclass(frozen=True)
class Case:
    rpc: str
    what: str
    call: Callable[[World, dict[str, str]], Callable[[], Any]]
    """Given the world and an id table (alpha's or never-minted ones), the call beta makes."""
    expected: Callable[[World, tuple], bool]


def _err(status: grpc.StatusCode, reason: str, code: str, paths: tuple = ()) -> Callable[[World, tuple], bool]:
    return lambda _w, got: (
        got == ("error", status, reason, "slowave.ai", (("code", code), ("retryable", "false")), paths)
    )


SESSION_NOT_FOUND = _err(grpc.StatusCode.NOT_FOUND, "SESSION_NOT_FOUND", "invalid_input")
CURSOR_NOT_FOUND = _err(grpc.StatusCode.NOT_FOUND, "CURSOR_NOT_FOUND", "invalid_input")
RETRIEVAL_NOT_FOUND = _err(grpc.StatusCode.NOT_FOUND, "NOT_FOUND", "not_found")
UNKNOWN_TOKEN = _err(grpc.StatusCode.INVALID_ARGUMENT, "INVALID_INPUT", "invalid_input", ("continuity_id",))


def rejected(kind: int, reason: str, field: str) -> Callable[[World, tuple], bool]:
    def check(w: World, got: tuple) -> bool:
        return (
            got[0] == "record"
            and got[1][0] == w.beta_session
            and got[1][1] == ((kind, reason, field),)
            and got[1][3] == ()
        )

    return check


def _feedback_on_beta(memory=(), procedures=()) -> Callable[[World, dict[str, str]], Callable[[], Any]]:
    return lambda w, ids: (
        lambda: w.beta.Feedback(
            pb.FeedbackRequest(
                retrieval_id=w.beta_retrieval,
                memory_feedback=[m(w, ids) for m in memory],
                procedure_feedback=[p(w, ids) for p in procedures],
            ),
            timeout=30,
        )
    )


def _sid(kind: str) -> Callable[[World, dict[str, str]], str]:
    return lambda _w, ids: ids[kind]


def _remember(kind: str, batch: bool = False):
    def make(w: World, ids: dict[str, str]) -> Callable[[], Any]:
        if batch:
            req = pb.RememberRequest(
                session_id=ids[kind],
                scope=w.scope,
                memories=[pb.RememberItem(content="Beta's claim.", type=res.MEMORY_TYPE_FACT)],
            )
        else:
            req = pb.RememberRequest(
                session_id=ids[kind], scope=w.scope, content="Beta's claim.", type=res.MEMORY_TYPE_FACT
            )
        return lambda: w.beta.Remember(req, timeout=30)

    return make


def _recall(session: Callable[[World, dict[str, str]], str], cursor: str | None = None):
    def make(w: World, ids: dict[str, str]) -> Callable[[], Any]:
        if cursor is None:
            req = pb.RecallRequest(session_id=session(w, ids), scope=w.scope, query=" ".join(w.claims))
        else:
            req = pb.RecallRequest(session_id=session(w, ids), scope=w.scope, continue_from=ids[cursor])
        return lambda: w.beta.Recall(req, timeout=30)

    return make


def _scalar_feedback(kind: str):
    return lambda w, ids: (
        lambda: w.beta.Feedback(
            pb.FeedbackRequest(
                retrieval_id=ids[kind], coverage=pb.COVERAGE_COMPLETE, memory_feedback=[used(ids["memory"])]
            ),
            timeout=30,
        )
    )


def _batch_feedback(w: World, ids: dict[str, str]) -> Callable[[], Any]:
    items = [
        pb.FeedbackItem(retrieval_id=ids["activation"], coverage=pb.COVERAGE_COMPLETE),
        pb.FeedbackItem(retrieval_id=w.beta_retrieval, retrieval_quality="fine"),
        pb.FeedbackItem(retrieval_id=ids["recall"], memory_feedback=[used(ids["memory"])]),
        pb.FeedbackItem(retrieval_id=ids["closed_retrieval"], coverage=pb.COVERAGE_COMPLETE),
    ]
    return lambda: w.beta.Feedback(pb.FeedbackRequest(items=items), timeout=30)


def _batch_expected(w: World, got: tuple) -> bool:
    not_found = ("error", "not_found", False)
    return (
        got[0] == "batch"
        and got[1][0] == not_found
        and got[1][2] == not_found
        and got[1][3] == not_found
        and got[1][1][0] == "data"
        and got[1][1][1][0] == w.beta_session
    )


def _commit(kind: str):
    return lambda w, ids: lambda: w.beta.Commit(commit_request(ids[kind]), timeout=30)


def _activate_with_token(w: World, ids: dict[str, str]) -> Callable[[], Any]:
    return lambda: w.beta.Activate(
        pb.ActivateRequest(task="t", initial_goal="g", scope=w.scope, continuity_id=ids["continuity"]), timeout=30
    )


def _memory_entry(kind: str, **kw: Any):
    return lambda _w, ids: pb.MemoryFeedbackEntry(memory_id=ids[kind], assessment=pb.MEMORY_ASSESSMENT_USED, **kw)


def _stale_own_memory(reason: int, replacement: str):
    return lambda w, ids: pb.MemoryFeedbackEntry(
        memory_id=w.beta_memory,
        assessment=pb.MEMORY_ASSESSMENT_STALE,
        stale_reason=reason,
        reason="replaced",
        replacement_memory_id=ids[replacement],
    )


def _procedure_entry(kind: str):
    return lambda _w, ids: pb.ProcedureFeedbackEntry(
        procedure_id=ids[kind], use=pb.PROCEDURE_USE_NOT_USED, effect=res.EFFECT_UNKNOWN
    )


def _ghost_table() -> dict[str, str]:
    g = ghost_ids()
    return {
        **g,
        "recall_cursor": "cur_" + _token(32),
        "closed_session": "sess_" + secrets.token_hex(6),
        "closed_retrieval": "ctx_" + secrets.token_hex(6),
        "procedure_retrieval": "ctx_" + secrets.token_hex(6),
    }


CASES = [
    Case("Activate", "continuity token", _activate_with_token, UNKNOWN_TOKEN),
    Case("Remember", "open session", _remember("session"), SESSION_NOT_FOUND),
    Case("Remember", "closed session (not SESSION_ENDED)", _remember("closed_session"), SESSION_NOT_FOUND),
    Case("Remember", "open session, batch form", _remember("session", batch=True), SESSION_NOT_FOUND),
    Case("Recall", "open session", _recall(_sid("session")), SESSION_NOT_FOUND),
    Case("Recall", "closed session", _recall(_sid("closed_session")), SESSION_NOT_FOUND),
    Case(
        "Recall",
        "activation cursor on beta's session",
        _recall(lambda w, _ids: w.beta_session, "cursor"),
        CURSOR_NOT_FOUND,
    ),
    Case(
        "Recall",
        "recall cursor on beta's session",
        _recall(lambda w, _ids: w.beta_session, "recall_cursor"),
        CURSOR_NOT_FOUND,
    ),
    Case("Recall", "alpha's session and its own cursor", _recall(_sid("session"), "cursor"), SESSION_NOT_FOUND),
    Case("Feedback", "activation retrieval", _scalar_feedback("activation"), RETRIEVAL_NOT_FOUND),
    Case("Feedback", "recall retrieval", _scalar_feedback("recall"), RETRIEVAL_NOT_FOUND),
    Case("Feedback", "retrieval of a closed session", _scalar_feedback("closed_retrieval"), RETRIEVAL_NOT_FOUND),
    Case("Feedback", "a feedback event id as retrieval", _scalar_feedback("feedback_event"), RETRIEVAL_NOT_FOUND),
    Case("Feedback", "a session id as retrieval", _scalar_feedback("session"), RETRIEVAL_NOT_FOUND),
    Case("Feedback", "batch items naming alpha's retrievals", _batch_feedback, _batch_expected),
    Case(
        "Feedback",
        "alpha's memory in memory_feedback",
        _feedback_on_beta(memory=[_memory_entry("memory")]),
        rejected(pb.TARGET_KIND_MEMORY, "target_not_exposed", "memory_id"),
    ),
    Case(
        "Feedback",
        "alpha's procedure in procedure_feedback",
        _feedback_on_beta(procedures=[_procedure_entry("procedure")]),
        rejected(pb.TARGET_KIND_PROCEDURE, "target_not_exposed", "procedure_id"),
    ),
    Case(
        "Feedback",
        "alpha's procedure in memory_feedback",
        _feedback_on_beta(memory=[_memory_entry("procedure")]),
        rejected(pb.TARGET_KIND_MEMORY, "target_not_exposed", "memory_id"),
    ),
    Case(
        "Feedback",
        "alpha's memory as superseded replacement",
        _feedback_on_beta(memory=[_stale_own_memory(pb.STALE_REASON_SUPERSEDED, "memory")]),
        rejected(pb.TARGET_KIND_MEMORY, "replacement_not_found", "replacement_memory_id"),
    ),
    Case(
        "Feedback",
        "alpha's memory as outdated replacement",
        _feedback_on_beta(memory=[_stale_own_memory(pb.STALE_REASON_OUTDATED, "memory")]),
        rejected(pb.TARGET_KIND_MEMORY, "replacement_not_found", "replacement_memory_id"),
    ),
    Case("Commit", "open session", _commit("session"), SESSION_NOT_FOUND),
    Case("Commit", "closed session (no update)", _commit("closed_session"), SESSION_NOT_FOUND),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c.rpc}: {c.what}" for c in CASES])
def test_foreign_id_behaves_like_an_id_that_does_not_exist(world, case):
    alpha_before = owned_rows(world.srv, "alpha")
    foreign = outcome(case.call(world, world.ids))
    alpha_after = owned_rows(world.srv, "alpha")
    ghost = outcome(case.call(world, _ghost_table()))
    assert case.expected(world, foreign), foreign
    assert foreign == ghost, "alpha's id must be indistinguishable from one never minted"
    assert alpha_after == alpha_before, "beta's call read into or wrote to alpha's rows"


def test_the_matrix_covers_every_rpc_and_id_kind():
    assert {c.rpc for c in CASES} == {"Activate", "Remember", "Recall", "Feedback", "Commit"}
    kinds = {
        "session",
        "closed_session",
        "activation",
        "recall",
        "closed_retrieval",
        "memory",
        "procedure",
        "cursor",
        "recall_cursor",
        "continuity",
        "feedback_event",
    }
    probe = {k: f"<{k}>" for k in _ghost_table()}
    used_kinds: set[str] = set()

    class Recorder(dict):
        def __getitem__(self, key: str) -> str:
            used_kinds.add(key)
            return probe[key]

    class FakeStub:
        def __getattr__(self, _name: str):
            return lambda *a, **kw: None

    fake = World(None, FakeStub(), FakeStub(), "project:x", {}, ["c"], [], "", "", "", "sess_b", "ctx_b", "sch_1")
    for case in CASES:
        case.call(fake, Recorder())()
    assert kinds <= used_kinds, kinds - used_kinds


# ---------------------------------------------------------------------------------- two stores


def test_same_scope_in_two_tenants_is_two_independent_stores(world):
    w = world
    # Beta stored alpha's first claim in the same scope: a new memory, not alpha's.
    assert w.beta_memory not in w.memory_ids
    again = remember(w.beta, w.beta_session, w.scope, w.claims[1])
    assert again.disposition == pb.DISPOSITION_CREATED and again.memory_id not in w.memory_ids

    alpha_view = activate(w.alpha, w.scope, task=" ".join(w.claims))
    beta_view = activate(w.beta, w.scope, task=" ".join(w.claims))
    assert {m.memory_id for m in alpha_view.memories} <= set(w.memory_ids)
    assert {m.memory_id for m in beta_view.memories} <= {w.beta_memory, again.memory_id}
    assert alpha_view.relevant_total == len(w.claims), "beta's copies are not counted in alpha's store"
    assert w.beta_memory in {m.memory_id for m in activate(w.beta, w.scope, task=w.claims[0]).memories}

    # Procedures, knowledge gaps and scope fragmentation are per tenant too.
    assert activate(w.alpha, w.scope, task=w.procedure_goal).procedures
    assert not activate(w.beta, w.scope, task=w.procedure_goal).procedures
    assert any(x.code == "known_gap" for x in activate(w.alpha, w.scope, task=w.gap_text).warnings)
    assert not any(x.code == "known_gap" for x in activate(w.beta, w.scope, task=w.gap_text).warnings)
    lower = w.fragment_scope.lower()
    assert any(x.code == "scope_fragmentation" for x in activate(w.alpha, lower, task="x").warnings)
    cold = activate(w.beta, lower, task="x")
    assert cold.memory_state == res.MEMORY_STATE_COLD_START and not cold.warnings
    gaps = w.srv.admin("knowledge-gaps", "--tenant", "beta", "--scope", w.scope)
    assert w.gap_text not in gaps
    assert w.gap_text in w.srv.admin("knowledge-gaps", "--tenant", "alpha", "--scope", w.scope)


@dataclass
class BetaWrote:
    before: tuple
    after: tuple
    before_rows: dict
    after_rows: dict


@pytest.fixture(scope="module")
def beta_wrote(world) -> BetaWrote:
    """Alpha's view of its scope before and after beta stores, assesses (used, stale), reports gaps
    and commits a procedure under the same scope string and the same words."""
    w = world
    probe_task = " ".join(w.claims) + " " + w.procedure_goal

    def alpha_view() -> tuple:
        # The probe session stays open: a commit would consolidate a lesson into alpha's store.
        a = activate(w.alpha, w.scope, task=probe_task, page_size=10)
        # Sorted: what alpha sees and its signals are compared, not the order of equal scores.
        return (
            tuple(sorted((m.memory_id, m.content, m.ranking.learned) for m in a.memories)),
            tuple((p.procedure_id, p.evidence.helped, p.evidence.harmed, p.ranking.learned) for p in a.procedures),
            tuple(sorted(x.code for x in a.warnings)),
            a.memory_state,
            a.relevant_total,
        )

    before_rows = owned_rows(w.srv, "alpha")
    before = alpha_view()
    b = activate(w.beta, w.scope, task=" ".join(w.claims))
    mine = [m.memory_id for m in b.memories]
    for i in range(3):
        remember(w.beta, b.session_id, w.scope, f"{w.claims[3]} Beta's variant {i}.")
    w.beta.Feedback(
        pb.FeedbackRequest(
            retrieval_id=b.retrieval_id,
            memory_feedback=[used(mine[0])],
            missing=[w.gap_text, "How are beta's backups verified?"],
        ),
        timeout=30,
    )
    w.beta.Feedback(
        pb.FeedbackRequest(
            retrieval_id=b.retrieval_id,
            coverage=pb.COVERAGE_COMPLETE,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=m,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_OUTDATED,
                    reason="beta moved on",
                )
                for m in mine[1:]
            ],
        ),
        timeout=30,
    )
    commit(
        w.beta,
        b.session_id,
        outcome_summary=w.claims[2],
        procedure=pb.CommitProcedure(goal=w.procedure_goal, summary="Beta's own way."),
    )
    w.srv.consolidate()
    return BetaWrote(before, alpha_view(), before_rows, owned_rows(w.srv, "alpha"))


def test_beta_writes_in_the_same_scope_change_nothing_alpha_sees(beta_wrote):
    before, after = beta_wrote.before, beta_wrote.after
    assert after == before, "alpha's memories, learned values, procedures, warnings or totals changed"
    # Alpha's probes add sessions and retrievals of its own; its store itself is untouched.
    for name in ("memories", "procedures", "knowledge_gaps", "memory_vectors", "source_events", "episodes"):
        assert beta_wrote.after_rows[name] == beta_wrote.before_rows[name], name


def test_another_tenants_words_do_not_change_relevance(world):
    """Word statistics and the full-text index are partitioned by tenant and scope, so whether
    another tenant stored a word is invisible in this tenant's relevance (and in what it costs)."""
    w = world
    marker, secret = f"zm{uuid.uuid4().hex[:10]}", f"zs{uuid.uuid4().hex[:10]}"
    s = activate(w.alpha, w.scope, task="alpha claims", initial_goal="seed")
    mine = remember(
        w.alpha, s.session_id, w.scope, f"The {marker} service keeps its audit log for ninety days in cold storage."
    ).memory_id
    assess_all(w.alpha, s)
    commit(w.alpha, s.session_id, outcome_summary=tokened_claim("stored"))
    w.srv.consolidate()  # alpha's own consolidated lesson must not land between the two looks
    probe = f"{marker} {secret}"  # alpha asks about its word and a word only beta may hold

    def alpha_sees() -> dict[str, float]:
        return {m.memory_id: m.ranking.relevance for m in activate(w.alpha, w.scope, task=probe).memories}

    before = alpha_sees()
    assert mine in before
    b = activate(w.beta, w.scope, task="beta claims", initial_goal="seed")
    for i in range(3):
        remember(w.beta, b.session_id, w.scope, f"Beta's acquisition {secret} closes in quarter {i}.")
    assert alpha_sees() == before, "alpha can tell that another tenant stored the word"
