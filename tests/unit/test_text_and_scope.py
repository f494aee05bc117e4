"""Text rules and limits (behaviour §3.4), claim equivalence (6.3), scopes (3.2), identifiers (3.3)."""

from __future__ import annotations

import re

import pytest

from slowave.domain import identifiers as ids
from slowave.domain.errors import Violation
from slowave.domain.scope import check_scope, fragmentation_key
from slowave.domain.text import (
    BATCH_LIMIT,
    CONTENT_LIMIT_BYTES,
    IDENTIFIER_LIMIT_CHARS,
    LIST_LIMIT,
    TEXT_LIMIT_BYTES,
    TRAJECTORY_LIMIT,
    TRAJECTORY_SUMMARY_LIMIT_CHARS,
    check_identifier,
    check_list_length,
    check_text,
    clean_text_list,
    is_blank,
    normalize_claim,
    utf8_len,
)


def test_limits_table():
    assert TEXT_LIMIT_BYTES == 4096
    assert CONTENT_LIMIT_BYTES == 16384
    assert TRAJECTORY_SUMMARY_LIMIT_CHARS == 1000
    assert TRAJECTORY_LIMIT == 32
    assert IDENTIFIER_LIMIT_CHARS == 256
    assert LIST_LIMIT == 200
    assert BATCH_LIMIT == 100


# --------------------------------------------------------------------------- nonblank, trimming


@pytest.mark.parametrize("value", [None, "", " ", "\t\n ", "\u3000"])
def test_blank(value):
    assert is_blank(value)


def test_not_blank():
    assert not is_blank(" x ")


def test_check_text_trims_and_treats_blank_as_absent():
    v: list[Violation] = []
    assert check_text(v, "task", "  fix it \n", required=True) == "fix it"
    assert check_text(v, "retrieval_quality", "   ", required=False) is None
    assert check_text(v, "retrieval_quality", None, required=False) is None
    assert v == []


def test_check_text_required_blank_is_a_violation_at_its_path():
    v: list[Violation] = []
    assert check_text(v, "initial_goal", " \t ", required=True) is None
    assert check_text(v, "final_goal", None, required=True) is None
    assert [x.path for x in v] == ["initial_goal", "final_goal"]


def test_text_limit_is_4096_utf8_bytes_measured_as_received():
    v: list[Violation] = []
    assert check_text(v, "task", "x" * 4096, required=True) == "x" * 4096
    assert check_text(v, "task", "é" * 2048, required=True) == "é" * 2048  # 4096 bytes
    assert v == []
    assert check_text(v, "task", "x" * 4097, required=True) is None
    assert check_text(v, "query", "é" * 2049, required=True) is None  # 2049 characters, 4098 bytes
    # measured on the value as received: surrounding white space counts
    assert check_text(v, "reason", " " + "x" * 4096, required=False) is None
    assert [x.path for x in v] == ["task", "query", "reason"]


def test_content_limit_is_16384_bytes():
    v: list[Violation] = []
    assert check_text(v, "content", "x" * 16384, required=True, limit_bytes=CONTENT_LIMIT_BYTES)
    assert v == []
    assert check_text(v, "content", "€" * 5462, required=True, limit_bytes=CONTENT_LIMIT_BYTES) is None  # 16386 bytes
    assert [x.path for x in v] == ["content"]


def test_utf8_len():
    assert utf8_len("aé€😀") == 1 + 2 + 3 + 4


def test_identifier_limit_256_characters_and_trim():
    v: list[Violation] = []
    assert check_identifier(v, "session_id", " sess_abc123 ", required=True) == "sess_abc123"
    assert check_identifier(v, "session_id", "s" * 256, required=True) == "s" * 256
    assert check_identifier(v, "session_id", "é" * 256, required=True) == "é" * 256  # characters, not bytes
    assert v == []
    assert check_identifier(v, "session_id", "s" * 257, required=True) is None
    assert check_identifier(v, "memory_id", "  ", required=True) is None
    assert check_identifier(v, "replacement_memory_id", "  ", required=False) is None
    assert [x.path for x in v] == ["session_id", "memory_id"]


def test_identifiers_are_never_rejected_for_their_format():
    v: list[Violation] = []
    for value in ("sess_abc123", "sch_042", "42", "anything at all", "ctx_ZZZ"):
        assert check_identifier(v, "retrieval_id", value, required=True) == value
    assert v == []


def test_list_length_limit():
    v: list[Violation] = []
    assert check_list_length(v, "missing", ["x"] * 200)
    assert not check_list_length(v, "missing", ["x"] * 201)
    assert not check_list_length(v, "items", [1] * 101, BATCH_LIMIT)
    assert check_list_length(v, "items", [1] * 100, BATCH_LIMIT)
    assert [x.path for x in v] == ["missing", "items"]


def test_clean_text_list_trims_and_drops_blanks():
    v: list[Violation] = []
    assert clean_text_list(v, "verification.evidence_refs", ["", " ci-42 ", "\t", "log.txt"]) == ["ci-42", "log.txt"]
    assert v == []


def test_clean_text_list_item_limit_path():
    v: list[Violation] = []
    clean_text_list(v, "procedure.steps", ["ok", "x" * 4097])
    assert [x.path for x in v] == ["procedure.steps[1]"]


def test_clean_text_list_over_200_entries():
    v: list[Violation] = []
    assert clean_text_list(v, "procedure.caveats", ["c"] * 201) == []
    assert [x.path for x in v] == ["procedure.caveats"]


# --------------------------------------------------------------------------- claim equivalence (6.3)


def test_normalize_claim():
    assert normalize_claim("  The Deploy\n\tport  is 8080 ") == "the deploy port is 8080"
    assert normalize_claim("STRASSE") == normalize_claim("straße")  # case folding, not lowercasing
    assert normalize_claim("a  b") == normalize_claim("A B")
    assert normalize_claim("ab") != normalize_claim("a b")


# --------------------------------------------------------------------------- scope (3.2)


@pytest.mark.parametrize("value", ["project", ":x", "a: ", "x:", "  :  ", "", "   ", "a:", ":", "ab", " : x"])
def test_invalid_scopes(value):
    v: list[Violation] = []
    assert check_scope(v, value) is None
    assert [x.path for x in v] == ["scope"]


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (" project:x ", "project:x"),
        ("a:b", "a:b"),
        ("project:my-repo", "project:my-repo"),
        ("Project:X", "Project:X"),  # no canonicalisation
        ("domain:a:b:c", "domain:a:b:c"),  # split at the first colon; the id may contain colons
        ("workflow::x", "workflow::x"),  # id part ':x' is nonblank
        ("client:  x", "client:  x"),
    ],
)
def test_valid_scopes(value, expected):
    v: list[Violation] = []
    assert check_scope(v, value) == expected
    assert v == []


def test_scope_length_limit_256_characters():
    v: list[Violation] = []
    ok = "project:" + "x" * 248
    assert len(ok) == 256
    assert check_scope(v, ok) == ok
    assert v == []
    assert check_scope(v, ok + "x") is None
    assert [x.path for x in v] == ["scope"]


def test_scope_custom_path():
    v: list[Violation] = []
    check_scope(v, "bad", path="items[0].scope")
    assert [x.path for x in v] == ["items[0].scope"]


def test_fragmentation_key():
    assert fragmentation_key("Project:X") == fragmentation_key("project:x")
    assert fragmentation_key("project:my-repo") == fragmentation_key("project:my_repo")
    assert fragmentation_key("Project:My-Repo") == fragmentation_key("project:my_repo")
    assert fragmentation_key("project:myrepo") != fragmentation_key("project:my-repo")
    assert fragmentation_key("project:x") != fragmentation_key("project:y")


# --------------------------------------------------------------------------- identifiers (3.3)


def test_minted_identifier_formats():
    assert re.fullmatch(r"sess_[0-9a-f]{12}", ids.new_session_id())
    assert re.fullmatch(r"ctx_[0-9a-f]{12}", ids.new_activation_id())
    assert re.fullmatch(r"rec_[0-9a-f]{12}", ids.new_recall_id())
    assert re.fullmatch(r"cur_[A-Za-z0-9_-]{32}", ids.new_cursor_id())
    assert re.fullmatch(r"cont_[A-Za-z0-9_-]{43}", ids.new_continuity_id())
    assert re.fullmatch(r"fbe_[0-9a-f]{32}", ids.new_feedback_event_id())
    assert ids.memory_id(42) == "sch_42"
    assert ids.procedure_id("sess_0123456789ab") == "proc_sess_0123456789ab"
    assert ids.event_id(7) == "evt_7"
    assert ids.episode_id(3) == "ep_3"


def test_minted_ids_are_unique():
    assert len({ids.new_session_id() for _ in range(200)}) == 200
    assert len({ids.new_continuity_id() for _ in range(200)}) == 200


def test_minted_continuity_token_matches_accepted_pattern():
    for _ in range(50):
        assert ids.CONTINUITY_PATTERN.match(ids.new_continuity_id())


@pytest.mark.parametrize(
    ("token", "ok"),
    [
        ("cont_" + "a" * 32, True),
        ("cont_" + "a" * 96, True),
        ("cont_" + "A-_9" * 8, True),
        ("cont_" + "a" * 31, False),
        ("cont_" + "a" * 97, False),
        ("cont_" + "a" * 31 + "!", False),
        ("CONT_" + "a" * 32, False),
        ("cont-" + "a" * 32, False),
    ],
)
def test_continuity_pattern(token, ok):
    assert bool(ids.CONTINUITY_PATTERN.match(token)) is ok


@pytest.mark.parametrize(
    ("memory_id", "number"),
    [
        ("sch_42", 42),
        ("sch_1", 1),
        ("sch_042", None),
        ("42", None),
        ("sch_0", None),
        ("sch_", None),
        ("sch_4x", None),
        ("SCH_4", None),
        ("sch_-1", None),
    ],
)
def test_memory_number(memory_id, number):
    assert ids.memory_number(memory_id) == number
