"""Retrieval over real gRPC (behaviour §5, 7; checklist 18–22 and 68, plus 5.3–5.5 / 7.3–7.5 details).

Every claim here is built by `claim()`: each of its words carries a random suffix, so it shares no
word with any other memory and is admitted only by a cue that contains it verbatim (the admission
floor, behaviour §12.1). Cues are built from such words only, so they never admit the lessons that
consolidation derives from the throwaway sessions' outcome summaries ("Task … finished.").
"""

from __future__ import annotations

import math
import uuid

import grpc
from google.protobuf import timestamp_pb2

from slowave.storage import tables
from tests.support import (
    RetrievalLimits,
    activate,
    assess_all,
    claim,
    commit,
    expect_error,
    new_scope,
    pb,
    remember,
    res,
    seed_memories,
    used,
)

# ------------------------------------------------------------------------------------ helpers


def ids(response) -> list[str]:
    return [m.memory_id for m in response.memories]


def proc_ids(response) -> list[str]:
    return [p.procedure_id for p in response.procedures]


def codes(response) -> list[str]:
    return [w.code for w in response.warnings]


def next_page(stub, session_id: str, scope: str, cursor: str, **kw) -> pb.RecallResponse:
    return stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, continue_from=cursor, **kw), timeout=30)


def fresh_recall(stub, session_id: str, scope: str, query: str, **kw) -> pb.RecallResponse:
    return stub.Recall(pb.RecallRequest(session_id=session_id, scope=scope, query=query, **kw), timeout=30)


def all_pages(stub, session_id: str, scope: str, first) -> list:
    """The first page plus every continuation page, in order."""
    pages = [first]
    while pages[-1].more_available:
        assert pages[-1].HasField("continue_from")
        pages.append(next_page(stub, session_id, scope, pages[-1].continue_from))
        assert len(pages) < 50, "paging does not terminate"
    assert not pages[-1].HasField("continue_from")
    assert not pages[-1].HasField("accessible_field")
    return pages


def remember_many(stub, scope: str, items: list[tuple[str, int]]) -> list[str]:
    """Stores (content, type) claims through a throwaway session (closed afterwards)."""
    a = activate(stub, scope, task=claim("seeding typed claims"), initial_goal="seed")
    out = []
    for content, type_ in items:
        r = stub.Remember(
            pb.RememberRequest(session_id=a.session_id, scope=scope, content=content, type=type_), timeout=30
        )
        out.append(r.memory.memory_id)
    assess_all(stub, a)
    commit(stub, a.session_id)
    return out


def seed_procedure(
    stub,
    scope: str,
    goal: str,
    *,
    summary: str = "",
    steps: list[str] | None = None,
    caveats: list[str] | None = None,
    outcome: int = res.OUTCOME_SUCCESS,
    status: int = res.VERIFICATION_STATUS_VERIFIED,
) -> str:
    """Commits a procedure with this goal from a throwaway session; returns its id."""
    a = activate(stub, scope, task=claim("capture a reusable method"), initial_goal="capture")
    assess_all(stub, a)
    c = commit(
        stub,
        a.session_id,
        outcome=outcome,
        verification=pb.Verification(status=status, summary="Checked by hand."),
        procedure=pb.CommitProcedure(
            goal=goal, summary=summary or None, steps=steps or [claim("run the method")], caveats=caveats or []
        ),
    )
    assert c.procedure_id == f"proc_{a.session_id}"
    return c.procedure_id


def assert_invalid(err, paths: list[str]) -> None:
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT, err
    assert err.has_error_info and err.domain == "slowave.ai" and err.reason == "INVALID_INPUT"
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert err.paths == paths, err.violations


def assert_only_touched(before: dict, after: dict, session_id: str) -> None:
    """Behaviour §2.3 / 7.2: a request refused after its open session was resolved still touches it
    (`last_activity_at`, and for a Recall its recall count); that touch is its only write."""
    assert after["counts"] == before["counts"]
    assert after["ledger"] == before["ledger"]
    cols = [c.name for c in tables.sessions.columns]
    mutable = {cols.index("last_activity_at"), cols.index("recall_calls")}
    b = {row[0]: row for row in before["sessions"]}
    a = {row[0]: row for row in after["sessions"]}
    assert a.keys() == b.keys()
    for sid in b:
        if sid != session_id:
            assert a[sid] == b[sid], f"session {sid} changed"
        else:
            assert [v for i, v in enumerate(a[sid]) if i not in mutable] == [
                v for i, v in enumerate(b[sid]) if i not in mutable
            ]


def page_counts(sizes: list[int], max_items: int, budget: int) -> list[int]:
    """Reference paging of behaviour §5.4: at most `max_items`, ending before the first item that would
    exceed the budget unless the page is still empty."""
    counts, i = [], 0
    while i < len(sizes):
        taken, total = 0, 0
        for s in sizes[i:]:
            if taken >= max_items or (taken and total + s > budget):
                break
            taken, total = taken + 1, total + s
        counts.append(taken)
        i += taken
    return counts


def seven_memories(stub, scope: str) -> tuple[list[str], list[str], str]:
    contents = [claim(f"cache shard {i} is pinned to rack {i}") for i in range(7)]
    memory_ids = seed_memories(stub, scope, contents)
    return contents, memory_ids, " ".join(contents)


# ------------------------------------------------------------------------------------ 18


def test_s18_page_size_bounds_and_defaults(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    goals = [claim(f"rotate the signing keys variant {i}") for i in range(4)]
    procedure_ids = [seed_procedure(stub, scope, g) for g in goals]
    cue = " ".join([cue, *goals])

    # page_size 11 → INVALID_ARGUMENT on page_size (stage 2: nothing read or written).
    before = server.snapshot()
    assert_invalid(expect_error(lambda: activate(stub, scope, task=cue, page_size=11)), ["page_size"])
    assert server.snapshot() == before

    # Absent → default 5 memories and 3 procedures per page.
    a = activate(stub, scope, task=cue)
    assert a.memory_state == res.MEMORY_STATE_AVAILABLE
    assert len(a.memories) == 5 and set(ids(a)) <= set(memory_ids)
    assert len(a.procedures) == 3 and set(proc_ids(a)) <= set(procedure_ids)
    assert a.relevant_total == 7 and not a.catalog_truncated
    assert a.more_available and a.HasField("continue_from") and a.HasField("accessible_field")
    assert a.accessible_field.extra_candidates == 2 + 1

    r = fresh_recall(stub, a.session_id, scope, cue)
    assert r.retrieval_id.startswith("rec_")
    assert len(r.memories) == 5 and len(r.procedures) == 3 and r.more_available

    # The same bound on a fresh Recall; the refusal happens before the session is resolved.
    before = server.snapshot()
    assert_invalid(expect_error(lambda: fresh_recall(stub, a.session_id, scope, cue, page_size=11)), ["page_size"])
    assert server.snapshot() == before


def test_s18_page_size_range_edges(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    before = server.snapshot()
    for bad in (0, -1, 11, 2**31 - 1):
        assert_invalid(expect_error(lambda: activate(stub, scope, task=cue, page_size=bad)), ["page_size"])
    # All violations of the request are reported together (behaviour §4.3).
    err = expect_error(lambda: activate(stub, scope, task=cue, page_size=0, initial_goal="  "))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.reason == "INVALID_INPUT"
    assert sorted(err.paths) == ["initial_goal", "page_size"]
    assert server.snapshot() == before

    one = activate(stub, scope, task=cue, page_size=1)
    assert len(one.memories) == 1 and one.more_available
    ten = activate(stub, scope, task=cue, page_size=10)
    assert sorted(ids(ten)) == sorted(memory_ids) and not ten.more_available
    assert not ten.HasField("continue_from") and not ten.HasField("accessible_field")


# ------------------------------------------------------------------------------------ 19


def test_s19_cold_start_and_scope_fragmentation(server, stub):
    tag = uuid.uuid4().hex[:10]
    upper, lower, underscored = f"Project:Frag-{tag}", f"project:frag-{tag}", f"project:frag_{tag}"

    # Empty scope (nothing anywhere resembles it yet) → cold start, no fragmentation warning.
    # Sessions in the empty scopes are left open: a commit would consolidate a lesson into them.
    a = activate(stub, lower, task=claim("look for the deploy notes"))
    assert a.memory_state == res.MEMORY_STATE_COLD_START
    assert not a.memories and "scope_fragmentation" not in codes(a)

    seed_memories(stub, upper, [claim("the deploy notes live in the wiki")])

    for scope in (lower, underscored):  # differs only by letter case, or also by `-` versus `_`
        b = activate(stub, scope, task=claim("look for the deploy notes"))
        assert b.memory_state == res.MEMORY_STATE_COLD_START
        frag = [w for w in b.warnings if w.code == "scope_fragmentation"]
        assert len(frag) == 1 and upper in frag[0].message

    # The scope holding the memories is not cold and gets no such warning.
    c = activate(stub, upper, task=claim("look for the deploy notes"))
    assert c.memory_state == res.MEMORY_STATE_AVAILABLE
    assert "scope_fragmentation" not in codes(c)


def test_s19_fragmentation_only_at_cold_start_and_only_for_near_duplicates(server, stub):
    tag = uuid.uuid4().hex[:10]
    seed_memories(stub, f"project:Near-{tag}", [claim("the build uses gradle")])
    seed_memories(stub, f"project:near_{tag}", [claim("the build uses maven")])
    # A scope that differs by more than case or -/_ is not named.
    other = activate(stub, f"project:nearby-{tag}", task=claim("which build tool"))
    assert other.memory_state == res.MEMORY_STATE_COLD_START
    assert "scope_fragmentation" not in codes(other)
    # A non-empty scope gets no fragmentation warning even when near-duplicates exist.
    warm = activate(stub, f"project:near_{tag}", task=claim("which build tool"))
    assert warm.memory_state == res.MEMORY_STATE_AVAILABLE
    assert "scope_fragmentation" not in codes(warm)
    # An empty near-duplicate is pointed at every holder.
    cold = activate(stub, f"PROJECT:NEAR-{tag}", task=claim("which build tool"))
    assert cold.memory_state == res.MEMORY_STATE_COLD_START
    named = " ".join(w.message for w in cold.warnings if w.code == "scope_fragmentation")
    assert f"project:Near-{tag}" in named and f"project:near_{tag}" in named


# ------------------------------------------------------------------------------------ 20


def test_s20_recall_modes_are_exclusive(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue, page_size=2)
    assert a.HasField("continue_from")

    before = server.snapshot()
    both = expect_error(
        lambda: stub.Recall(
            pb.RecallRequest(session_id=a.session_id, scope=scope, continue_from=a.continue_from, query=cue), timeout=30
        )
    )
    assert_invalid(both, ["query"])
    neither = expect_error(lambda: stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope), timeout=30))
    assert_invalid(neither, [""])
    # Stage-2 refusals: the session is not even resolved, so not touched either (behaviour §2.3).
    assert server.snapshot() == before


def test_s20_continuation_forbids_every_fresh_field(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue, page_size=2)
    before = server.snapshot()
    req = pb.RecallRequest(
        session_id=a.session_id,
        scope=scope,
        continue_from=a.continue_from,
        query=cue,
        page_size=3,
        semantic_context="more",
        evidence_mode=res.EVIDENCE_MODE_FULL,
    )
    req.task_context.update({"env": "staging"})
    err = expect_error(lambda: stub.Recall(req, timeout=30))
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.reason == "INVALID_INPUT"
    assert sorted(err.paths) == ["evidence_mode", "page_size", "query", "semantic_context", "task_context"]
    # A blank query is a violation on `query`; a blank cursor counts as absent.
    assert_invalid(expect_error(lambda: fresh_recall(stub, a.session_id, scope, "   ")), ["query"])
    assert_invalid(
        expect_error(
            lambda: stub.Recall(pb.RecallRequest(session_id=a.session_id, scope=scope, continue_from="  "), timeout=30)
        ),
        [""],
    )
    assert server.snapshot() == before

    # REFERENCES is allowed on a continuation; a blank cursor with a query is a fresh recall.
    page = next_page(stub, a.session_id, scope, a.continue_from, evidence_mode=res.EVIDENCE_MODE_REFERENCES)
    assert page.retrieval_id == a.retrieval_id
    fresh = stub.Recall(
        pb.RecallRequest(session_id=a.session_id, scope=scope, continue_from=" ", query=cue), timeout=30
    )
    assert fresh.retrieval_id.startswith("rec_") and fresh.retrieval_id != a.retrieval_id


# ------------------------------------------------------------------------------------ 21


def test_s21_cursor_rereads_and_refusals(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue, page_size=3)
    cursor = a.continue_from

    first = next_page(stub, a.session_id, scope, cursor)
    again = next_page(stub, a.session_id, scope, cursor)
    assert first == again  # identical page, signals, accessible field and successor cursor
    assert first.retrieval_id == a.retrieval_id and len(first.memories) == 3
    assert first.more_available and first.continue_from == again.continue_from != cursor
    last = next_page(stub, a.session_id, scope, first.continue_from)
    assert last == next_page(stub, a.session_id, scope, first.continue_from)
    assert sorted(ids(a) + ids(first) + ids(last)) == sorted(memory_ids)
    assert not last.more_available

    # Another session's cursor → NOT_FOUND CURSOR_NOT_FOUND (stage 5). The refused Recall still
    # touches the open session it resolved and counts as a recall call (behaviour §2.3, 7.2).
    b = activate(stub, scope, task=claim("an unrelated lookup"))
    before = server.snapshot()
    err = expect_error(lambda: next_page(stub, b.session_id, scope, cursor))
    assert err.code == grpc.StatusCode.NOT_FOUND and err.reason == "CURSOR_NOT_FOUND"
    assert err.domain == "slowave.ai" and err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert not err.violations
    assert_only_touched(before, server.snapshot(), b.session_id)

    # After Commit every cursor of the session dies with it (stage 4 precedes the cursor).
    assess_all(stub, a)
    assert commit(stub, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED
    before = server.snapshot()
    for c in (cursor, first.continue_from):
        err = expect_error(lambda: next_page(stub, a.session_id, scope, c))
        assert err.code == grpc.StatusCode.FAILED_PRECONDITION and err.reason == "SESSION_ENDED"
        assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert server.snapshot() == before  # an ended session is not touched


def test_s21_unknown_cursor_is_not_found(server, stub, scope):
    a = activate(stub, scope, task=claim("anything at all"))
    before = server.snapshot()
    err = expect_error(lambda: next_page(stub, a.session_id, scope, "cur_" + "A" * 32))
    assert err.code == grpc.StatusCode.NOT_FOUND and err.reason == "CURSOR_NOT_FOUND"
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert_only_touched(before, server.snapshot(), a.session_id)


# ------------------------------------------------------------------------------------ 22


def test_s22_continuation_items_join_the_originating_retrieval(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue)
    assess_all(stub, a)  # covers the first page only
    a2 = next_page(stub, a.session_id, scope, a.continue_from)
    assert a2.retrieval_id == a.retrieval_id and len(a2.memories) == 2

    r = fresh_recall(stub, a.session_id, scope, cue, page_size=2)
    assess_all(stub, r)
    r2 = next_page(stub, a.session_id, scope, r.continue_from)
    assert r2.retrieval_id == r.retrieval_id and len(r2.memories) == 2
    assert list(r2.evidence) == [] and r2.evidence_mode == res.EVIDENCE_MODE_REFERENCES

    # The commit gate touches the session even when it refuses (behaviour §2.3, 11.1).
    before = server.snapshot()
    err = expect_error(lambda: commit(stub, a.session_id))
    assert err.code == grpc.StatusCode.FAILED_PRECONDITION and err.reason == "INCOMPLETE_FEEDBACK"
    assert err.message == "feedback is incomplete"
    assert err.metadata == {"code": "incomplete_feedback", "retryable": "true"}
    assert [(o.retrieval_id, list(o.memory_ids), list(o.procedure_ids)) for o in err.outstanding] == [
        (a.retrieval_id, ids(a2), []),
        (r.retrieval_id, ids(r2), []),
    ]
    assert_only_touched(before, server.snapshot(), a.session_id)

    for retrieval, page in ((a, a2), (r, r2)):
        f = stub.Feedback(
            pb.FeedbackRequest(retrieval_id=retrieval.retrieval_id, memory_feedback=[used(m) for m in ids(page)]),
            timeout=30,
        )
        assert list(f.record.rejected) == [] and list(f.record.outstanding.memory_ids) == []
    assert commit(stub, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED


# ------------------------------------------------------------------------------------ 68


def test_s68_memory_retired_between_pages_is_still_served(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue)
    later = [m for m in memory_ids if m not in ids(a)]
    assert len(later) == 2
    target = later[0]
    target_content = contents[memory_ids.index(target)]

    # Another session retires it before the second page is read.
    b = activate(stub, scope, task=target_content)
    assert ids(b) == [target]
    f = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=b.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=target,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_OUTDATED,
                    reason="no longer true",
                )
            ],
        ),
        timeout=30,
    )
    assert list(f.record.applied.retired) == [target]
    assert commit(stub, b.session_id).operation == pb.COMMIT_OPERATION_CLOSED

    page = next_page(stub, a.session_id, scope, a.continue_from)
    assert set(ids(page)) == set(later)  # the frozen catalog still serves it
    served = next(m for m in page.memories if m.memory_id == target)
    assert served.content == target_content
    assert next_page(stub, a.session_id, scope, a.continue_from) == page  # same items on a reread

    # Assessable under the originating retrieval; learned stays frozen (behaviour §12.3).
    f = stub.Feedback(pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(target)]), timeout=30)
    assert list(f.record.rejected) == []
    assert list(f.record.applied.unchanged) == [target]
    assert target not in f.record.outstanding.memory_ids

    # A new retrieval no longer returns it.
    c = activate(stub, scope, task=cue)
    assert target not in ids(c) and c.relevant_total == 6


# ------------------------------------------------------------------------------------ 5.3–5.5, 7.3–7.5


def test_retrieval_continuation_pages_inherit_page_size(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue, page_size=2)
    pages = all_pages(stub, a.session_id, scope, a)
    assert [len(p.memories) for p in pages] == [2, 2, 2, 1]
    served = [m for p in pages for m in ids(p)]
    assert sorted(served) == sorted(memory_ids) and len(set(served)) == 7
    assert all(p.relevant_total == 7 and p.retrieval_id == a.retrieval_id for p in pages)
    # Catalog order is score, then relevance, descending (behaviour §12.1).
    signals = [(m.ranking.score, m.ranking.relevance) for p in pages for m in p.memories]
    assert signals == sorted(signals, reverse=True)


def test_retrieval_accessible_field_describes_what_remains(server, stub, scope):
    T = res
    items = [
        (claim("the queue drains every night"), T.MEMORY_TYPE_FACT),
        (claim("we chose postgres for the ledger because of row locks"), T.MEMORY_TYPE_DECISION),
        (claim("does the reaper run on every replica"), T.MEMORY_TYPE_OPEN_QUESTION),
        (claim("the cache warms in ninety seconds"), T.MEMORY_TYPE_FACT),
        (claim("never restart the primary during business hours"), T.MEMORY_TYPE_WARNING),
        (claim("the team prefers small pull requests"), T.MEMORY_TYPE_PREFERENCE),
    ]
    memory_ids = remember_many(stub, scope, items)
    content_of = {m: c for m, (c, _) in zip(memory_ids, items)}
    type_of = {m: res.MemoryType.Name(t).removeprefix("MEMORY_TYPE_").lower() for m, (_, t) in zip(memory_ids, items)}
    procs = {}
    for i in range(4):
        goal, summary = claim(f"reindex the archive variant {i}"), claim(f"walk the shards variant {i}")
        steps, caveats = [claim("stop writers"), claim("rebuild the index")], [claim("takes an hour")]
        procs[seed_procedure(stub, scope, goal, summary=summary, steps=steps, caveats=caveats)] = [
            goal,
            summary,
            *steps,
            *caveats,
        ]
    cue = " ".join([c for c, _ in items] + [texts[0] for texts in procs.values()])

    a = activate(stub, scope, task=cue, page_size=2)
    assert len(a.memories) == 2 and len(a.procedures) == 3

    def expected(served_memories: set[str], served_procs: set[str]) -> pb.AccessibleField:
        rest_m = [m for m in memory_ids if m not in served_memories]
        rest_p = [p for p in procs if p not in served_procs]
        kinds = sorted({type_of[m] for m in rest_m} | ({"procedure"} if rest_p else set()))
        # Characters of the rendered content: a memory's served content; a procedure's goal,
        # summary, steps and caveats (the texts that make up its size, behaviour §5.4).
        chars = sum(len(content_of[m]) for m in rest_m) + sum(len("".join(procs[p])) for p in rest_p)
        return res.AccessibleField(
            extra_candidates=len(rest_m) + len(rest_p), kinds=kinds, approx_extra_tokens=math.ceil(chars / 4)
        )

    served_m, served_p = set(ids(a)), set(proc_ids(a))
    assert a.accessible_field == expected(served_m, served_p)
    assert "procedure" in a.accessible_field.kinds
    page = a
    while page.more_available:
        page = next_page(stub, a.session_id, scope, page.continue_from)
        served_m |= set(ids(page))
        served_p |= set(proc_ids(page))
        if page.more_available:
            assert page.accessible_field == expected(served_m, served_p)
        else:
            assert not page.HasField("accessible_field") and not page.HasField("continue_from")
    assert served_m == set(memory_ids) and served_p == set(procs)


def test_retrieval_memory_page_budget(make_server):
    # A small server-owned budget makes the rule observable with cues within the 4 KiB limit.
    budget = 250
    srv = make_server(limits=RetrievalLimits(memory_page_budget_bytes=budget))
    stub, scope = srv.stub, new_scope()

    def sized(n_bytes: int) -> str:  # 12 ASCII bytes + "é" (2 bytes UTF-8, 1 character) each
        content = f"m{uuid.uuid4().hex[:10]} " + "é" * ((n_bytes - 12) // 2)
        assert len(content.encode("utf-8")) == n_bytes
        return content

    contents = [sized(100) for _ in range(5)] + [sized(400)]  # 100 bytes but only 56 characters
    memory_ids = seed_memories(stub, scope, contents)
    size_of = {m: len(c.encode("utf-8")) for m, c in zip(memory_ids, contents)}
    a = activate(stub, scope, task=" ".join(contents))
    pages = all_pages(stub, a.session_id, scope, a)
    order = [m for p in pages for m in ids(p)]
    assert sorted(order) == sorted(memory_ids)
    # Bytes, not characters, count: two 100-byte memories fit in 250 bytes, a third does not.
    assert [len(p.memories) for p in pages] == page_counts([size_of[m] for m in order], 5, budget)
    oversized = memory_ids[-1]
    holder = next(p for p in pages if oversized in ids(p))
    assert ids(holder) == [oversized]  # delivered whole, alone


def test_retrieval_procedure_page_budget(server, stub, scope):
    budget = 24 * 1024  # the default
    goals = [claim(f"migrate the billing schema variant {i}") for i in range(5)]
    big_steps = [[claim("step") + " " + "x" * 3000 for _ in range(3)] for _ in range(4)]  # ~9 KB each
    big_steps.append([claim("step") + " " + "y" * 3990 for _ in range(7)])  # > 24 KiB on its own
    for goal, steps in zip(goals, big_steps):
        seed_procedure(stub, scope, goal, steps=steps)
    a = activate(stub, scope, task=" ".join(goals))
    pages = all_pages(stub, a.session_id, scope, a)
    served = [p for page in pages for p in page.procedures]
    assert len({p.procedure_id for p in served}) == 5

    def size(p) -> int:
        return sum(len(t.encode("utf-8")) for t in [p.goal, p.summary, *p.steps, *p.caveats])

    assert [len(page.procedures) for page in pages] == page_counts([size(p) for p in served], 3, budget)
    assert max(len(page.procedures) for page in pages) < 3  # the budget, not the count, cut the pages
    huge = next(p.procedure_id for p in served if len(p.steps) == 7)
    assert [proc_ids(page) for page in pages if huge in proc_ids(page)] == [[huge]]


def test_retrieval_excerpt_of_long_content(server, stub, scope):
    h = uuid.uuid4().hex[:8]
    # Last white space within the first 1024 characters is at index 1010.
    head = f"break{h} " + "é" * (1010 - len(f"break{h} "))
    at_1010 = head + " " + "y" * 30 + f" tail{h}"
    # No white space at all → the first 1024 characters.
    solid = f"solid{h}" + "n" * 1100
    # White space at index 1024 preceded by a run of spaces → trailing white space removed.
    head3 = f"spaces{h} " + "z" * (1018 - len(f"spaces{h} "))
    at_1024 = head3 + " " * 13 + "q" * 20
    exactly = f"exact{h} " + "w" * (1024 - len(f"exact{h} "))
    cases = [(at_1010, head), (solid, solid[:1024]), (at_1024, head3), (exactly, exactly)]
    memory_ids = seed_memories(stub, scope, [c for c, _ in cases])

    for memory_id, (content, shown) in zip(memory_ids, cases):
        a = activate(stub, scope, task=content)
        assert ids(a) == [memory_id]
        m = a.memories[0]
        assert m.content == shown
        if len(content) > 1024:
            assert m.provenance.HasField("excerpt")
            assert m.provenance.excerpt.source_chars == len(content)
            assert m.provenance.excerpt.shown_chars == len(shown)  # code points, not bytes
        else:
            assert not m.provenance.HasField("excerpt")
        assert m.provenance.source_kind == "explicit_remember"
        assert m.pathway == "direct"


def test_retrieval_evidence_records_full_mode(server, stub, scope):
    text = claim("the nightly build needs the service token")
    occurred = timestamp_pb2.Timestamp(seconds=1_700_000_000)
    a = activate(stub, scope, task=claim("collect facts"))
    r = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id, scope=scope, content=text, type=res.MEMORY_TYPE_FACT, occurred_at=occurred
        ),
        timeout=30,
    ).memory
    assess_all(stub, a)
    assert commit(stub, a.session_id).episodes_formed == 1

    b = activate(stub, scope, task=claim("look things up"))
    full = fresh_recall(stub, b.session_id, scope, text, evidence_mode=res.EVIDENCE_MODE_FULL)
    assert ids(full) == [r.memory_id] and full.evidence_mode == res.EVIDENCE_MODE_FULL
    assert not full.evidence_truncated
    by_id = {e.evidence_id: e for e in full.evidence}
    assert len(by_id) == len(full.evidence) == 2  # its source event and the episode containing it
    event = by_id[r.source_event_id]
    assert event.source_kind == res.EVIDENCE_SOURCE_KIND_EVENT
    assert event.content == text and not event.truncated
    assert event.occurred_at == occurred and event.HasField("recorded_at")
    (episode,) = [e for e in full.evidence if e.source_kind == res.EVIDENCE_SOURCE_KIND_EPISODE]
    assert episode.evidence_id.startswith("ep_") and text in episode.content and not episode.truncated

    refs = fresh_recall(stub, b.session_id, scope, text)
    assert refs.evidence_mode == res.EVIDENCE_MODE_REFERENCES
    assert [e.evidence_id for e in refs.evidence] == [e.evidence_id for e in full.evidence]
    assert not any(e.HasField("content") for e in refs.evidence)

    # Evidence records are not feedback targets.
    f = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=full.retrieval_id, memory_feedback=[used(r.source_event_id), used(episode.evidence_id)]
        ),
        timeout=30,
    )
    assert [x.reason for x in f.record.rejected] == ["target_not_exposed", "target_not_exposed"]
    assert list(f.record.outstanding.memory_ids) == [r.memory_id]


def test_retrieval_evidence_content_truncated_at_1000_characters(server, stub, scope):
    long_text = claim(" ".join(f"word{i}" for i in range(120)))
    assert len(long_text) > 1000
    seed_memories(stub, scope, [long_text])
    b = activate(stub, scope, task=claim("look things up"))
    full = fresh_recall(stub, b.session_id, scope, long_text, evidence_mode=res.EVIDENCE_MODE_FULL)
    assert len(full.memories) == 1 and full.evidence
    for e in full.evidence:
        assert e.truncated and len(e.content) == 1000
    event = next(e for e in full.evidence if e.source_kind == res.EVIDENCE_SOURCE_KIND_EVENT)
    assert event.content == long_text[:1000]


def test_retrieval_evidence_truncated_beyond_eight_records(server, stub, scope):
    text = claim("the staging cluster runs three nodes")
    a = activate(stub, scope, task=claim("collect facts"))
    results = [
        stub.Remember(
            pb.RememberRequest(session_id=a.session_id, scope=scope, content=text, type=res.MEMORY_TYPE_FACT),
            timeout=30,
        ).memory
        for _ in range(5)
    ]
    assert [x.disposition for x in results] == [pb.DISPOSITION_CREATED] + [pb.DISPOSITION_MATCHED] * 4
    assess_all(stub, a)
    assert commit(stub, a.session_id).episodes_formed == 5
    b = activate(stub, scope, task=claim("look things up"))
    # Five source events and five episodes support the memory: 10 records, 8 returned.
    full = fresh_recall(stub, b.session_id, scope, text, evidence_mode=res.EVIDENCE_MODE_FULL)
    assert len(full.evidence) == 8 and full.evidence_truncated
    assert len({e.evidence_id for e in full.evidence}) == 8


def test_retrieval_continuation_warnings_only_failed_procedure(server, stub, scope):
    goals = [claim(f"rebuild the search index variant {i}") for i in range(4)]
    for g in goals[:3]:
        seed_procedure(stub, scope, g)
    failed = seed_procedure(
        stub, scope, goals[3], outcome=res.OUTCOME_FAILURE, status=res.VERIFICATION_STATUS_UNVERIFIED
    )
    gap = claim("how long the index rebuild takes")
    probe = activate(stub, scope, task=claim("probe the index"))
    stub.Feedback(pb.FeedbackRequest(retrieval_id=probe.retrieval_id, missing=[gap]), timeout=30)

    a = activate(stub, scope, task=" ".join(goals) + " " + gap)
    assert "known_gap" in codes(a)
    # The failure procedure ranks below otherwise-equal ones (behaviour §12.4), so it is on page two.
    assert failed not in proc_ids(a) and "failed_procedure" not in codes(a)
    assert a.more_available
    page = next_page(stub, a.session_id, scope, a.continue_from)
    assert proc_ids(page) == [failed]
    assert codes(page) == ["failed_procedure"] and failed in page.warnings[0].message
    assert page.procedures[0].caveats[-1].startswith("Cautionary evidence:")

    # A fresh Recall's first page carries the cue warnings again; its continuation only its own.
    r = fresh_recall(stub, a.session_id, scope, " ".join(goals) + " " + gap)
    assert "known_gap" in codes(r) and "failed_procedure" not in codes(r)
    r2 = next_page(stub, a.session_id, scope, r.continue_from)
    assert codes(r2) == ["failed_procedure"]


def test_retrieval_memory_page_budget_counts_the_served_excerpt(make_server):
    # Two 1400-character memories are served as ~1020-character excerpts: two excerpts fit in
    # 2100 bytes, two whole contents would not (size = bytes of the served content, behaviour §5.4).
    budget = 2100
    srv = make_server(limits=RetrievalLimits(memory_page_budget_bytes=budget))
    stub, scope = srv.stub, new_scope()
    contents = [claim(" ".join(f"w{i}" for i in range(1, 130)))[:1400].rstrip() for _ in range(3)]
    assert all(len(c) > 1024 for c in contents)
    memory_ids = seed_memories(stub, scope, contents)
    a = activate(stub, scope, task=" ".join(contents[:2]), semantic_context=contents[2])
    pages = all_pages(stub, a.session_id, scope, a)
    served = [m for p in pages for m in p.memories]
    assert sorted(m.memory_id for m in served) == sorted(memory_ids)
    assert all(m.provenance.HasField("excerpt") for m in served)
    sizes = [len(m.content.encode("utf-8")) for m in served]
    assert [len(p.memories) for p in pages] == page_counts(sizes, 5, budget) == [2, 1]
    # approx_extra_tokens counts the rendered (excerpted) characters.
    assert a.accessible_field.approx_extra_tokens == math.ceil(len(pages[1].memories[0].content) / 4)


def test_retrieval_catalog_caps(server, stub, scope):
    contents = [claim("x") for _ in range(51)]
    memory_ids = seed_memories(stub, scope, contents)
    goals = [claim(f"compact the tables variant {i}") for i in range(10)]
    procedure_ids = [seed_procedure(stub, scope, g) for g in goals]
    a = activate(stub, scope, task=" ".join(contents + goals), page_size=10)
    assert a.relevant_total == 50 and a.catalog_truncated
    pages = all_pages(stub, a.session_id, scope, a)
    served_m = [m for p in pages for m in ids(p)]
    served_p = [x for p in pages for x in proc_ids(p)]
    assert len(served_m) == len(set(served_m)) == 50 and set(served_m) <= set(memory_ids)
    assert len(served_p) == len(set(served_p)) == 9 and set(served_p) <= set(procedure_ids)
    assert all(p.relevant_total == 50 and p.catalog_truncated for p in pages)


def test_retrieval_continuation_shows_updated_procedure(server, stub, scope):
    goals = [claim(f"restore the backup variant {i}") for i in range(4)]
    for g in goals[:3]:
        seed_procedure(stub, scope, g)
    # The failure procedure ranks last (behaviour §12.4 penalty), so it waits on page two.
    s = activate(stub, scope, task=claim("capture a reusable method"))
    assess_all(stub, s)
    failed = commit(
        stub,
        s.session_id,
        outcome=res.OUTCOME_FAILURE,
        verification=pb.Verification(status=res.VERIFICATION_STATUS_UNVERIFIED, summary="not run"),
        procedure=pb.CommitProcedure(goal=goals[3], summary=claim("old approach"), steps=[claim("old step")]),
    ).procedure_id
    a = activate(stub, scope, task=" ".join(goals))
    assert failed not in proc_ids(a) and a.more_available

    new_summary, new_steps = claim("new approach"), [claim("new step one"), claim("new step two")]
    u = commit(
        stub,
        s.session_id,
        outcome=res.OUTCOME_SUCCESS,
        outcome_summary=claim("it worked after all"),
        procedure=pb.CommitProcedure(goal=goals[3], summary=new_summary, steps=new_steps),
    )
    assert u.operation == pb.COMMIT_OPERATION_UPDATED and u.procedure_id == failed

    page = next_page(stub, a.session_id, scope, a.continue_from)
    assert proc_ids(page) == [failed]  # the frozen composition
    p = page.procedures[0]
    assert p.summary == new_summary and list(p.steps) == new_steps  # read when served
    assert p.outcome == res.OUTCOME_SUCCESS and list(p.caveats) == []
    assert "failed_procedure" not in codes(page)


def test_retrieval_evidence_only_for_the_first_page(server, stub, scope):
    t1, t2 = claim("the api gateway retries twice"), claim("the worker pool has eight threads")
    events = {}
    for text in (t1, t2):
        a = activate(stub, scope, task=claim("collect facts"))
        events[text] = remember(stub, a.session_id, scope, text)
        assess_all(stub, a)
        commit(stub, a.session_id)
    b = activate(stub, scope, task=claim("look things up"))
    r = fresh_recall(stub, b.session_id, scope, f"{t1} {t2}", page_size=1, evidence_mode=res.EVIDENCE_MODE_FULL)
    (shown,) = r.memories
    other = next(x for x in events.values() if x.memory_id != shown.memory_id)
    mine = next(x for x in events.values() if x.memory_id == shown.memory_id)
    got = [e.evidence_id for e in r.evidence]
    assert mine.source_event_id in got and other.source_event_id not in got
    assert all(shown.content in e.content for e in r.evidence)


def test_s19_scope_with_only_retired_memories_is_cold(server, stub, scope):
    # No session in this scope is committed, so no consolidated lesson appears in it.
    text = claim("the legacy queue is still in use")
    a = activate(stub, scope, task=claim("note a fact"))
    memory_id = remember(stub, a.session_id, scope, text).memory_id
    b = activate(stub, scope, task=text)
    assert b.memory_state == res.MEMORY_STATE_AVAILABLE and ids(b) == [memory_id]
    stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=b.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=memory_id,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_WITHDRAWN,
                    reason="retracted",
                )
            ],
        ),
        timeout=30,
    )
    c = activate(stub, scope, task=text)
    assert c.memory_state == res.MEMORY_STATE_COLD_START and not c.memories


def test_retrieval_unserved_catalog_items_are_not_exposed(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue)
    unserved = [m for m in memory_ids if m not in ids(a)]
    assert len(unserved) == 2 and a.accessible_field.extra_candidates == 2
    f = stub.Feedback(
        pb.FeedbackRequest(retrieval_id=a.retrieval_id, memory_feedback=[used(m) for m in unserved]), timeout=30
    )
    assert [(x.target_id, x.reason, x.field) for x in f.record.rejected] == [
        (m, "target_not_exposed", "memory_id") for m in unserved
    ]
    assert list(f.record.outstanding.memory_ids) == ids(a)  # exposure order = rank order
    err = expect_error(lambda: commit(stub, a.session_id))
    assert [(o.retrieval_id, list(o.memory_ids)) for o in err.outstanding] == [(a.retrieval_id, ids(a))]


def test_retrieval_cursor_is_trimmed_and_bounded(server, stub, scope):
    contents, memory_ids, cue = seven_memories(stub, scope)
    a = activate(stub, scope, task=cue, page_size=2)
    assert a.continue_from.startswith("cur_") and len(a.continue_from) == 36
    plain = next_page(stub, a.session_id, scope, a.continue_from)
    padded = stub.Recall(
        pb.RecallRequest(session_id=f" {a.session_id} ", scope=f" {scope} ", continue_from=f"  {a.continue_from}\t"),
        timeout=30,
    )
    assert padded == plain  # identifiers and scope are trimmed (behaviour §3.2, 3.3)
    before = server.snapshot()
    assert_invalid(expect_error(lambda: next_page(stub, a.session_id, scope, "c" * 257)), ["continue_from"])
    assert_invalid(
        expect_error(lambda: next_page(stub, a.session_id, scope, a.continue_from, evidence_mode=7)), ["evidence_mode"]
    )
    assert_invalid(
        expect_error(lambda: fresh_recall(stub, a.session_id, scope, cue, evidence_mode=7)), ["evidence_mode"]
    )
    assert server.snapshot() == before


def test_retrieval_evidence_records_are_deduplicated(server, stub, scope):
    t1, t2 = claim("the api gateway retries twice"), claim("the worker pool has eight threads")
    a = activate(stub, scope, task=claim("collect facts"))
    r1, r2 = (remember(stub, a.session_id, scope, t) for t in (t1, t2))
    assess_all(stub, a)
    assert commit(stub, a.session_id).episodes_formed == 2  # ep(e1) and ep(e1, e2)
    b = activate(stub, scope, task=claim("look things up"))
    r = fresh_recall(stub, b.session_id, scope, f"{t1} {t2}", evidence_mode=res.EVIDENCE_MODE_FULL)
    got = [e.evidence_id for e in r.evidence]
    assert len(got) == len(set(got)) == 4 and not r.evidence_truncated
    assert {r1.source_event_id, r2.source_event_id} <= set(got)
    assert sum(e.source_kind == res.EVIDENCE_SOURCE_KIND_EPISODE for e in r.evidence) == 2


def test_retrieval_admission_floor_is_substring_containment(server, stub):
    # Behaviour §12.1: a cue always admits a memory whose normalised content is a substring of the
    # normalised task/query, "whatever the retrieval model" — also when the content shares no
    # whole word with the cue (unsegmented CJK text, emoji-only content, part of a longer word).
    cases = [
        ("数据库连接池大小为十", "请问数据库连接池大小为十吗"),
        ("🚀🚀🚀", "deploy 🚀🚀🚀 now"),
        ("🎯🎯 ✓", "🎯🎯 ✓"),  # a cue without a single word
        (f"8080{uuid.uuid4().hex[:6]}", None),
    ]
    failures = []
    for content, task in cases:
        scope = new_scope()
        (memory_id,) = seed_memories(stub, scope, [content])
        task = task or f"port {content}1"
        a = activate(stub, scope, task=task)
        r = fresh_recall(stub, a.session_id, scope, task)
        if ids(a) != [memory_id] or ids(r) != [memory_id]:
            failures.append((content, task))
    assert not failures, f"verbatim-contained memories not admitted: {failures}"
