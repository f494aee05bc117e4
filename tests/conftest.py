from __future__ import annotations

import os

import pytest

from tests import support
from tests.postgres import PostgresCluster, find_bindir
from tests.support import Server, new_scope, start_test_server

BACKEND = os.environ.get("SLOWAVE_TEST_BACKEND", "sqlite")


def pytest_report_header(config):
    return f"slowave test database backend: {BACKEND}"


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "backend_neutral: what the test checks does not depend on the database backend "
        "(packaging, proto tooling, client libraries); it runs in the SQLite pass only",
    )


def pytest_collection_modifyitems(config, items):
    if BACKEND == "sqlite":
        return
    skip = pytest.mark.skip(reason="backend-neutral: runs once, in the SQLite pass of `make test`")
    for item in items:
        if item.get_closest_marker("backend_neutral"):
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def database_backend():
    """SLOWAVE_TEST_BACKEND=postgresql runs the suite on a PostgreSQL cluster this run starts."""
    if BACKEND != "postgresql":
        yield BACKEND
        return
    bindir = find_bindir()
    if bindir is None:
        pytest.skip(
            "PostgreSQL binaries (initdb, pg_ctl, postgres) not found: the PostgreSQL suite is SKIPPED; "
            "install the Debian package `postgresql` to run it"
        )
    cluster = PostgresCluster(bindir).start()
    support.use_database_factory(lambda _tmp: cluster.new_database())
    yield cluster
    cluster.destroy()


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    """One server for the session; tests isolate themselves with a fresh scope each."""
    srv = start_test_server(tmp_path_factory.mktemp("server"))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def hybrid_server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    """One server with the `make serve` defaults' semantic channel, for the retrieval tests."""
    srv = start_test_server(tmp_path_factory.mktemp("hybrid"), semantic="static")
    yield srv
    srv.stop()


@pytest.fixture(params=["lexical", "hybrid"])
def any_server(request: pytest.FixtureRequest) -> Server:
    """Each retrieval rule's test runs on the lexical channel and on the defaults' hybrid one."""
    return request.getfixturevalue("server" if request.param == "lexical" else "hybrid_server")


@pytest.fixture
def stub(server: Server):
    return server.stub


@pytest.fixture
def scope() -> str:
    return new_scope()


@pytest.fixture
def make_server(tmp_path):
    """Starts servers with their own database and settings (reaper timeouts, limits…)."""
    started: list[Server] = []

    def make(**overrides) -> Server:
        srv = start_test_server(tmp_path / f"s{len(started)}", **overrides)
        started.append(srv)
        return srv

    yield make
    for srv in started:
        srv.stop()


@pytest.fixture
def graph_adds(monkeypatch) -> list[int]:
    """How many rows each `add` to a dense graph (usearch) carried: a build adds a whole scope at
    once, a saved graph that was loaded adds only the rows stored since."""
    import usearch.index

    sizes: list[int] = []

    class Counting(usearch.index.Index):
        def add(self, keys, vectors, **kw):
            sizes.append(len(keys))
            return super().add(keys, vectors, **kw)

    monkeypatch.setattr(usearch.index, "Index", Counting)
    return sizes
