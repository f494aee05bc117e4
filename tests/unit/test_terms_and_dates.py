"""Retrieval terms (stems without stop words) and time in retrieval (domain.terms, domain.dates)."""

from __future__ import annotations

from datetime import date, datetime, timedelta, timezone

import pytest

from slowave.domain.dates import Period, date_words, named_periods, occurred_on, prefer_named_dates, told_of
from slowave.domain.terms import IRREGULAR_STEMS, STOP_WORDS, regular, stem_words, terms


def test_other_word_forms_are_one_term():
    assert set(terms("pinning policies")) == set(terms("pins policy")) == {"pin", "polici"}
    assert terms("The workers deployed") == terms("worker deploys")


def test_irregular_forms_are_their_bases_term():
    assert terms("built bought went children people taught") == terms("build buy go child person teach")
    assert terms("It was built") == terms("they build it") == ["build"]
    # Stems, not words, are mapped, so the stored terms can be mapped on their own; once is enough.
    assert regular(regular(list(IRREGULAR_STEMS))) == regular(list(IRREGULAR_STEMS))
    assert not set(IRREGULAR_STEMS) & STOP_WORDS
    # Claim shapes (near_duplicates) read the same terms.
    assert stem_words(["built", "bought"]) == ["build", "buy"]
    # Forms that as often mean something else are left alone.
    assert terms("a bit of ground cover") == ["bit", "ground", "cover"]


def test_question_and_function_words_are_no_terms():
    assert terms("What did they do when it was there?") == []
    assert terms("Which Python version do the workers use?") == ["python", "version", "worker", "use"]
    assert {"what", "when", "did", "which", "the"} <= STOP_WORDS


def test_digits_accents_and_case_are_kept_apart_from_stop_words():
    assert terms("Python 3.11 on Zürich-1") == ["python", "3", "11", "zurich", "1"]
    assert terms("") == []


def test_repeats_are_kept_for_term_frequency():
    assert terms("deploy, deploy, deploy") == ["deploy"] * 3


def test_occurred_on_is_the_utc_calendar_date():
    late = datetime(2023, 5, 8, 23, 30, tzinfo=timezone(timedelta(hours=-3)))
    assert occurred_on(late) == "2023-05-09"
    assert occurred_on(None) is None
    assert date_words("2023-05-09") == "may 2023" and date_words(None) == ""


@pytest.mark.parametrize(
    "text, periods",
    [
        ("What happened on 2023-05-08?", (Period(2023, 5, 8),)),
        ("What did we decide on 8 May, 2023?", (Period(2023, 5, 8),)),
        ("and on May 8th 2023", (Period(2023, 5, 8),)),
        ("the June 2024 outage", (Period(2024, 6),)),
        ("releases of 2022", (Period(2022),)),
        ("What broke in March?", (Period(None, 3),)),
        ("What did Ana do in May?", (Period(None, 5),)),
        ("It may fail", ()),  # the modal verb is no month
        ("port 8080 and version 3.12", ()),
        ("between January 2023 and 2024", (Period(2023, 1), Period(2024))),
    ],
)
def test_dates_a_cue_names(text, periods):
    assert named_periods(text) == periods


def test_a_named_date_prefers_memories_that_occurred_then():
    may = named_periods("What happened in May 2023?")
    assert prefer_named_dates(0.5, may, "2023-05-20") > 0.5
    assert prefer_named_dates(0.5, may, "2023-06-01") == 0.5
    assert prefer_named_dates(0.5, may, None) == 0.5
    assert prefer_named_dates(0.0, may, "2023-05-20") == 0.0  # never found for the date alone
    assert prefer_named_dates(1.0, may, "2023-05-20") == 1.0  # stays within [0, 1]
    assert prefer_named_dates(0.5, (), "2023-05-20") == 0.5


@pytest.mark.parametrize(
    ("content", "day", "spans"),
    [
        ("Yesterday I went bowling.", "2022-03-17", [("2022-03-16", "2022-03-16")]),
        ("We had dinner last night.", "2023-05-04", [("2023-05-03", "2023-05-03")]),
        ("The day before yesterday it rained.", "2023-05-04", [("2023-05-02", "2023-05-02")]),
        ("The deploy is tomorrow.", "2023-12-31", [("2024-01-01", "2024-01-01")]),
        ("We went to a convention last month.", "2023-01-10", [("2022-12-01", "2022-12-31")]),
        ("Next month we move.", "2023-12-10", [("2024-01-01", "2024-01-31")]),
        ("Last year I visited Italy.", "2022-06-01", [("2021-01-01", "2021-12-31")]),
        ("Last week was wild.", "2023-11-16", [("2023-11-09", "2023-11-15")]),
        ("Last weekend we hiked.", "2023-06-05", [("2023-05-28", "2023-06-04")]),
        ("I shipped it last Friday.", "2023-12-05", [("2023-12-01", "2023-12-01")]),  # a Tuesday
        ("I shipped it last Friday.", "2023-12-01", [("2023-11-24", "2023-11-24")]),  # a Friday
        ("See you next Monday.", "2023-12-05", [("2023-12-11", "2023-12-11")]),
        ("It broke 3 days ago.", "2023-12-05", [("2023-12-02", "2023-12-02")]),
        ("Two months ago we migrated.", "2023-02-15", [("2022-12-01", "2022-12-31")]),
        ("A couple of weeks ago we met.", "2023-12-15", [("2023-11-28", "2023-12-04")]),
        ("Over the past month it got slower.", "2023-12-05", [("2023-11-05", "2023-12-04")]),
        (
            "It rained yesterday and last week.",
            "2023-12-05",
            [("2023-12-04", "2023-12-04"), ("2023-11-28", "2023-12-04")],
        ),
        ("The pipeline is fast.", "2023-12-05", []),
        ("We met recently, the other day.", "2023-12-05", []),  # no definite stretch
    ],
)
def test_told_of_reads_relative_time_against_the_occurrence_date(content, day, spans):
    expected = tuple((date.fromisoformat(a), date.fromisoformat(b)) for a, b in spans)
    assert told_of(content, day) == expected


def test_a_memory_telling_of_a_named_period_is_preferred():
    day = named_periods("What was Sam doing on December 4, 2023?")
    assert prefer_named_dates(0.5, day, "2023-12-05", "I went to a meeting yesterday.") > 0.5
    assert prefer_named_dates(0.5, day, "2023-12-05", "I went to a meeting.") == 0.5
    march = named_periods("What did John attend in March 2023?")
    assert prefer_named_dates(0.5, march, "2023-04-03", "A convention last month.") > 0.5
    assert prefer_named_dates(0.5, march, "2023-05-03", "A convention last month.") == 0.5
    any_march = named_periods("What did John attend in March?")
    assert prefer_named_dates(0.5, any_march, "2023-04-03", "A convention last week.") > 0.5  # Mar 27 – Apr 2
    assert prefer_named_dates(0.0, march, "2023-04-03", "A convention last month.") == 0.0  # never for time alone


@pytest.mark.parametrize(
    ("content", "day"),
    [("next year", "9999-06-01"), ("tomorrow", "9999-12-31"), ("last year", "0001-06-01"), ("yesterday", "0001-01-01")],
)
def test_told_of_leaves_out_a_time_outside_the_calendar(content, day):
    """A Timestamp may lie anywhere in years 1-9999: "tomorrow" of its last day is no date."""
    assert told_of(content + " and last week", day) == told_of("last week", day)
