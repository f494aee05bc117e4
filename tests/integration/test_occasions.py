"""Occasions over real gRPC: the claims one session remembered about one day are scored together
(relevance.OCCASION_WEIGHT, domain.retrieval.CandidateScoring.in_occasions), on the lexical channel
and on the defaults' hybrid one. In the lexical runs the compared memories tie on their own words,
so without the rule the one stored first would rank first."""

from __future__ import annotations

from datetime import UTC, datetime

from google.protobuf import timestamp_pb2
from sqlalchemy import select

from slowave.domain.relevance import OCCASION_CLAIMS
from slowave.service import retrieval as service_retrieval
from slowave.storage import tables as t
from tests.support import activate, assess_all, commit, pb, raw_engine, res

DAY1, DAY2 = datetime(2026, 3, 2, tzinfo=UTC), datetime(2026, 3, 9, tzinfo=UTC)


def _store(stub, scope: str, contents: list[str], days: list[datetime | None]) -> list[str]:
    """Remembers the claims in order in one session, then closes it."""
    a = activate(stub, scope, task="taking notes", initial_goal="notes")
    items = []
    for content, day in zip(contents, days):
        item = pb.RememberItem(content=content, type=res.MEMORY_TYPE_FACT)
        if day is not None:
            ts = timestamp_pb2.Timestamp()
            ts.FromDatetime(day)
            item.occurred_at.CopyFrom(ts)
        items.append(item)
    r = any_remember(stub, a.session_id, scope, items)
    assess_all(stub, a)
    commit(stub, a.session_id)
    return r


def any_remember(stub, session_id: str, scope: str, items: list) -> list[str]:
    ids = []
    for start in range(0, len(items), 100):
        r = stub.Remember(
            pb.RememberRequest(session_id=session_id, scope=scope, memories=items[start : start + 100]), timeout=30
        )
        ids += [x.data.memory_id for x in r.batch.results]
    return ids


def _ranked(stub, scope: str, question: str) -> dict[str, float]:
    return {m.content: m.ranking.relevance for m in activate(stub, scope, task=question, page_size=10).memories}


def test_the_memory_whose_occasion_the_cue_is_about_ranks_first(any_server, scope):
    # Only the 40k claim's occasion names the offsite, in a claim stored AFTER it, where the
    # session context (the claims before a memory) cannot see it.
    stub = any_server.stub
    _store(stub, scope, ["The total cost was 55k.", "We replaced the office printers."], [DAY1, DAY1])
    _store(stub, scope, ["The total cost was 40k.", "That was for the Lisbon offsite in March."], [DAY2, DAY2])
    ranked = _ranked(stub, scope, "What was the total cost of the offsite?")
    order = list(ranked)
    assert order.index("The total cost was 40k.") < order.index("The total cost was 55k."), ranked
    assert ranked["The total cost was 40k."] > ranked["The total cost was 55k."], ranked


def test_an_occasion_is_one_session_on_one_day(any_server, scope):
    # One session remembers two days; two fillers keep the first claim out of the later one's
    # session context.
    stub = any_server.stub
    _store(
        stub,
        scope,
        [
            "The total cost was 55k.",
            "We replaced the office printers.",
            "The printers arrived on Friday.",
            "The total cost was 40k.",
            "That was for the Lisbon offsite in March.",
        ],
        [DAY1, DAY1, DAY1, DAY2, DAY2],
    )
    ranked = _ranked(stub, scope, "What was the total cost of the offsite?")
    assert list(ranked).index("The total cost was 40k.") < list(ranked).index("The total cost was 55k."), ranked


def test_an_occasion_never_admits_a_memory_alone(any_server, scope):
    stub = any_server.stub
    _store(stub, scope, ["The Lisbon offsite budget was approved.", "Lunch was pizza."], [DAY2, DAY2])
    found = [m.content for m in activate(stub, scope, task="Was the Lisbon offsite budget approved?").memories]
    assert found == ["The Lisbon offsite budget was approved."]


def test_a_verbatim_memory_keeps_full_relevance(any_server, scope):
    stub = any_server.stub
    _store(stub, scope, ["The offsite is in Lisbon.", "The offsite is in March."], [DAY2, DAY2])
    ranked = _ranked(stub, scope, "The offsite is in Lisbon.")
    assert ranked["The offsite is in Lisbon."] == 1.0


def test_occasions_hold_at_most_their_claims_and_only_remembered_ones(server, scope):
    count = OCCASION_CLAIMS + 6
    _store(server.stub, scope, [f"Ticket OPS-{i} was closed." for i in range(count)], [DAY1] * count)
    _store(server.stub, scope, ["Undated claim one.", "Undated claim two."], [None, None])
    engine = raw_engine(server.database_url)
    try:
        with engine.connect() as conn:
            o, m = t.occasions, t.memories
            occasions = conn.execute(
                select(o.c.number, o.c.day, o.c.claims, o.c.terms).where(o.c.scope == scope).order_by(o.c.number)
            ).all()
            members = conn.execute(select(m.c.occasion, m.c.source_kind).where(m.c.scope == scope)).all()
    finally:
        engine.dispose()
    assert [(day, claims) for _, day, claims, _ in occasions] == [
        ("2026-03-02", OCCASION_CLAIMS),
        ("2026-03-02", 6),
        ("", 2),
    ]
    assert occasions[1][3] == " ".join(f"ticket op {i} close" for i in range(OCCASION_CLAIMS, count))
    remembered = [occ for occ, kind in members if kind == "explicit_remember"]
    assert sorted(remembered) == sorted(
        [occasions[0][0]] * OCCASION_CLAIMS + [occasions[1][0]] * 6 + [occasions[2][0]] * 2
    )
    assert all(occ is None for occ, kind in members if kind != "explicit_remember")


def test_an_occasion_that_grows_is_read_afresh(any_server, scope, request, monkeypatch):
    # A retrieval reads (and caches) the occasions' terms; a later claim of the same session and
    # day joins one, and the next retrieval sees what it added. The two totals also read as two
    # versions of one fact, which would order them on its own (the server runs in this process):
    # this test watches the occasion alone.
    monkeypatch.setattr(service_retrieval, "version_pairs", lambda admitted, memories, stored=None: ([], []))
    stub = any_server.stub
    question = "What was the total cost of the offsite?"
    _store(stub, scope, ["The total cost was 55k.", "We replaced the office printers."], [DAY1, DAY1])
    a = activate(stub, scope, task="taking notes", initial_goal="notes")
    items = []
    for content in ("The total cost was 40k.", "We replaced the office chairs."):
        items.append(pb.RememberItem(content=content, type=res.MEMORY_TYPE_FACT))
        items[-1].occurred_at.FromDatetime(DAY2)
    any_remember(stub, a.session_id, scope, items)
    before = list(_ranked(stub, scope, question))
    later = pb.RememberItem(content="That was for the Lisbon offsite in March.", type=res.MEMORY_TYPE_FACT)
    later.occurred_at.FromDatetime(DAY2)
    any_remember(stub, a.session_id, scope, [later])
    after = list(_ranked(stub, scope, question))
    if request.node.callspec.params["any_server"] == "lexical":  # a tie: the claim stored first ranks first
        assert before.index("The total cost was 55k.") < before.index("The total cost was 40k."), before
    assert after.index("The total cost was 40k.") < after.index("The total cost was 55k."), (before, after)
    assess_all(stub, a)
    commit(stub, a.session_id)
