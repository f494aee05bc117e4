from __future__ import annotations

import pytest

from tests.support import Server, new_scope, start_test_server


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Server:
    """One server for the session; tests isolate themselves with a fresh scope each."""
    srv = start_test_server(tmp_path_factory.mktemp("server"))
    yield srv
    srv.stop()


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
