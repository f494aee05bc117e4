"""`slowave-admin erase` over a real server (docs/operations.md "Erasure"; both backends).

Every text a test stores carries a unique random token. After the erasure no RPC (Activate, Recall)
and no admin view (session, knowledge gaps, erasures) shows any token, no column of any table holds
one, and on SQLite neither the database file nor its -wal and -shm contain its bytes. The other
scope of the same tenant is compared row by row before and after; `--dry-run` changes nothing.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid

from sqlalchemy import JSON, Text, cast, func, select, text

from slowave.service import retrieval as service_retrieval
from slowave.storage import tables as t
from tests.support import (
    Server,
    activate,
    assess_all,
    commit,
    keyed_stub,
    new_scope,
    pb,
    raw_engine,
    remember,
    res,
    start_keyed_server,
    wait_until,
)


def token() -> str:
    # Letters and digits only, ending in a consonant the stemmer keeps: one term, indexed verbatim.
    return f"zq{uuid.uuid4().hex[:12]}k"


def populate(stub, scope: str) -> tuple[dict[str, str], list[str], list[str]]:
    """Memories, feedback texts, a trajectory, a procedure, an outcome summary (a lesson once
    consolidated) and a knowledge gap, each with its own token; returns (tokens, memory ids,
    session ids)."""
    tok = {name: token() for name in ("task", "goal", "mem1", "mem2", "reason", "missing", "quality")}
    tok.update({name: token() for name in ("final", "summary", "verification", "trajectory", "pgoal", "step")})
    tok["contribution"] = token()
    a = activate(stub, scope, task=f"investigate {tok['task']} failures", initial_goal=f"goal {tok['goal']}")
    m1 = remember(stub, a.session_id, scope, f"The deploy key {tok['mem1']} lives in the vault").memory_id
    m2 = remember(stub, a.session_id, scope, f"Port {tok['mem2']} serves the admin API").memory_id
    assess_all(stub, a)
    b = stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope, query=f"where is {tok['mem1']}"), timeout=30)
    assert m1 in [m.memory_id for m in b.memories]
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=b.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=m1, assessment=pb.MEMORY_ASSESSMENT_USED, reason=f"it named {tok['reason']}"
                )
            ],
            retrieval_quality=f"fine {tok['quality']}",
            missing=[f"how to rotate {tok['missing']}"],
            coverage=pb.COVERAGE_COMPLETE,
        ),
        timeout=30,
    )
    commit(
        stub,
        a.session_id,
        final_goal=f"final {tok['final']}",
        outcome_summary=f"Rotated the deploy key {tok['summary']} and the pipeline passes.",
        verification=pb.Verification(status=res.VERIFICATION_STATUS_VERIFIED, summary=f"ok {tok['verification']}"),
        trajectory=[
            pb.TrajectoryEntry(kind=pb.TRAJECTORY_KIND_ACTION, summary=f"ran the rotation {tok['trajectory']}")
        ],
        procedure=pb.CommitProcedure(
            goal=f"rotate the key {tok['pgoal']}", summary="rotate it", steps=[f"run rotate {tok['step']}"]
        ),
    )
    c = activate(stub, scope, task=f"rotate the key {tok['pgoal']}", initial_goal="rotate")
    assert [p.procedure_id for p in c.procedures], "the procedure is retrievable before the erasure"
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=c.retrieval_id,
            procedure_feedback=[
                pb.ProcedureFeedbackEntry(
                    procedure_id=c.procedures[0].procedure_id,
                    use=pb.PROCEDURE_USE_USED,
                    effect=res.EFFECT_HELPED,
                    contribution=f"followed {tok['contribution']}",
                )
            ],
            coverage=pb.COVERAGE_COMPLETE,
        ),
        timeout=30,
    )
    commit(stub, c.session_id)
    return tok, [m1, m2], [a.session_id, c.session_id]


def database_holds(server: Server, needles: list[str]) -> dict[str, list[str]]:
    """Where each needle found is held: the text or JSON columns of any table that contain it
    (PostgreSQL: and content_tsv)."""
    found: dict[str, list[str]] = {}
    engine = raw_engine(server.database_url)
    try:
        with engine.connect() as conn:
            for table in t.metadata.sorted_tables:
                for c in table.columns:
                    if not (isinstance(c.type, (Text, JSON)) or getattr(c.type, "length", None)):
                        continue
                    for needle in needles:
                        if conn.execute(
                            select(func.count()).select_from(table).where(cast(c, Text).contains(needle))
                        ).scalar_one():
                            found.setdefault(needle, []).append(f"{table.name}.{c.name}")
            if conn.dialect.name == "postgresql":
                for needle in needles:
                    if conn.execute(
                        text("SELECT count(*) FROM memories WHERE content_tsv::text LIKE :p"), {"p": f"%{needle}%"}
                    ).scalar_one():
                        found.setdefault(needle, []).append("memories.content_tsv")
    finally:
        engine.dispose()
    return found


def files_hold(server: Server, needles: list[str]) -> set[str]:
    """SQLite: the needles whose bytes are in the database file, its -wal or its -shm.

    Read by another process: closing a descriptor of the file in this one would drop the POSIX
    locks the in-process server's SQLite connections hold on it."""
    path = server.database_url.split("///", 1)[-1]
    script = (
        "import json, os, sys\n"
        "path, needles = sys.argv[1], json.loads(sys.argv[2])\n"
        "blobs = [open(p, 'rb').read() for p in (path, path + '-wal', path + '-shm') if os.path.exists(p)]\n"
        "print(json.dumps([n for n in needles if any(n.encode() in b for b in blobs)]))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script, path, json.dumps(needles)], capture_output=True, text=True, check=True
    )
    return set(json.loads(out.stdout))


def scope_rows(server: Server, scope: str, tenant: str = "local") -> dict[str, list]:
    """Every row that belongs to the scope, for before/after comparison."""
    engine = raw_engine(server.database_url)
    out = {}
    try:
        with engine.connect() as conn:
            of = select(t.sessions.c.id).where(t.sessions.c.tenant == tenant, t.sessions.c.scope == scope)
            sessions = [r.id for r in conn.execute(of)]
            for table in (
                t.memories,
                t.occasions,
                t.sessions,
                t.procedures,
                t.knowledge_gaps,
                t.scope_terms,
                t.retrievals,
            ):
                key = list(table.primary_key.columns)
                rows = conn.execute(
                    select(table).where(table.c.tenant == tenant, table.c.scope == scope).order_by(*key)
                ).all()
                out[table.name] = [tuple(r) for r in rows]
            for table in (t.source_events, t.feedback_rows):
                rows = conn.execute(select(table).where(table.c.session_id.in_(sessions)).order_by(*table.primary_key))
                out[table.name] = [tuple(r) for r in rows]
            numbers = [r[0] for r in out["memories"]]
            vectors = select(t.memory_vectors).where(t.memory_vectors.c.number.in_(numbers))
            out["memory_vectors"] = [tuple(r) for r in conn.execute(vectors)]
    finally:
        engine.dispose()
    return out


def term_statistics_match_memories(server: Server, scope: str) -> None:
    """The scope's term statistics equal a recount of its indexed (not erased) memories and its
    occasions, as storage.memories counts them: erasure subtracted exactly what the erased
    memories added."""
    from collections import Counter

    from slowave.domain.relevance import (
        TOTAL_CONTEXT_WORDS_TERM,
        TOTAL_DOCS_TERM,
        TOTAL_OCCASION_WORDS_TERM,
        TOTAL_OCCASIONS_TERM,
        TOTAL_WORDS_TERM,
        context_term,
    )

    engine = raw_engine(server.database_url)
    try:
        with engine.connect() as conn:
            m, st = t.memories, t.scope_terms
            rows = conn.execute(
                select(m.c.own_terms, m.c.context_terms).where(m.c.scope == scope, m.c.own_terms.isnot(None))
            )
            expected: Counter[str] = Counter()
            for own_terms, context_terms in rows:
                own, context = own_terms.split(), (context_terms or "").split()
                expected.update(
                    {TOTAL_DOCS_TERM: 1, TOTAL_WORDS_TERM: len(own), TOTAL_CONTEXT_WORDS_TERM: len(context)}
                )
                expected.update({w[:128]: 1 for w in set(own)})
                expected.update({context_term(w)[:128]: 1 for w in set(context)})
            for (occasion_terms,) in conn.execute(select(t.occasions.c.terms).where(t.occasions.c.scope == scope)):
                expected.update({TOTAL_OCCASIONS_TERM: 1, TOTAL_OCCASION_WORDS_TERM: len(occasion_terms.split())})
            stored = dict(conn.execute(select(st.c.term, st.c.docs).where(st.c.scope == scope)).all())
    finally:
        engine.dispose()
    assert {k: v for k, v in stored.items() if v} == {k: v for k, v in expected.items() if v}


def visible(server: Server, scope: str, needles: list[str], stub=None) -> set[str]:
    """Needles that Activate or Recall (by each needle and by its sentence's words) returns."""
    stub, seen = stub or server.stub, set()
    for needle in needles:
        a = activate(stub, scope, task=f"where is {needle}", initial_goal=f"find {needle}")
        r = stub.Recall(
            pb.RecallRequest(session_id=a.session_id, scope=scope, query=f"{needle} deploy key"), timeout=30
        )
        for response in (a, r):
            seen |= {n for n in needles if n in str(response)}
        assess_all(stub, a)
        assess_all(stub, r)
        commit(stub, a.session_id, outcome_summary="looked it up")
    return seen


def admin_views(server: Server, session_ids: list[str], needles: list[str]) -> set[str]:
    out = server.admin("knowledge-gaps", "--all", "--json")
    out += server.admin("erasures", "--json")
    for sid in session_ids:
        out += server.admin("session", sid, "--json")
    return {n for n in needles if n in out}


def erase(server: Server, *args: str, tenant: str = "local") -> dict:
    done = admin_run(server, "erase", "--tenant", tenant, *args, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def admin_run(server: Server, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "SLOWAVE_DATABASE_URL": server.database_url}
    command = [sys.executable, "-m", "slowave.admin", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def test_erasing_a_scope_leaves_no_trace_of_its_content(make_server):
    server = make_server()
    scope, other = new_scope("erase"), new_scope("keep")
    tok, memories, sessions = populate(server.stub, scope)
    kept, _, _ = populate(server.stub, other)
    server.consolidate()
    needles = sorted(tok.values())
    lesson = activate(server.stub, scope, task=f"the deploy key {tok['summary']}", initial_goal="find")
    assert any(tok["summary"] in m.content for m in lesson.memories), "the lesson exists before the erasure"
    assert visible(server, scope, [tok["mem1"], tok["mem2"]]) == {tok["mem1"], tok["mem2"]}
    assert set(database_holds(server, needles)) == set(needles)
    before_other = scope_rows(server, other)
    before = server.snapshot()

    dry = erase(server, "--scope", scope, "--dry-run")
    assert dry["dry_run"] and dry["audit_id"] is None
    assert dry["counts"]["memories: blanked"] >= 3  # two remembered, one lesson
    assert dry["counts"]["procedures: deleted"] == 1
    assert server.snapshot() == before, "a dry run changes nothing"
    assert set(database_holds(server, needles)) == set(needles)

    done = erase(server, "--scope", scope, "--reason", "ticket 42")
    assert done["counts"] == dry["counts"], "the dry run counted what the erasure changed"
    assert done["audit_id"] is not None

    # The stores first: looking the needles up below writes them again (as new cues and tasks).
    assert database_holds(server, needles) == {}
    if server.database_url.startswith("sqlite"):
        assert files_hold(server, needles) == set()
    assert admin_views(server, sessions, needles) == set()
    assert visible(server, scope, needles) == set()
    records = json.loads(server.admin("erasures", "--json"))
    assert [(r["tenant"], r["scope"], r["reason"]) for r in records] == [("local", scope, "ticket 42")]
    assert records[0]["counts"] == done["counts"]
    # The other scope: every row as it was, and its content still served.
    assert scope_rows(server, other) == before_other
    assert visible(server, other, [kept["mem1"], kept["mem2"]]) == {kept["mem1"], kept["mem2"]}
    # Learning still replays to the stored sums (the ledger kept its assessments and order).
    assert "differences: 0" in server.admin("learning-replay")
    # The scope goes on working: new content is stored and found.
    fresh = token()
    a = activate(server.stub, scope, task="new work", initial_goal="new")
    remember(server.stub, a.session_id, scope, f"The new key is {fresh}")
    assess_all(server.stub, a)
    commit(server.stub, a.session_id)
    assert visible(server, scope, [fresh]) == {fresh}


def test_erasing_one_memory_removes_it_and_its_traces_only(make_server):
    server = make_server()
    scope = new_scope("erase")
    gone, stays = token(), token()
    a = activate(server.stub, scope, task="notes", initial_goal="notes")
    m1 = remember(server.stub, a.session_id, scope, f"The staging password is {gone}").memory_id
    # Stored after m1 in the same session: indexed with m1's terms as its session context.
    m2 = remember(server.stub, a.session_id, scope, f"The staging host is {stays}").memory_id
    assess_all(server.stub, a)
    # A lookup by the token: its cue holds the token's term (a session task would be the agent's
    # own text, which erasing a memory leaves alone).
    query = pb.RecallRequest(session_id=a.session_id, scope=scope, query=f"what is {gone}")
    found = server.stub.Recall(query, timeout=30)
    assert [m.memory_id for m in found.memories][:1] == [m1]
    assess_all(server.stub, found)
    commit(server.stub, a.session_id)
    # The commit queued a consolidation: let it finish, or its new memory could land between the
    # recount's two reads (it did on PostgreSQL in CI).
    server.consolidate()
    term_statistics_match_memories(server, scope)
    held = database_holds(server, [gone])[gone]
    assert {"memories.context_terms", "occasions.terms", "scope_terms.term", "cues.terms"} <= set(held), held
    before = server.snapshot()

    dry = erase(server, "--memory", m1, "--dry-run")
    assert dry["counts"]["memories: blanked"] == 1
    assert dry["counts"]["memories: session contexts stripped"] == 1
    assert dry["counts"]["occasions: terms stripped"] == 1
    assert server.snapshot() == before

    done = erase(server, "--memory", m1)
    assert done["counts"] == dry["counts"]
    assert database_holds(server, [gone]) == {}
    if server.database_url.startswith("sqlite"):
        assert files_hold(server, [gone]) == set()
    term_statistics_match_memories(server, scope)
    assert visible(server, scope, [gone]) == set()
    assert visible(server, scope, [stays]) == {stays}, "the other memory is still served"
    hit = activate(server.stub, scope, task=f"the staging host {stays}", initial_goal="find")
    assert [m.memory_id for m in hit.memories] == [m2]
    records = json.loads(server.admin("erasures", "--json"))
    assert [r["memory_ids"] for r in records] == [[m1]]
    assert gone not in json.dumps(records)
    assert "differences: 0" in server.admin("learning-replay")
    # Erasing it again names nothing left to erase.
    again = admin_run(server, "erase", "--tenant", "local", "--memory", m1)
    assert again.returncode == 1 and "already erased" in again.stderr


def offsite_costs(server: Server, scope: str) -> dict[str, float]:
    """Relevance of what one closed Activate asks, "What did the Lisbon offsite cost?", finds.

    Consolidation is drained first: the session summaries it stores are memories of the scope and
    change its term statistics (in a scope this small, whether "cost" is specific enough to admit
    the totals), and it runs on its own schedule (behaviour §11.6)."""
    server.consolidate()
    found = activate(server.stub, scope, task="What did the Lisbon offsite cost?", initial_goal="find")
    assess_all(server.stub, found)
    commit(server.stub, found.session_id)
    return {m.content: m.ranking.relevance for m in found.memories}


def test_an_occasion_erasure_strips_is_read_afresh_by_the_running_server(make_server, monkeypatch):
    """The server keeps occasions' term profiles cached (storage.occasions); an erasure by the
    admin command, another process, strips an erased memory's terms from its occasion, and the
    server's next retrieval scores the occasion without them."""
    # The two totals also read as two versions of one fact, which would order them on their own
    # (the server runs in this process): this test watches the occasion alone.
    monkeypatch.setattr(service_retrieval, "version_pairs", lambda admitted, memories, stored=None: ([], []))
    server = make_server()
    scope = new_scope("erase")
    a = activate(server.stub, scope, task="notes", initial_goal="notes")
    remember(server.stub, a.session_id, scope, "The total cost was 55k.")
    offsite = remember(server.stub, a.session_id, scope, "That was for the Lisbon offsite.").memory_id
    assess_all(server.stub, a)
    commit(server.stub, a.session_id)
    b = activate(server.stub, scope, task="notes", initial_goal="notes")
    remember(server.stub, b.session_id, scope, "The total cost was 40k.")
    assess_all(server.stub, b)
    commit(server.stub, b.session_id)

    before = offsite_costs(server, scope)  # the occasion of 55k holds "Lisbon offsite": it ranks above 40k
    assert before["The total cost was 55k."] > before["The total cost was 40k."], before
    erase(server, "--memory", offsite)
    after = offsite_costs(server, scope)
    assert "That was for the Lisbon offsite." not in after
    assert after["The total cost was 55k."] == after["The total cost was 40k."], after


def test_an_erased_scopes_occasion_numbers_are_never_reused(make_server, monkeypatch):
    """Erasing a scope deletes its occasions; the claims remembered afterwards open new occasions
    under numbers never used before, so the server's cached term profile of an erased occasion
    (storage.occasions, by number and revision) never stands in for a new one."""
    monkeypatch.setattr(
        service_retrieval, "version_pairs", lambda admitted, memories, stored=None: ([], [])
    )  # as above
    server = make_server()
    scope = new_scope("erase")

    def session(*claims: str) -> None:
        a = activate(server.stub, scope, task="notes", initial_goal="notes")
        for claim in claims:  # one call each: the occasion's revision grows by one per call
            remember(server.stub, a.session_id, scope, claim)
        assess_all(server.stub, a)
        commit(server.stub, a.session_id)

    session("The total cost was 55k.", "That was for the Lisbon offsite.")
    assert "The total cost was 55k." in offsite_costs(server, scope)  # its occasion's profile is now cached
    erase(server, "--scope", scope)
    # Occasions as long as the erased one, neither holding "Lisbon offsite".
    session("The total cost was 55k.", "We replaced the printers.")
    session("The total cost was 40k.", "We replaced the chairs.")
    session("The Lisbon offsite is planned for March.")  # the cue's words are in the store again
    after = offsite_costs(server, scope)
    assert after["The total cost was 55k."] == after["The total cost was 40k."], after


KEY_ALPHA = "swk_alpha-0123456789abcdefghijklmnopqrstuvwxyzAB"
KEY_BETA = "swk_beta-0123456789abcdefghijklmnopqrstuvwxyzABC"


def test_erasing_a_tenant_leaves_other_tenants_untouched(tmp_path):
    server = start_keyed_server(tmp_path, {KEY_ALPHA: "alpha", KEY_BETA: "beta"})
    try:
        alpha, beta = keyed_stub(server.channel, KEY_ALPHA), keyed_stub(server.channel, KEY_BETA)
        scope, second = new_scope(), new_scope()  # the same scope name in both tenants
        tok, _, _ = populate(alpha, scope)
        tok2, _, _ = populate(alpha, second)
        kept, _, _ = populate(beta, scope)
        server.consolidate()
        before = scope_rows(server, scope, tenant="beta")
        done = erase(server, "--all", tenant="alpha")
        assert done["counts"]["memories: blanked"] >= 6
        assert done["counts"]["cues: blanked"] >= 1
        needles = sorted([*tok.values(), *tok2.values()])
        assert database_holds(server, needles) == {}
        if server.database_url.startswith("sqlite"):
            assert files_hold(server, needles) == set()
        assert scope_rows(server, scope, tenant="beta") == before
        assert set(database_holds(server, sorted(kept.values()))) == set(kept.values())
        assert visible(server, scope, [kept["mem1"]], stub=beta) == {kept["mem1"]}
        records = json.loads(server.admin("erasures", "--tenant", "alpha", "--json"))
        assert [(r["tenant"], r["command"]) for r in records] == [("alpha", "erase --tenant alpha --all")]
    finally:
        server.stop()


def test_erasing_while_the_server_takes_writes_loses_none_of_them(make_server):
    """Writes to another scope go on during the erasure (and its VACUUM): every acknowledged one is
    kept and found, none fails."""
    import threading

    server = make_server()
    scope, busy = new_scope("erase"), new_scope("busy")
    populate(server.stub, scope)
    a = activate(server.stub, busy, task="load", initial_goal="load")
    stored: list[tuple[str, str]] = []
    errors: list[BaseException] = []
    stop = threading.Event()

    def write() -> None:
        while not stop.is_set():
            word = token()
            try:
                stored.append((remember(server.stub, a.session_id, busy, f"Load fact {word}").memory_id, word))
            except BaseException as exc:  # reported below
                errors.append(exc)
                return

    writer = threading.Thread(target=write)
    writer.start()
    try:
        wait_until(lambda: len(stored) >= 5, what="writes before the erasure")
        done = erase(server, "--scope", scope)
        mark = len(stored)
        wait_until(lambda: len(stored) >= mark + 5, what="writes after the erasure")
    finally:
        stop.set()
        writer.join(timeout=60)
    assert errors == []
    assert done["counts"]["memories: blanked"] >= 2
    engine = raw_engine(server.database_url)
    try:
        with engine.connect() as conn:
            m = t.memories
            kept = dict(conn.execute(select(m.c.number, m.c.content).where(m.c.scope == busy)).all())
    finally:
        engine.dispose()
    assert {f"sch_{n}": c for n, c in kept.items()} == {mid: f"Load fact {w}" for mid, w in stored}


def test_erased_memories_leave_the_vectors_and_the_dense_channel(make_server):
    """With the semantic channel on, the erased memories' vectors are deleted, and the server's
    vector cache, which still holds them, never brings an erased memory back."""
    server = make_server(semantic="static")
    scope = new_scope("erase")
    gone = token()
    a = activate(server.stub, scope, task="notes", initial_goal="notes")
    m1 = remember(server.stub, a.session_id, scope, f"The release train leaves on Fridays {gone}").memory_id
    # A later vector keeps the scope's newest vector number where it was: the cache stays valid
    # by its test and still holds m1's vector.
    m2 = remember(server.stub, a.session_id, scope, "Invoices are archived in the basement").memory_id
    assess_all(server.stub, a)
    commit(server.stub, a.session_id)
    warm = activate(server.stub, scope, task="When does the release train leave?", initial_goal="find")
    assert m1 in [m.memory_id for m in warm.memories], "found by meaning before (and cached)"
    assess_all(server.stub, warm)
    commit(server.stub, warm.session_id)
    engine = raw_engine(server.database_url)
    vectors = select(func.count()).select_from(t.memory_vectors).where(t.memory_vectors.c.number == int(m1[4:]))
    try:
        with engine.connect() as conn:
            assert conn.execute(vectors).scalar_one() == 1
        done = erase(server, "--memory", m1)
        assert done["counts"]["memory_vectors: deleted"] == 1
        with engine.connect() as conn:
            assert conn.execute(vectors).scalar_one() == 0
    finally:
        engine.dispose()
    after = activate(server.stub, scope, task="When does the release train leave?", initial_goal="find")
    assert m1 not in [m.memory_id for m in after.memories]
    assert gone not in str(after)
    other = activate(server.stub, scope, task="Where are invoices archived?", initial_goal="find")
    assert m2 in [m.memory_id for m in other.memories]
