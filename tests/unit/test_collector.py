"""The garbage collector kept off request latency (api.collector): a serving process freezes what it
loaded at start, and the retrieval caches hold objects the collector does not track."""

from __future__ import annotations

import gc

from slowave.api import collector
from slowave.domain.relevance import stored_counts, term_counts, term_profile


def test_settle_freezes_what_is_alive_so_full_collections_skip_it() -> None:
    loaded = [{"setup": [n]} for n in range(1000)]
    try:
        frozen = collector.settle()
        assert frozen >= 1000
        assert not any(o is loaded for o in gc.get_objects()), "a frozen object is never walked"
        later = [[1]]
        assert any(o is later for o in gc.get_objects()), "what is created later is collected as usual"
    finally:
        gc.unfreeze()  # this test process is no server


def test_term_profiles_are_plain_dicts_the_collector_does_not_track() -> None:
    repeated = "deploy deploy rollback deploy canary"
    for counts, length in (term_profile(repeated), stored_counts(repeated), term_counts("Deploys and deploying again")):
        assert type(counts) is dict and not gc.is_tracked(counts)
        assert length == sum(counts.values())
    assert term_profile(repeated)[0] == {"deploy": 3, "rollback": 1, "canary": 1}
