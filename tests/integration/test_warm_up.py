"""A starting server reads the vectors of the most recently active scopes before it serves
(service.warm_up), on both backends: a restarted server's first Activate of a busy scope finds them
in memory, ranks as before the restart, and the number of scopes read ahead is bounded."""

from __future__ import annotations

from tests.support import Server, new_scope, pb, res, start_test_server


def _fill(server: Server, scope: str, claims: list[str]) -> None:
    a = server.stub.Activate(pb.ActivateRequest(task=f"Record {scope}", initial_goal="record", scope=scope))
    server.stub.Remember(
        pb.RememberRequest(
            session_id=a.session_id,
            scope=scope,
            memories=[pb.RememberItem(content=c, type=res.MEMORY_TYPE_FACT) for c in claims],
        )
    )


def _ask(server: Server, scope: str, task: str) -> pb.ActivateResponse:
    return server.stub.Activate(pb.ActivateRequest(task=task, initial_goal="find", scope=scope))


def _restart(tmp_path, server: Server, name: str, **overrides) -> Server:
    server.stop()
    return start_test_server(tmp_path / name, database_url=server.database_url, semantic="static", **overrides)


CLAIMS = [
    "The payments service retries a failed card charge three times before giving up.",
    "Invoices are rendered as PDF by the billing worker every night.",
    "The refund queue is drained by a cron job at 02:00 UTC.",
]


def test_a_restarted_server_holds_the_recent_scopes_vectors_before_its_first_request(tmp_path):
    first = start_test_server(tmp_path / "first", semantic="static")
    older, recent = new_scope(), new_scope()
    _fill(first, older, ["The staging cluster runs six nodes.", "Backups of the staging cluster are kept a week."])
    _fill(first, recent, CLAIMS)
    asked = _ask(first, recent, "How often are card charges retried?")
    tenant = first.running.ctx.settings.tenant

    second = _restart(tmp_path, first, "second")
    try:
        index = second.running.ctx.semantic.index
        # Read before any request of this server: by the warm-up, both scopes being recent enough.
        assert index.held(tenant, recent) == len(CLAIMS)
        assert index.held(tenant, older) == 2
        again = _ask(second, recent, "How often are card charges retried?")
        assert [m.memory_id for m in again.memories] == [m.memory_id for m in asked.memories]
        assert again.memories[0].content == CLAIMS[0]
    finally:
        second.stop()


def test_the_warm_up_reads_the_most_recently_active_scopes_first_and_no_more_than_it_is_told(tmp_path):
    first = start_test_server(tmp_path / "first", semantic="static")
    older, recent = new_scope(), new_scope()
    _fill(first, older, ["The staging cluster runs six nodes."])
    _fill(first, recent, CLAIMS)
    tenant = first.running.ctx.settings.tenant

    one = _restart(tmp_path, first, "one", warm_scopes=1)
    try:
        index = one.running.ctx.semantic.index
        assert index.held(tenant, recent) == len(CLAIMS)
        assert index.held(tenant, older) == 0
        # Not read ahead is read at the first request, as always.
        got = _ask(one, older, "How many nodes does staging run?")
        assert got.memories[0].content == "The staging cluster runs six nodes."
        assert index.held(tenant, older) == 1
    finally:
        none = _restart(tmp_path, one, "none", warm_scopes=0)
    try:
        assert none.running.ctx.semantic.index.held(tenant, recent) == 0
    finally:
        none.stop()
