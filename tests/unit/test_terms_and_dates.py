"""Retrieval terms (stems without stop words) and time in retrieval (domain.terms, domain.dates)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from slowave.domain.dates import Period, date_words, named_periods, occurred_on, prefer_named_dates
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
