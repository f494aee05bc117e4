"""Duplicate and conflict flags over real gRPC (behaviour §6 `similar` / `possibly_supersedes`,
§10 `conflicting_memories`): Remember names the older active memories a new claim may replace or
repeat, in its own scope only, for scalar and batch calls; a retrieval warns when a page holds two
versions of one fact; nothing is ever retired by the flags. The MCP bridge carries them in JSON."""

from __future__ import annotations

import threading
import uuid

from slowave.service import retrieval as service_retrieval
from tests.integration.test_mcp_bridge import bridge, data_of
from tests.support import activate, commit, new_scope, pb, remember, remember_alone, res, seed_memories

__all__ = ["bridge"]


def service() -> str:
    """A service name of its own, so no other test's memories resemble this one's (letters only: a
    name with digits would read as a value that changes, like eu-west-1)."""
    return "svc-" + "".join(chr(ord("a") + int(c, 16)) for c in uuid.uuid4().hex[:8])


def batch(stub, session_id: str, scope: str, contents: list[str]) -> list[pb.RememberResult]:
    response = stub.Remember(
        pb.RememberRequest(
            session_id=session_id,
            scope=scope,
            memories=[pb.RememberItem(content=c, type=res.MEMORY_TYPE_FACT) for c in contents],
        ),
        timeout=30,
    )
    assert all(r.HasField("data") for r in response.batch.results), response
    return [r.data for r in response.batch.results]


def test_remember_flags_an_older_version_and_a_restatement(stub, scope):
    s = service()
    a = activate(stub, scope, task=f"Note the ports of {s}")
    old = remember(stub, a.session_id, scope, f"{s} listens on port 8080 in production.")
    assert list(old.similar) == [] and list(old.possibly_supersedes) == []
    unrelated = remember(stub, a.session_id, scope, "The team prefers Mermaid diagrams in design docs.")
    assert list(unrelated.similar) == [] and list(unrelated.possibly_supersedes) == []

    new = remember(stub, a.session_id, scope, f"{s} listens on port 9090 in production.")
    assert new.disposition == pb.DISPOSITION_CREATED
    assert list(new.possibly_supersedes) == [old.memory_id] and list(new.similar) == []

    again = remember(stub, a.session_id, scope, f"In production the {s} port is 9090.")
    assert list(again.similar) == [new.memory_id] and list(again.possibly_supersedes) == [old.memory_id]

    # An exact repeat is MATCHED, as before, and flags nothing.
    repeat = remember(stub, a.session_id, scope, f"{s} listens on port 9090 in production.")
    assert repeat.disposition == pb.DISPOSITION_MATCHED and repeat.memory_id == new.memory_id
    assert list(repeat.similar) == [] and list(repeat.possibly_supersedes) == []
    commit(stub, a.session_id)


def test_flags_that_cannot_be_read_leave_the_claims_stored(stub, scope, monkeypatch):
    """Flags are read after the claims are committed (outside the writer lock): if that read fails,
    the call still succeeds, without flags, and the claims stay stored."""
    s = service()
    a = activate(stub, scope, task=f"Note the ports of {s}")
    old = remember(stub, a.session_id, scope, f"{s} listens on port 8080 in production.")

    def unreadable(*_args, **_kwargs):
        raise RuntimeError("the flags' snapshot failed")

    monkeypatch.setattr("slowave.service.remember.flags", unreadable)
    new = remember(stub, a.session_id, scope, f"{s} listens on port 9090 in production.")
    assert new.disposition == pb.DISPOSITION_CREATED
    assert list(new.possibly_supersedes) == [] and list(new.similar) == []
    monkeypatch.undo()

    # Stored: the same claim again is MATCHED to it, and a restatement is flagged against both.
    again = remember(stub, a.session_id, scope, f"{s} listens on port 9090 in production.")
    assert again.disposition == pb.DISPOSITION_MATCHED and again.memory_id == new.memory_id
    restated = remember(stub, a.session_id, scope, f"In production the {s} port is 9090.")
    assert list(restated.similar) == [new.memory_id] and list(restated.possibly_supersedes) == [old.memory_id]
    commit(stub, a.session_id)


def test_flags_never_name_another_scopes_memories(stub, scope):
    s = service()
    other = new_scope()
    b = activate(stub, other, task="seed the other scope")
    remember(stub, b.session_id, other, f"{s} is built and deployed by Jenkins.")
    commit(stub, b.session_id)

    a = activate(stub, scope, task="seed")
    r = remember(stub, a.session_id, scope, f"{s} is built and deployed by GitHub Actions.")
    assert list(r.similar) == [] and list(r.possibly_supersedes) == []
    commit(stub, a.session_id)


def test_batch_remember_flags_against_earlier_items_and_older_memories(stub, scope):
    s = service()
    a = activate(stub, scope, task="seed")
    first = remember(stub, a.session_id, scope, f"The {s} cache runs Redis 6.2.")
    results = batch(
        stub,
        a.session_id,
        scope,
        [
            f"The {s} cache was upgraded to Redis 7.0 in OPS-17.",
            f"The {s} HTTP client timeout is 30 seconds.",
            f"The {s} cache was upgraded to Redis 7.2.",  # the ticket of the last change left out
            f"The {s} HTTP client timeout is 30 seconds.",  # a repeat within the batch
        ],
    )
    assert list(results[0].possibly_supersedes) == [first.memory_id]
    assert list(results[1].possibly_supersedes) == [] and list(results[1].similar) == []
    assert list(results[2].possibly_supersedes) == [first.memory_id, results[0].memory_id]
    assert results[3].memory_id == results[1].memory_id and results[3].disposition == pb.DISPOSITION_MATCHED
    assert list(results[3].similar) == [] and list(results[3].possibly_supersedes) == []
    commit(stub, a.session_id)


def test_a_page_with_both_versions_warns_and_nothing_is_retired(server, stub, scope):
    s = service()
    a = activate(stub, scope, task="seed")
    old = remember(stub, a.session_id, scope, f"{s} is built and deployed by Jenkins.")
    new = remember(stub, a.session_id, scope, f"As of 2025-03-01, {s} is built and deployed by GitHub Actions.")
    other = remember(stub, a.session_id, scope, f"{s} logs are kept for 30 days.")
    assert list(new.possibly_supersedes) == [old.memory_id]
    commit(stub, a.session_id)

    page = activate(stub, scope, task=f"How is {s} built and deployed?")
    served = {m.memory_id for m in page.memories}
    assert {old.memory_id, new.memory_id} <= served  # both still active: the flag retired nothing
    conflicts = [w for w in page.warnings if w.code == "conflicting_memories"]
    assert len(conflicts) == 1
    assert old.memory_id in conflicts[0].message and new.memory_id in conflicts[0].message
    assert other.memory_id not in conflicts[0].message
    stub.Feedback(pb.FeedbackRequest(retrieval_id=page.retrieval_id, coverage=pb.COVERAGE_COMPLETE), timeout=30)
    commit(stub, page.session_id)

    recall_session = activate(stub, scope, task=f"Check the logs of {s}")
    recalled = stub.Recall(
        pb.RecallRequest(session_id=recall_session.session_id, scope=scope, query=f"Which system deploys {s}?"),
        timeout=30,
    )
    assert [w.code for w in recalled.warnings].count("conflicting_memories") == 1

    # Once the agent retires the older version (the flag's suggestion), the page no longer warns.
    retire = activate(stub, scope, task=f"How is {s} built and deployed?")
    assert "conflicting_memories" in [w.code for w in retire.warnings]
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=retire.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=old.memory_id,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_SUPERSEDED,
                    replacement_memory_id=new.memory_id,
                    reason="GitHub Actions replaced Jenkins",
                )
            ],
            coverage=pb.COVERAGE_COMPLETE,
        ),
        timeout=30,
    )
    commit(stub, retire.session_id)
    after = activate(stub, scope, task=f"How is {s} built and deployed?")
    assert old.memory_id not in {m.memory_id for m in after.memories}
    assert new.memory_id in {m.memory_id for m in after.memories}
    assert "conflicting_memories" not in [w.code for w in after.warnings]


def test_the_newer_version_of_a_fact_ranks_above_the_older(stub, scope, monkeypatch):
    """Ranking rule (docs/retrieval.md "Versions of one fact"): the older claim says the cue's words
    more plainly and would rank first on its words alone; it is placed just below the newer
    version, both stay on the page, the page warns, and unrelated memories keep their relevance."""
    s = service()
    old = remember_alone(stub, scope, f"{s} uses Postgres 13 for its primary database.")
    other = remember_alone(stub, scope, f"{s} uses Postgres connection pooling through PgBouncer.")
    new = remember_alone(
        stub, scope, f"{s} was upgraded on 2024-05-02 and now uses Postgres 16 for its primary database."
    )
    page = activate(stub, scope, task=f"Which Postgres version does {s} use for its primary database?")
    ranked = [m.memory_id for m in page.memories]
    by_id = {m.memory_id: m.ranking for m in page.memories}
    assert ranked.index(new) < ranked.index(old)
    assert by_id[old].relevance == round(by_id[new].relevance - 0.000001, 6)
    assert other in by_id
    assert [w.code for w in page.warnings].count("conflicting_memories") == 1
    assert "versions(10)" in page.retrieval_policy_version

    # With the rule switched off (the server runs in this process) the older one is first on its
    # words: the rule is what moved it.
    monkeypatch.setattr(service_retrieval, "version_pairs", lambda admitted, memories, stored=None: ([], []))
    without = activate(stub, scope, task=f"Which Postgres version does {s} use for its primary database?")
    assert [m.memory_id for m in without.memories].index(old) < [m.memory_id for m in without.memories].index(new)
    # The first page's warning came from the rule's own comparisons; the page check, asked afresh
    # here (the rule compared nothing), says the same.
    conflicts = [w.message for w in page.warnings if w.code == "conflicting_memories"]
    assert [w.message for w in without.warnings if w.code == "conflicting_memories"] == conflicts

    # Once the agent retires the older version, its relevance goes to its successor (supersession):
    # the rule compares active memories only, so it does not take that away.
    raw = {m.memory_id: m.ranking.relevance for m in without.memories}
    assert raw[old] > raw[new]
    monkeypatch.undo()
    stale = pb.MemoryFeedbackEntry(
        memory_id=old,
        assessment=pb.MEMORY_ASSESSMENT_STALE,
        stale_reason=pb.STALE_REASON_SUPERSEDED,
        replacement_memory_id=new,
        reason="upgraded to Postgres 16",
    )
    stub.Feedback(pb.FeedbackRequest(retrieval_id=page.retrieval_id, memory_feedback=[stale]), timeout=30)
    after = activate(stub, scope, task=f"Which Postgres version does {s} use for its primary database?")
    assert old not in {m.memory_id for m in after.memories}
    assert next(m for m in after.memories if m.memory_id == new).ranking.relevance == raw[old]


def test_a_new_version_pairs_in_a_scope_that_talks_of_its_value_more_than_of_its_service(stub, scope):
    """The version rule's topic check weighs a name replaced by another name; a named value whose
    number changes (Postgres 13 → 16) is a new version however often the scope mentions Postgres. In
    this scope Postgres 13 is mentioned by more claims than the service is (the check once read that as
    a change of topic and left the older claim first), yet the newer version ranks above the older."""
    s = service()
    seed_memories(stub, scope, [f"{service()} keeps its data in Postgres 13." for _ in range(4)])
    old = remember_alone(stub, scope, f"{s} uses Postgres 13.")
    # Remember's flag reads the same rule: the newer claim names the older as possibly superseded.
    notes = activate(stub, scope, task="taking notes", initial_goal="notes")
    flagged = remember(stub, notes.session_id, scope, f"{s} was upgraded on 2024-05-02 and now uses Postgres 16.")
    assert list(flagged.possibly_supersedes) == [old]
    new = flagged.memory_id
    page = activate(stub, scope, task=f"What Postgres version does {s} use?")
    ranked = [m.memory_id for m in page.memories]
    assert ranked.index(new) < ranked.index(old)
    assert "conflicting_memories" in [w.code for w in page.warnings]


def test_the_mcp_bridge_carries_the_flags(bridge, scope):
    s = service()
    a = data_of(bridge.call("slowave_activate", {"task": "Store facts", "initial_goal": "Store", "scope": scope}))
    old = data_of(
        bridge.call(
            "slowave_remember",
            {"session_id": a["session_id"], "scope": scope, "type": "fact", "content": f"{s} uses Postgres 13."},
        )
    )
    assert old["similar"] == [] and old["possibly_supersedes"] == []
    results = data_of(
        bridge.call(
            "slowave_remember",
            {
                "session_id": a["session_id"],
                "scope": scope,
                "memories": [
                    {"content": f"{s} was upgraded on 2025-02-03 and now uses Postgres 16.", "type": "fact"},
                    {"content": f"{s} uses Postgres 13 for its data.", "type": "fact"},
                ],
            },
        )
    )["results"]
    assert results[0]["data"]["possibly_supersedes"] == [old["memory_id"]]
    assert results[1]["data"]["similar"] == [old["memory_id"]]


FILLER_WORDS = (
    "latency error saturation traffic queue disk memory socket thread cache retry backoff quota shard "
    "replica index cursor batch lease token audit canary rollout budget heap garbage compaction "
    "checkpoint snapshot journal mutex semaphore pipeline scheduler webhook cron ingress egress "
    "firewall certificate"
).split()  # 40: the name's terms in 41 memories' own words and in about as many session contexts'


def test_an_older_version_is_found_though_its_name_fills_the_session_context_around_it(stub, scope):
    """Remember's flags ask the index for memories holding the claim's rarest words in their *own*
    words, and count only those against the candidate budget. A service named by many claims of
    one session is in most of their session contexts too: counted there as well, its name no longer
    fitted the budget, the query held only the claim's other words, and an older version that shares
    just the name was never read (bench/conflicts.py: `possibly_supersedes` recall 0.899 → 0.981)."""
    s = service()
    other = activate(stub, scope, task="Note the archive region")
    remember(stub, other.session_id, scope, "The ca-central-1 region hosts the cold archive.")
    commit(stub, other.session_id)

    a = activate(stub, scope, task=f"Note how {s} runs")
    old = remember(stub, a.session_id, scope, f"{s} is hosted in us-west-2.")
    batch(stub, a.session_id, scope, [f"{s} dashboards show {w} panels." for w in FILLER_WORDS])

    new = remember(stub, a.session_id, scope, f"{s} was migrated to ca-central-1 on 2025-09-11.")
    assert new.disposition == pb.DISPOSITION_CREATED
    assert list(new.possibly_supersedes) == [old.memory_id]
    commit(stub, a.session_id)


def _stored_shapes(server, numbers: list[int]) -> dict[int, tuple[str, str | None]]:
    """(content, claim_shape) of these memories, read outside the service."""
    from sqlalchemy import select

    from slowave.storage import tables as t
    from tests.support import raw_engine

    engine = raw_engine(server.database_url)
    try:
        with engine.connect() as conn:
            m = t.memories
            rows = conn.execute(select(m.c.number, m.c.content, m.c.claim_shape).where(m.c.number.in_(numbers)))
            return {r.number: (r.content, r.claim_shape) for r in rows}
    finally:
        engine.dispose()


def _number(memory_id: str) -> int:
    return int(memory_id[4:])


def test_flags_and_the_version_check_read_each_older_claims_stored_shape(make_server, monkeypatch):
    """Each claim's shape is parsed at Remember and stored with it (migration 0016). In a process
    that has cached no shape yet (one that just started), a flag and Activate's version check read
    the older claims' stored records: the only claim parsed is the one being remembered."""
    from slowave.domain import near_duplicates as nd

    server = make_server()
    scope, s = new_scope("shapes"), service()
    a = activate(server.stub, scope, task=f"Note the ports of {s}")
    old = remember(server.stub, a.session_id, scope, f"{s} listens on port 8080 in production.")
    other = remember(server.stub, a.session_id, scope, f"{s} writes its logs to Loki.")
    for content, record in _stored_shapes(server, [_number(old.memory_id), _number(other.memory_id)]).values():
        assert record == nd.shape_record(nd.parse_claim(content))

    parsed: list[str] = []
    parse = nd.parse_claim

    def counted(text: str):
        # Parses on the requests' threads only: the server's consolidator may meanwhile store an
        # episode of an earlier test's session (its own claim, parsed in its own thread).
        if threading.current_thread().name.startswith("slowave-rpc"):
            parsed.append(text)
        return parse(text)

    monkeypatch.setattr(nd, "parse_claim", counted)
    monkeypatch.setattr(nd, "SHAPES", nd.ShapeCache(nd.SHAPE_CACHE))  # nothing cached
    new_text = f"{s} listens on port 9090 in production."
    new = remember(server.stub, a.session_id, scope, new_text)
    assert list(new.possibly_supersedes) == [old.memory_id] and list(new.similar) == []
    assert parsed == [new_text]

    monkeypatch.setattr(nd, "SHAPES", nd.ShapeCache(nd.SHAPE_CACHE))
    parsed.clear()
    page = activate(server.stub, scope, task=f"Which port does {s} listen on in production?")
    ids = [m.memory_id for m in page.memories]
    assert ids.index(new.memory_id) < ids.index(old.memory_id)  # the newer version first
    assert [w.code for w in page.warnings if w.code == "conflicting_memories"]
    assert parsed == []
    commit(server.stub, a.session_id)


def test_a_starting_server_stores_the_shapes_its_active_memories_lack(make_server):
    """Memories stored before migration 0016 (no record) or under another parse (an older
    version's record) get their records when a server starts on the store, before it serves;
    a retired memory is left as it is."""
    from sqlalchemy import update

    from slowave.domain import near_duplicates as nd
    from slowave.storage import tables as t
    from tests.support import raw_engine

    first = make_server()
    scope, s = new_scope("shapes"), service()
    a = activate(first.stub, scope, task=f"Note the ports of {s}")
    ids = [
        remember(first.stub, a.session_id, scope, text).memory_id
        for text in (f"{s} listens on port 8080.", f"{s} runs Python 3.11.", f"{s} is owned by Team Vega.")
    ]
    commit(first.stub, a.session_id)
    first.stop()
    none, older, retired = (_number(i) for i in ids)
    engine = raw_engine(first.database_url)
    try:
        with engine.begin() as conn:
            m = t.memories
            conn.execute(update(m).where(m.c.number.in_([none, retired])).values(claim_shape=None))
            conn.execute(update(m).where(m.c.number == older).values(claim_shape='["s0-00000000",[],0,[],"","",0]'))
            conn.execute(update(m).where(m.c.number == retired).values(status="retired"))
    finally:
        engine.dispose()

    make_server(database_url=first.database_url)
    stored = _stored_shapes(first, [none, older, retired])
    for n in (none, older):
        content, record = stored[n]
        assert record == nd.shape_record(nd.parse_claim(content))
    assert stored[retired][1] is None
