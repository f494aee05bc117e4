"""Vectors of older encoders pruned in batches (storage.vectors, `slowave-admin embed --prune`)."""

from __future__ import annotations

from slowave.storage.database import Database


def test_thousands_of_older_vectors_are_pruned_in_batches_and_the_current_ones_kept(db: Database) -> None:
    rows = [
        dict(number=n, tenant="t", scope="s", encoder_id=encoder, vector=b"\0" * 16)
        for n in range(1, 2501)
        for encoder in ("current:v2", "older:v1", *(("oldest:v0",) if n % 2 else ()))
    ]
    with db.transaction() as uow:
        uow.vectors.insert_many(rows)
    pruned = []
    while True:
        with db.transaction() as uow:  # a batch per write, as prune_other_encoders runs it
            deleted = uow.vectors.delete_other_encoders("current:v2", 1000)
        pruned.append(deleted)
        if deleted < 1000:
            break
    assert sum(pruned) == 2500 + 1250
    with db.transaction(read_only=True) as view:
        assert view.table_counts()["memory_vectors"] == 2500
        assert view.vectors.with_vector("current:v2", list(range(1, 2501))) == set(range(1, 2501))
