"""SQLite's full-text index merged into one segment in the background (storage.index_merger): a
lookup reads every segment, and every write transaction adds one."""

from __future__ import annotations

from sqlalchemy import text

from slowave.storage.database import Database
from slowave.storage.index_merger import IndexMerger
from tests.support import wait_until


def _index_in_transactions(db: Database, count: int) -> None:
    for n in range(1, count + 1):
        with db.transaction() as uow:  # one segment each
            uow._ex.connection.execute(
                text("INSERT INTO memories_fts(rowid, words) VALUES (:n, :w)"), {"n": n, "w": f"alpha w{n % 7} x{n}"}
            )


def _matches(db: Database, word: str) -> list[int]:
    with db.transaction(read_only=True) as view:
        rows = view._ex.connection.execute(
            text("SELECT rowid FROM memories_fts WHERE memories_fts MATCH :w"), {"w": word}
        )
        return sorted(r[0] for r in rows)


def _segments(db: Database) -> int:
    with db.transaction(read_only=True) as view:
        return view.full_text.segments()


def test_an_index_of_many_segments_is_merged_into_one_and_finds_the_same(db: Database) -> None:
    _index_in_transactions(db, 40)
    assert _segments(db) > 4
    before = {w: _matches(db, w) for w in ("alpha", "w3", "x17")}

    merger = IndexMerger(db)
    steps = merger.merge()
    assert steps >= 1 and merger.merges == 1
    assert _segments(db) == 1
    assert {w: _matches(db, w) for w in before} == before
    with db.transaction() as uow:  # FTS5 checks its own structure (raises if corrupt)
        uow._ex.connection.execute(text("INSERT INTO memories_fts(memories_fts) VALUES ('integrity-check')"))


def test_a_few_segments_are_left_alone(db: Database) -> None:
    _index_in_transactions(db, 3)
    segments = _segments(db)
    assert 1 < segments <= 4
    assert IndexMerger(db).merge() == 0
    assert _segments(db) == segments


def test_the_background_merger_keeps_merging_as_writes_add_segments(db: Database) -> None:
    merger = IndexMerger(db, interval=0.05).start()
    try:
        _index_in_transactions(db, 30)
        wait_until(lambda: merger.merges >= 1 and _segments(db) <= 4, timeout=60, what="background merge")
        assert _matches(db, "alpha") == list(range(1, 31))
    finally:
        merger.stop()
