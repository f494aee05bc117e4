"""A claim's shape stored with its memory (domain.near_duplicates.shape_record): read back, it is
the parse itself; a record of another parse is never read; a claim is parsed only when neither the
process cache nor a stored record has its shape."""

from __future__ import annotations

import gc
import itertools
import json

import pytest

from slowave.domain import near_duplicates as nd

CLAIMS = [
    "The payments-api cache was upgraded to Redis 7.2 in PAY-1234 on 2024-05-02.",
    "Since 2024-07-12, Fatima Zahra is the on-call owner of ledger-worker.",
    "Deploys use v2.4.1 of the chart, replacing v2.3.0.",
    "The default branch of infra-live changed from master to main.",
    "search-api exposes metrics on port 9100 -> 9464 since the exporter change.",
    "Configs live in deploy/values.yaml; secrets live in Vault.",
    "We chose MySQL over MongoDB after the March upgrade.",
    "The release train leaves every 2 weeks.",
    "Backups of billing-db are kept for 35 days, as of last quarter.",
    "Café Zürich ist am Montag geschlossen.",  # non-ASCII words and a capitalised first word
    "Why does report-builder answer 422?",
    "",
    "ok",
]


@pytest.mark.parametrize("text", CLAIMS)
def test_a_stored_record_reads_back_as_the_parse(text):
    parsed = nd.parse_claim(text)
    record = nd.shape_record(parsed)
    assert record.startswith(nd.SHAPE_RECORD_PREFIX)
    assert json.loads(record)[0] == nd.SHAPE_RECORD_VERSION
    assert nd.shape_from_record(text, record) == parsed


def test_decoded_shapes_compare_as_parsed_ones():
    decoded = {t: nd.shape_from_record(t, nd.shape_record(nd.parse_claim(t))) for t in CLAIMS}
    for a, b in itertools.permutations(CLAIMS, 2):
        assert nd.compare(decoded[a], decoded[b]) == nd.compare(nd.parse_claim(a), nd.parse_claim(b))


@pytest.mark.parametrize(
    "record",
    [None, "", '["s0-00000000",[],0,[],"",""' + ",0]", "[1,2,3]", '{"not": "a record"}'],
)
def test_a_record_of_another_parse_is_not_read(record):
    assert nd.shape_from_record(CLAIMS[0], record) is None


def test_a_claim_is_parsed_only_when_neither_the_cache_nor_its_record_has_its_shape(monkeypatch):
    cached, recorded, bare = CLAIMS[0], CLAIMS[1], CLAIMS[2]
    monkeypatch.setattr(nd, "SHAPES", nd.ShapeCache(8))
    nd.SHAPES.put(cached, nd.parse_claim(cached))
    records = {2: nd.shape_record(nd.parse_claim(recorded)), 3: None}
    asked, parsed = [], []
    real_parse = nd.parse_claim
    monkeypatch.setattr(nd, "parse_claim", lambda text: parsed.append(text) or real_parse(text))

    def stored(ids):
        asked.append(list(ids))
        return {i: records[i] for i in ids}

    shapes = nd.shapes_of([(1, cached), (2, recorded), (3, bare)], stored)
    assert shapes == [real_parse(cached), real_parse(recorded), real_parse(bare)]
    assert asked == [[2, 3]]  # the store is asked once, for the claims not cached
    assert parsed == [bare]  # and a stored record is read, not parsed again
    # All three are cached now: nothing is asked or parsed a second time.
    assert nd.shapes_of([(1, cached), (2, recorded), (3, bare)], stored) == shapes
    assert asked == [[2, 3]] and parsed == [bare]


def test_the_shape_cache_keeps_the_claims_compared_last():
    cache = nd.ShapeCache(2)
    a, b, c = (nd.parse_claim(t) for t in CLAIMS[:3])
    cache.put("a", a)
    cache.put("b", b)
    assert cache.get("a") == a  # now the most recent
    cache.put("c", c)
    assert len(cache) == 2 and cache.get("b") is None and cache.get("a") == a and cache.get("c") == c


@pytest.mark.parametrize("text", CLAIMS)
def test_a_cached_shape_unpacks_as_the_parse(text):
    parsed = nd.parse_claim(text)
    unpacked = nd.unpack(nd.pack(parsed))
    assert unpacked == parsed
    assert (unpacked.core is unpacked.wording) == (parsed.core is parsed.wording)  # one set, as parsed
    assert nd.shape_record(unpacked) == nd.shape_record(parsed)


def test_the_shape_cache_holds_nothing_the_garbage_collector_walks():
    """A full collection walks every object it tracks: a scope's shapes, held as parsed, were ≈ 0.25
    s of it at 100k (bench/results/history.md, 2026-12-07). Packed, none of a shape is tracked after
    the collections that reach it, the text it is cached by included."""
    packed = [nd.pack(nd.parse_claim(text)) for text in CLAIMS]
    # CPython stops tracking a tuple at a collection that finds each of its items untracked: at
    # worst one level of nesting a collection (a frame, its slot, the slots, the shape).
    for _ in range(4):
        gc.collect()

    def tracked(obj: object) -> int:
        inner = obj if isinstance(obj, tuple) else ()
        return int(gc.is_tracked(obj)) + sum(tracked(item) for item in inner)

    assert [tracked(p) for p in packed] == [0] * len(CLAIMS)
    # …while a parsed shape is tracked (the test would pass without the packing otherwise).
    assert gc.is_tracked(nd.parse_claim(CLAIMS[0]).wording)
