"""The export format covers the whole schema: a table added to storage.tables without a place in
the stream (and a selection rule) would silently be left out of every export and copy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from types import SimpleNamespace

import pytest

from slowave.storage import portability as p
from slowave.storage import tables as t


def test_every_table_is_exported_once_and_parents_come_first():
    assert sorted(tbl.name for tbl in p.TABLES) == sorted(t.metadata.tables)
    assert len(set(p.TABLES)) == len(p.TABLES)
    for tbl in p.TABLES:
        for fk in tbl.foreign_keys:
            assert p.TABLES.index(fk.column.table) < p.TABLES.index(tbl), (tbl.name, fk.target_fullname)


@pytest.mark.parametrize("selection", [p.Selection("team"), p.Selection("team", "project:x")])
def test_every_selected_table_has_a_selection_rule(selection):
    for tbl in selection.tables():
        assert p.selected(tbl, selection), tbl.name
    assert p.selected(t.memories, p.Selection()) == []


def test_a_scope_without_a_tenant_is_refused():
    with pytest.raises(ValueError, match="--tenant"):
        p.Selection(scope="project:x")


def test_a_scope_selection_leaves_out_tenant_state_and_keys_and_vectors_when_asked():
    names = [tbl.name for tbl in p.Selection("team", "project:x", vectors=False).tables()]
    assert "tenants" not in names and "api_keys" not in names and "memory_vectors" not in names
    assert "memories" in names and "feedback_rows" in names


def test_values_round_trip_through_the_encoding():
    local = timezone(timedelta(hours=2))
    row = {
        "number": 7,
        "encoder_id": "static-v1",
        "tenant": "team",
        "scope": "project:x",
        "vector": b"\x00\x01\xff",
    }
    encoded = p.encode(t.memory_vectors, SimpleNamespace(_mapping=row))
    assert encoded["vector"] == "AAH/"
    assert p.decode(t.memory_vectors, encoded) == row
    gap = {c.name: None for c in t.knowledge_gaps.c} | {"first_seen_at": datetime(2026, 1, 2, 5, 0, tzinfo=local)}
    encoded = p.encode(t.knowledge_gaps, SimpleNamespace(_mapping=gap))
    assert encoded["first_seen_at"] == "2026-01-02T03:00:00+00:00"
    assert p.decode(t.knowledge_gaps, encoded)["first_seen_at"] == datetime(2026, 1, 2, 3, 0, tzinfo=UTC)
    with pytest.raises(ValueError, match="unknown \\['extra'\\]"):
        p.decode(t.memory_vectors, {**p.encode(t.memory_vectors, SimpleNamespace(_mapping=row)), "extra": 1})
