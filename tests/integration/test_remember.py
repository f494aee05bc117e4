"""Remember over real gRPC (behaviour §6; checklist 23, 24, 25 (gRPC half), 61).

Claims are built by `claim()` (a random suffix on every word), so a claim is admitted only by a cue
that contains it verbatim (behaviour §12.1) and never by the consolidated lessons of other sessions.
"""

from __future__ import annotations

import grpc
from google.protobuf import timestamp_pb2

from tests.support import activate, assess_all, claim, commit, expect_error, new_scope, pb, remember, res


def ids(response) -> list[str]:
    return [m.memory_id for m in response.memories]


def assert_invalid(err, paths: list[str]) -> None:
    assert err.code == grpc.StatusCode.INVALID_ARGUMENT, err
    assert err.has_error_info and err.domain == "slowave.ai" and err.reason == "INVALID_INPUT"
    assert err.metadata == {"code": "invalid_input", "retryable": "false"}
    assert err.paths == paths, err.violations


def retire(stub, scope: str, memory_id: str, content: str) -> None:
    """Exposes the memory in a throwaway session and assesses it stale (behaviour §12.3)."""
    s = activate(stub, scope, task=content)
    assert ids(s) == [memory_id]
    f = stub.Feedback(
        pb.FeedbackRequest(
            retrieval_id=s.retrieval_id,
            memory_feedback=[
                pb.MemoryFeedbackEntry(
                    memory_id=memory_id,
                    assessment=pb.MEMORY_ASSESSMENT_STALE,
                    stale_reason=pb.STALE_REASON_OUTDATED,
                    reason="no longer current",
                )
            ],
        ),
        timeout=30,
    )
    assert list(f.record.applied.retired) == [memory_id]
    assert commit(stub, s.session_id).operation == pb.COMMIT_OPERATION_CLOSED


# ------------------------------------------------------------------------------------ 23


def test_s23_remember_needs_no_feedback(server, stub, scope):
    a = activate(stub, scope, task=claim("note the deploy port"))
    assert a.memory_state == res.MEMORY_STATE_COLD_START
    assert not a.memories and not a.procedures and a.relevant_total == 0 and not a.more_available
    ledger = server.snapshot()["ledger"]

    r = remember(stub, a.session_id, scope, claim("the deploy port is 8080"))
    assert r.stored and r.disposition == pb.DISPOSITION_CREATED
    c = commit(stub, a.session_id)
    assert c.committed and c.operation == pb.COMMIT_OPERATION_CLOSED
    assert c.feedback_status == pb.FEEDBACK_STATUS_COMPLETE
    assert c.episodes_formed == 1
    assert server.snapshot()["ledger"] == ledger  # no Feedback was ever sent


def test_s23_remember_in_a_populated_scope_exposes_nothing(server, stub, scope):
    known = claim("the cache warms in ninety seconds")
    a0 = activate(stub, scope, task=claim("seed"))
    remember(stub, a0.session_id, scope, known)
    assess_all(stub, a0)
    commit(stub, a0.session_id)

    a = activate(stub, scope, task=claim("something unrelated"))
    assert a.memory_state == res.MEMORY_STATE_AVAILABLE and not a.memories
    # Remembering (even a claim that MATCHES an existing memory) exposes nothing.
    assert remember(stub, a.session_id, scope, known).disposition == pb.DISPOSITION_MATCHED
    batch = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[pb.RememberItem(content=claim("the queue drains nightly"), type=res.MEMORY_TYPE_FACT)],
        ),
        timeout=30,
    )
    assert batch.batch.results[0].data.disposition == pb.DISPOSITION_CREATED
    c = commit(stub, a.session_id)
    assert c.operation == pb.COMMIT_OPERATION_CLOSED and c.episodes_formed == 2


# ------------------------------------------------------------------------------------ 24


def test_s24_matched_then_created_after_retirement(server, stub, scope):
    text = claim("the deploy port is 8080")
    a = activate(stub, scope, task=claim("configure the deploy"))
    first = remember(stub, a.session_id, scope, text)
    second = remember(stub, a.session_id, scope, text)
    assert first.disposition == pb.DISPOSITION_CREATED
    assert second.disposition == pb.DISPOSITION_MATCHED
    assert second.memory_id == first.memory_id
    assert second.source_event_id != first.source_event_id  # a new source event, linked to it
    assert second.type == res.MEMORY_TYPE_FACT and second.scope == scope and second.stored
    assess_all(stub, a)
    commit(stub, a.session_id)

    retire(stub, scope, first.memory_id, text)

    b = activate(stub, scope, task=claim("configure the deploy again"))
    third = remember(stub, b.session_id, scope, text)
    assert third.disposition == pb.DISPOSITION_CREATED
    assert third.memory_id != first.memory_id
    fourth = remember(stub, b.session_id, scope, text)
    assert fourth.disposition == pb.DISPOSITION_MATCHED and fourth.memory_id == third.memory_id
    assess_all(stub, b)
    commit(stub, b.session_id)

    c = activate(stub, scope, task=text)
    assert ids(c) == [third.memory_id]


def test_s24_matching_ignores_case_and_white_space_but_not_type_or_scope(server, stub, scope):
    text = claim("the deploy port is 8080")
    a = activate(stub, scope, task=claim("configure the deploy"))
    first = remember(stub, a.session_id, scope, text)
    variant = "  " + text.upper().replace(" ", " \t  ") + "\n"
    assert remember(stub, a.session_id, scope, variant).memory_id == first.memory_id
    other_type = remember(stub, a.session_id, scope, text, res.MEMORY_TYPE_DECISION)
    assert other_type.disposition == pb.DISPOSITION_CREATED and other_type.memory_id != first.memory_id
    assess_all(stub, a)
    commit(stub, a.session_id)

    # Another session of the same scope matches; the same text in another scope does not.
    b = activate(stub, scope, task=claim("another task"))
    again = remember(stub, b.session_id, scope, text)
    assert again.disposition == pb.DISPOSITION_MATCHED and again.memory_id == first.memory_id
    other_scope = new_scope()
    o = activate(stub, other_scope, task=claim("elsewhere"))
    elsewhere = remember(stub, o.session_id, other_scope, text)
    assert elsewhere.disposition == pb.DISPOSITION_CREATED and elsewhere.memory_id != first.memory_id


# ------------------------------------------------------------------------------------ 25


def test_s25_batch_remember_rejects_outer_occurred_at(server, stub, scope):
    a = activate(stub, scope, task=claim("record observations"))
    ts = timestamp_pb2.Timestamp(seconds=1_700_000_000)
    item = pb.RememberItem(content=claim("the nightly build broke on tuesday"), type=res.MEMORY_TYPE_FACT)

    before = server.snapshot()
    err = expect_error(
        lambda: stub.Remember(
            pb.RememberRequest(session_id=a.session_id, scope=scope, memories=[item], occurred_at=ts), timeout=30
        )
    )
    assert_invalid(err, ["occurred_at"])
    # A stage-2 refusal: the session is not resolved, so not even touched (behaviour §2.3, 6.1).
    assert server.snapshot() == before

    # occurred_at belongs on each item, or on the scalar form.
    item.occurred_at.CopyFrom(ts)
    ok = stub.Remember(pb.RememberRequest(session_id=a.session_id, scope=scope, memories=[item]), timeout=30)
    assert ok.batch.results[0].data.disposition == pb.DISPOSITION_CREATED
    scalar = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            content=claim("another fact"),
            type=res.MEMORY_TYPE_FACT,
            occurred_at=ts,
        ),
        timeout=30,
    )
    assert scalar.memory.disposition == pb.DISPOSITION_CREATED


def test_s25_form_rules_of_remember(server, stub, scope):
    a = activate(stub, scope, task=claim("record observations"))
    item = pb.RememberItem(content=claim("a fact"), type=res.MEMORY_TYPE_FACT)
    before = server.snapshot()
    cases = [
        (
            pb.RememberRequest(
                session_id=a.session_id, scope=scope, content="x", type=res.MEMORY_TYPE_FACT, memories=[item]
            ),
            ["content", "type"],
        ),
        (pb.RememberRequest(session_id=a.session_id, scope=scope), [""]),
        (pb.RememberRequest(session_id=a.session_id, scope=scope, content=claim("lonely")), ["type"]),
        (pb.RememberRequest(session_id=a.session_id, scope=scope, type=res.MEMORY_TYPE_FACT), ["content"]),
        (
            pb.RememberRequest(session_id=a.session_id, scope=scope, content="  ", type=res.MEMORY_TYPE_FACT),
            ["content"],
        ),
    ]
    for request, paths in cases:
        err = expect_error(lambda: stub.Remember(request, timeout=30))
        assert err.code == grpc.StatusCode.INVALID_ARGUMENT and err.reason == "INVALID_INPUT"
        assert sorted(err.paths) == paths, (request, err.violations)
    assert server.snapshot() == before


# ------------------------------------------------------------------------------------ 61


def test_s61_batch_item_errors_fail_only_their_item(server, stub, scope):
    a = activate(stub, scope, task=claim("record observations"))
    c1, c3 = claim("the queue drains nightly"), claim("we chose postgres for the ledger")
    resp = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[
                pb.RememberItem(content=c1, type=res.MEMORY_TYPE_FACT),
                pb.RememberItem(content="   ", type=res.MEMORY_TYPE_FACT),
                pb.RememberItem(content=c3, type=res.MEMORY_TYPE_DECISION),
            ],
        ),
        timeout=30,
    )
    assert resp.WhichOneof("result") == "batch"
    results = resp.batch.results
    assert [r.index for r in results] == [0, 1, 2]
    assert [r.WhichOneof("result") for r in results] == ["data", "error", "data"]
    assert results[1].error.code == "invalid_input" and not results[1].error.retryable
    assert "memories[1].content" in results[1].error.message
    r1, r3 = results[0].data, results[2].data
    assert r1.disposition == r3.disposition == pb.DISPOSITION_CREATED
    assert r1.type == res.MEMORY_TYPE_FACT and r3.type == res.MEMORY_TYPE_DECISION
    c = commit(stub, a.session_id)
    assert c.operation == pb.COMMIT_OPERATION_CLOSED and c.episodes_formed == 2  # only stored items

    b = activate(stub, scope, task=f"{c1} {c3}")
    assert sorted(ids(b)) == sorted([r1.memory_id, r3.memory_id])

    # 101 items → the whole call fails on `memories`, nothing stored.
    before = server.snapshot()
    too_many = [pb.RememberItem(content=claim(f"fact {i}"), type=res.MEMORY_TYPE_FACT) for i in range(101)]
    err = expect_error(
        lambda: stub.Remember(pb.RememberRequest(session_id=b.session_id, scope=scope, memories=too_many), timeout=30)
    )
    assert_invalid(err, ["memories"])
    assert server.snapshot() == before


def test_s61_item_errors_name_every_offending_path(server, stub, scope):
    a = activate(stub, scope, task=claim("record observations"))
    # snapshot() drains queued consolidation first, so no lesson of an earlier test lands in between.
    before = server.snapshot()["counts"]
    resp = stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[
                pb.RememberItem(content=claim("fine"), type=res.MEMORY_TYPE_UNSPECIFIED),
                pb.RememberItem(content=" ", type=res.MEMORY_TYPE_UNSPECIFIED),
                pb.RememberItem(content="x" * 16385, type=res.MEMORY_TYPE_FACT),
                pb.RememberItem(content=claim("also fine"), type=99),
                pb.RememberItem(content="é" * 8192, type=res.MEMORY_TYPE_FACT),  # exactly 16 KiB
            ],
        ),
        timeout=30,
    )
    results = resp.batch.results
    assert [r.WhichOneof("result") for r in results] == ["error", "error", "error", "error", "data"]
    assert "memories[0].type" in results[0].error.message
    assert "memories[1].content" in results[1].error.message and "memories[1].type" in results[1].error.message
    assert "memories[2].content" in results[2].error.message
    assert "memories[3].type" in results[3].error.message
    for r in results[:4]:
        assert r.error.code == "invalid_input" and not r.error.retryable
    after = server.snapshot()["counts"]
    assert after["memories"] == before["memories"] + 1


def test_s61_batch_of_exactly_100_items_is_accepted(server, stub, scope):
    a = activate(stub, scope, task=claim("record observations"))
    items = [pb.RememberItem(content=claim(f"fact {i}"), type=res.MEMORY_TYPE_FACT) for i in range(100)]
    resp = stub.Remember(pb.RememberRequest(session_id=a.session_id, scope=scope, memories=items), timeout=30)
    assert [r.index for r in resp.batch.results] == list(range(100))
    assert all(r.WhichOneof("result") == "data" for r in resp.batch.results)
