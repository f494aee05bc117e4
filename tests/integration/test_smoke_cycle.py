"""A whole cognitive cycle over gRPC."""

from tests.support import activate, assess_all, commit, expect_error, pb, remember, res, used


def test_full_cycle(stub, scope):
    a = activate(stub, scope, task="Fix the deploy port")
    assert a.memory_state == res.MEMORY_STATE_COLD_START
    r = remember(stub, a.session_id, scope, "The deploy port is 8080")
    assert r.disposition == pb.DISPOSITION_CREATED
    assess_all(stub, a)
    assert commit(stub, a.session_id).operation == pb.COMMIT_OPERATION_CLOSED

    b = activate(stub, scope, task="What is the deploy port? The deploy port is 8080")
    assert [m.memory_id for m in b.memories] == [r.memory_id]
    err = expect_error(lambda: commit(stub, b.session_id))
    assert err.reason == "INCOMPLETE_FEEDBACK"
    f = stub.Feedback(pb.FeedbackRequest(retrieval_id=b.retrieval_id, memory_feedback=[used(r.memory_id)]))
    assert list(f.record.applied.strengthened) == [r.memory_id]
    assert commit(stub, b.session_id).operation == pb.COMMIT_OPERATION_CLOSED
