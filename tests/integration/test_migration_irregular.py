"""Migration 0014 on a store written before it: every stored term of an irregular form is mapped to
its base's (domain.terms.IRREGULAR_FORMS), and the store then holds exactly what a store written
by the current code holds — own terms, session context, full-text entries, scope statistics,
occasions and cues — and retrieval over gRPC finds `built` by `builds` (both backends: the suite
runs again on PostgreSQL)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy import text

from slowave.domain import terms as domain_terms
from slowave.domain.learning import cue_key_hash
from slowave.domain.terms import terms
from slowave.storage.database import Database
from tests.support import activate, new_database_url, start_test_server

SCOPE = "project:irregular"
_CLAIMS = [
    "The release train broke twice last week.",
    "ledger-api was built and deployed by Jenkins.",
    "We bought two more runners for the children's app.",
    "Priya went to the planning meeting and told the team.",
]
_CUES = ["Which CI builds ledger-api?", "What did we buy for the runners?"]


def _write(url: str, revision: str) -> None:
    """The claims of one session, as Remember stores them, and the cues' term sets."""
    db = Database(url)
    db.migrate(revision)
    with db.transaction() as uow:
        rows, before = [], []
        for i, content in enumerate(_CLAIMS):
            context = terms(" ".join(before[-2:]))
            rows.append(
                dict(
                    tenant="local",
                    scope=SCOPE,
                    type="fact",
                    content=content,
                    source_kind="explicit_remember",
                    source_session_id="sess_irregular",
                    created_at=datetime(2026, 12, 4, 12, i, tzinfo=UTC),
                    occurred_at=datetime(2026, 11, 30, 9, tzinfo=UTC),
                    context_terms=" ".join(context) or None,
                )
            )
            before.append(content)
        uow.memories.insert_many(rows)
        for cue in _CUES:
            uow.cues.number("local", cue_key_hash(cue), frozenset(terms(cue)))
    db.engine.dispose()


def _state(url: str) -> dict[str, list]:
    with Database(url).engine.connect() as c:
        return {
            "memories": c.execute(text("SELECT number, own_terms, context_terms FROM memories ORDER BY number")).all(),
            "occasions": c.execute(text("SELECT number, terms FROM occasions ORDER BY number")).all(),
            "cues": c.execute(text("SELECT number, terms FROM cues ORDER BY number")).all(),
            "scope_terms": c.execute(
                text("SELECT tenant, scope, term, docs FROM scope_terms ORDER BY tenant, scope, term")
            ).all(),
        }


def _matches(url: str, words: list[str]) -> list[int]:
    db = Database(url)
    try:
        with db.transaction(read_only=True) as uow:
            return sorted(row.number for row in uow.search.lexical_matches("local", SCOPE, words, 50))
    finally:
        db.engine.dispose()


def test_0014_maps_the_stored_terms_of_irregular_forms(tmp_path: Path, monkeypatch):
    old_url = new_database_url(tmp_path / "old")
    with monkeypatch.context() as m:  # the code before 0014: no irregular forms
        m.setattr(domain_terms, "IRREGULAR_STEMS", {})
        _write(old_url, "0013")
        before = _state(old_url)
        assert "built" in before["memories"][1].own_terms.split()
        assert _matches(old_url, ["build"]) == []
    Database(old_url).migrate()

    fresh_url = new_database_url(tmp_path / "fresh")
    _write(fresh_url, "head")
    migrated, fresh = _state(old_url), _state(fresh_url)
    assert migrated == fresh
    assert migrated["memories"][1].own_terms.split()[:4] == ["ledger", "api", "build", "deploy"]
    assert {"build", "buy"} <= set(migrated["memories"][3].context_terms.split())  # claims 2 and 3 as context
    assert migrated["cues"][1].terms == "buy runner"
    assert migrated != before

    def revision(url: str) -> int:
        with Database(url).engine.connect() as c:
            return c.execute(text("SELECT revision FROM occasions")).scalar_one()

    assert revision(old_url) == revision(fresh_url) + 1  # a changed occasion names a new version of its terms

    # The full-text index was written again (own terms and session context): the new terms find
    # what they find in the fresh store, the old ones nothing.
    assert _matches(old_url, ["build"]) == _matches(fresh_url, ["build"]) == [2, 3, 4]
    assert _matches(old_url, ["go", "tell"]) == _matches(fresh_url, ["go", "tell"]) == [4]
    assert _matches(old_url, ["built"]) == _matches(old_url, ["bought"]) == []

    srv = start_test_server(tmp_path / "server", database_url=old_url)
    try:
        found = activate(srv.stub, SCOPE, task="Which CI builds ledger-api?").memories
        assert [m.content for m in found][:1] == [_CLAIMS[1]]
        assert "irregular-v1" in activate(srv.stub, SCOPE, task="Who went to planning?").retrieval_policy_version
    finally:
        srv.stop()
