"""Rendering of long content (behaviour §5.3), page budgets and what remains (5.4, 5.3 AccessibleField)."""

from __future__ import annotations

import pytest

from slowave.config import RetrievalLimits
from slowave.domain.catalog import RENDER_LIMIT_CHARS, page_count, procedure_texts, remaining, render_content


def test_render_limit_and_default_limits():
    assert RENDER_LIMIT_CHARS == 1024
    limits = RetrievalLimits()
    assert limits.catalog_memories == 50
    assert limits.catalog_procedures == 9
    assert limits.page_procedures == 3
    assert limits.memory_page_budget_bytes == 12 * 1024
    assert limits.procedure_page_budget_bytes == 24 * 1024


# --------------------------------------------------------------------------- render_content


@pytest.mark.parametrize("n", [0, 1, 1000, 1024])
def test_content_up_to_1024_characters_is_served_whole(n):
    content = "x" * n
    assert render_content(content) == (content, None)


def test_1024_characters_measured_in_code_points_not_bytes():
    content = "é" * 1024  # 2048 bytes
    assert render_content(content) == (content, None)


def test_cut_at_the_longest_prefix_followed_by_white_space():
    words = "word " * 300  # 1500 characters; a space follows every 'word'
    shown, excerpt = render_content(words)
    # 204 words fill 1020 characters ("word " * 204); the prefix "word "*204 + "word" is 1024 long
    # and is followed by a space in the original
    assert shown == ("word " * 205).rstrip()
    assert len(shown) == 1024
    assert excerpt == (1500, 1024)


def test_prefix_ends_exactly_before_white_space_at_position_1024():
    content = "a" * 1024 + " " + "b" * 10
    shown, excerpt = render_content(content)
    assert shown == "a" * 1024
    assert excerpt == (1035, 1024)


def test_cut_never_splits_a_word():
    content = "a" * 1000 + " " + "b" * 100  # the only white space is at index 1000
    shown, excerpt = render_content(content)
    assert shown == "a" * 1000
    assert excerpt == (1101, 1000)


def test_trailing_white_space_of_the_prefix_is_removed():
    content = "a" * 900 + " \t\n  " + "b" * 200  # white space at 900..904
    shown, excerpt = render_content(content)
    # the longest prefix followed by white space is a*900 + " \t\n " (followed by the last ' ')
    assert shown == "a" * 900
    assert excerpt == (len(content), 900)


def test_any_white_space_counts():
    content = "a" * 1010 + "\n" + "b" * 100
    shown, _ = render_content(content)
    assert shown == "a" * 1010


def test_white_space_after_position_1024_does_not_count():
    content = "a" * 1025 + " tail"
    shown, excerpt = render_content(content)
    assert shown == "a" * 1024  # no usable white space: the first 1024 characters
    assert excerpt == (1030, 1024)


def test_no_white_space_first_1024_characters():
    content = "x" * 3000
    shown, excerpt = render_content(content)
    assert shown == "x" * 1024
    assert excerpt == (3000, 1024)


def test_excerpt_counts_characters():
    content = "é" * 600 + " " + "ü" * 600
    shown, excerpt = render_content(content)
    assert shown == "é" * 600
    assert excerpt == (1201, 600)


def test_1025_characters_is_shortened_and_reported():
    content = "abc " * 256 + "d"  # 1025 characters, index 1023 is a space
    shown, excerpt = render_content(content)
    assert shown == ("abc " * 256).rstrip()
    assert excerpt == (1025, 1023)


# --------------------------------------------------------------------------- page budgets


def test_page_takes_at_most_max_items():
    assert page_count([10] * 20, 0, 5, 12 * 1024) == 5
    assert page_count([10] * 20, 18, 5, 12 * 1024) == 2
    assert page_count([10] * 20, 20, 5, 12 * 1024) == 0
    assert page_count([10] * 3, 0, 10, 12 * 1024) == 3


def test_page_ends_before_first_item_exceeding_budget():
    # 5000 + 5000 = 10000 fits 12288; the next 5000 would exceed it
    assert page_count([5000, 5000, 5000, 1], 0, 10, 12 * 1024) == 2
    # the list ends before that item even though a later, smaller one would fit
    assert page_count([6000, 7000, 10], 0, 10, 12 * 1024) == 1


def test_page_budget_is_inclusive():
    assert page_count([6144, 6144, 1], 0, 10, 12 * 1024) == 2  # exactly 12288 bytes fits


def test_oversized_record_is_delivered_whole_when_list_is_empty():
    assert page_count([20000, 10], 0, 5, 12 * 1024) == 1
    assert page_count([100, 20000], 1, 5, 12 * 1024) == 1
    assert page_count([100, 20000], 0, 5, 12 * 1024) == 1  # not after another item


def test_procedure_page_uses_its_own_budget_and_limit():
    assert page_count([10_000, 10_000, 5_000, 10], 0, 3, 24 * 1024) == 2  # 25000 > 24576
    assert page_count([10_000, 10_000, 4_576, 10], 0, 3, 24 * 1024) == 3  # exactly 24576
    assert page_count([100] * 9, 0, 3, 24 * 1024) == 3


def test_procedure_texts_for_size():
    assert procedure_texts("g", "s", ["1", "2"], ["c"]) == ["g", "s", "1", "2", "c"]


# --------------------------------------------------------------------------- AccessibleField


def test_remaining_kinds_sorted_with_procedure_and_tokens():
    r = remaining(["fact", "open_question", "fact", "lesson"], [10, 10, 10, 10], [5])
    assert r.extra_candidates == 5
    assert r.kinds == ["fact", "lesson", "open_question", "procedure"]
    assert r.approx_extra_tokens == 12  # ceil(45 / 4)


def test_remaining_without_procedures():
    r = remaining(["warning", "decision"], [4, 4], [])
    assert r.extra_candidates == 2
    assert r.kinds == ["decision", "warning"]
    assert r.approx_extra_tokens == 2


def test_remaining_sorting_is_by_code_point():
    r = remaining(["task", "preference"], [1], [1])
    assert r.kinds == ["preference", "procedure", "task"]


def test_remaining_only_procedures():
    r = remaining([], [], [3, 3])
    assert (r.extra_candidates, r.kinds, r.approx_extra_tokens) == (2, ["procedure"], 2)
