"""The full-text index kept in one segment by the server itself (storage.index_merger), over gRPC:
memories stored by many separate Remember calls (one index segment each) are merged in the
background, and retrieval finds the same memories afterwards. PostgreSQL's GIN index needs no
such upkeep: its servers run no merger."""

from __future__ import annotations

from tests.conftest import BACKEND
from tests.support import activate, assess_all, remember, wait_until


def _segments(srv) -> int:
    with srv.running.ctx.db.transaction(read_only=True) as view:
        return view.full_text.segments()


def _found(srv, scope: str, task: str) -> list[str]:
    a = activate(srv.stub, scope, task=task)
    assess_all(srv.stub, a)
    return [m.content for m in a.memories]


def test_the_server_merges_the_full_text_index_in_the_background_and_finds_the_same(make_server, scope):
    srv = make_server(index_merge_seconds=0.2)
    a = activate(srv.stub, scope, task="writing down the fleet", initial_goal="notes")
    for n in range(12):  # one Remember call, one write transaction, one index segment each
        remember(srv.stub, a.session_id, scope, f"Worker pool {n} runs on host kestrel-{n} in rack {n % 3}.")
    if BACKEND == "postgresql":
        assert srv.running.index_merger is None
    else:
        wait_until(lambda: srv.running.index_merger.merges >= 1 and _segments(srv) <= 4, timeout=60, what="a merge")
    assert _found(srv, scope, "Which host does worker pool 7 run on?")[0].startswith(
        "Worker pool 7 runs on host kestrel-7"
    )
    assert "Worker pool 4 runs on host kestrel-4 in rack 1." in _found(srv, scope, "what runs in rack 1")
