"""Large requests share a budget of bytes in work (api.request_budget): one that does not fit is
refused before it is parsed, with RESOURCE_EXHAUSTED + ErrorInfo `resource_exhausted` (retryable)
+ RetryInfo, and stores nothing; the budget is given back when a request is done, refused by
validation or not; ordinary requests are never counted."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import grpc
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from slowave.api.request_budget import LARGE_REQUEST_BYTES
from slowave.storage.database import Database
from tests.support import activate, check_error, details_of, new_scope, pb, remember, res, wait_until


def _claims(n: int, size: int) -> list[pb.RememberItem]:
    return [pb.RememberItem(content=f"Claim {i} " + "z" * size, type=res.MEMORY_TYPE_FACT) for i in range(n)]


def test_a_large_request_past_the_budget_is_refused_before_parsing_and_stores_nothing(make_server):
    srv = make_server()
    budget = srv.running.request_budget
    budget.capacity = 3 * LARGE_REQUEST_BYTES
    scope = new_scope()
    a = activate(srv.stub, scope, task="Budget drill")
    # 100 claims of 3,000 bytes: a ~300 KB request, over the large-request threshold.
    held_request = pb.RememberRequest(session_id=a.session_id, scope=scope, memories=_claims(100, 3000))
    assert held_request.ByteSize() >= LARGE_REQUEST_BYTES
    holder = Database(srv.database_url)
    with ThreadPoolExecutor(max_workers=1) as pool:
        # The first large call waits on a lock every Remember of the session needs, holding its
        # share of the budget.
        with holder.transaction() as held:
            held.sessions.get("local", a.session_id, lock=True)
            counts_before = held.table_counts()
            first = pool.submit(lambda: srv.stub.Remember(held_request, timeout=120))
            wait_until(lambda: budget.used >= held_request.ByteSize(), timeout=60, what="the first call's share")
            big = pb.RememberRequest(session_id=a.session_id, scope=scope, memories=_claims(100, 6000))
            assert big.ByteSize() + budget.used > budget.capacity
            try:
                srv.stub.Remember(big, timeout=30)
                raise AssertionError("a request past the budget was served")
            except grpc.RpcError as exc:
                err, status = details_of(exc), rpc_status.from_call(exc)
            check_error(err, grpc.StatusCode.RESOURCE_EXHAUSTED, "RESOURCE_EXHAUSTED", "resource_exhausted", True)
            assert any(d.Is(error_details_pb2.RetryInfo.DESCRIPTOR) for d in status.details), status
        reply = first.result(timeout=120)
    assert [r.WhichOneof("result") for r in reply.batch.results] == ["data"] * 100
    wait_until(lambda: budget.used == 0, timeout=30, what="the budget to be given back")
    small = remember(srv.stub, a.session_id, scope, "The budget drill is over.")
    assert small.stored
    with holder.transaction() as uow:
        counts_after = uow.table_counts()
    holder.engine.dispose()
    # Only the admitted batch and the small claim were stored (the refused one stored nothing).
    assert counts_after["memories"] == counts_before["memories"] + 101


def test_a_large_request_refused_by_validation_gives_its_share_back(make_server):
    srv = make_server()
    budget = srv.running.request_budget
    scope = new_scope()
    a = activate(srv.stub, scope, task="Budget drill")
    oversized = "x" * (2 * LARGE_REQUEST_BYTES)  # over the content limit: refused by validation
    try:
        srv.stub.Remember(pb.RememberRequest(session_id=a.session_id, scope=scope, content=oversized), timeout=30)
        raise AssertionError("an oversized claim was stored")
    except grpc.RpcError as exc:
        assert details_of(exc).code == grpc.StatusCode.INVALID_ARGUMENT
    assert budget.used == 0
