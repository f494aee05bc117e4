"""Time in retrieval: the words of the date a memory occurred on, and the dates a cue names.

A memory remembered with `occurred_at` is findable by the words of that date (its month's name
and its year) and, when a cue names a day, a month or a year, memories that occurred then are
preferred, and so are memories that *tell of* that time: a claim remembered on 5 December saying
"I went to the meeting yesterday" is about 4 December, one saying "last month" about November
(`told_of`). Everything is read from the calendar date in UTC and the memory's own words; nothing
depends on the clock, so the same cue against the same store ranks the same (behaviour §12.2 L7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache

MONTHS = (
    "january",
    "february",
    "march",
    "april",
    "may",
    "june",
    "july",
    "august",
    "september",
    "october",
    "november",
    "december",
)
_MONTH_NUMBER = {m: i + 1 for i, m in enumerate(MONTHS)}
_MONTH_NUMBER.update({m[:3]: i + 1 for i, m in enumerate(MONTHS)})
_MONTH_NUMBER["sept"] = 9
_MONTH = r"(?P<month>" + "|".join(sorted(_MONTH_NUMBER, key=len, reverse=True)) + r")\.?"
_YEAR = r"(?P<year>(?:19|20)\d\d)"
_DAY = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"

# Most specific first: a span claimed by one pattern is not read again by a later one.
_PATTERNS = [
    re.compile(r"\b(?P<year>(?:19|20)\d\d)-(?P<mnum>[01]\d)-(?P<day>[0-3]\d)\b"),
    re.compile(rf"\b{_DAY}\s+(?:of\s+)?{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH}\s+{_DAY},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_MONTH},?\s+{_YEAR}\b", re.IGNORECASE),
    re.compile(rf"\b{_YEAR}\b"),
    # A month alone, in any year. `may` and the three-letter forms are ordinary words too, so
    # alone they name a month only when capitalised ("in May", not "it may fail").
    re.compile(r"\b(?P<month>" + "|".join(m for m in MONTHS if m != "may") + r")\b", re.IGNORECASE),
    re.compile(r"\b(?P<month>May|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)\b"),
]


def occurred_on(occurred_at: datetime | None) -> str | None:
    """The calendar date (UTC) a memory occurred on, as stored: `YYYY-MM-DD`."""
    if occurred_at is None:
        return None
    return occurred_at.astimezone(UTC).date().isoformat()


@lru_cache(maxsize=4096)
def date_words(day: str | None) -> str:
    """The searchable words of an occurrence date: its month's name and its year (`may 2023`)."""
    if not day:
        return ""
    return f"{MONTHS[int(day[5:7]) - 1]} {day[:4]}"


@dataclass(frozen=True)
class Period:
    """A day, a month of a year, a year, or a month of any year (unset parts match anything)."""

    year: int | None = None
    month: int | None = None
    day: int | None = None

    def contains(self, day: str) -> bool:
        return (
            (self.year is None or int(day[:4]) == self.year)
            and (self.month is None or int(day[5:7]) == self.month)
            and (self.day is None or int(day[8:10]) == self.day)
        )

    def meets(self, span: Span) -> bool:
        """Whether some day of the span (first and last day included) lies in this period."""
        first, last = span
        if self.day is None:  # a month or a year: the span's months are few
            y, m = first.year, first.month
            while (y, m) <= (last.year, last.month):
                if (self.year is None or y == self.year) and (self.month is None or m == self.month):
                    return True
                y, m = (y + 1, 1) if m == 12 else (y, m + 1)
            return False
        for year in range(first.year, last.year + 1) if self.year is None else (self.year,):
            for month in range(1, 13) if self.month is None else (self.month,):
                try:
                    day = date(year, month, self.day)
                except ValueError:  # 31 April
                    continue
                if first <= day <= last:
                    return True
        return False


@lru_cache(maxsize=1024)
def named_periods(text: str) -> tuple[Period, ...]:
    """The days, months and years a cue names, in order of appearance."""
    found: list[tuple[int, Period]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for m in pattern.finditer(text):
            if any(m.start() < end and start < m.end() for start, end in taken):
                continue
            parts = m.groupdict()
            month = (
                int(parts["mnum"])
                if parts.get("mnum")
                else (_MONTH_NUMBER[parts["month"].lower()] if parts.get("month") else None)
            )
            day = int(parts["day"]) if parts.get("day") else None
            if day is not None and not 1 <= day <= 31 or month is not None and not 1 <= month <= 12:
                continue
            taken.append((m.start(), m.end()))
            found.append((m.start(), Period(int(parts["year"]) if parts.get("year") else None, month, day)))
    return tuple(p for _, p in sorted(found, key=lambda x: x[0]))


# A memory that occurred in a period the cue names gains this share of what it lacks of full
# relevance: it moves ahead of equally matching memories of other dates but does not overtake a
# clearly better match, and it is never admitted for its date alone.
DATE_PREFERENCE = 0.25


def prefer_named_dates(relevance: float, periods: tuple[Period, ...], day: str | None, content: str = "") -> float:
    """Relevance raised for a memory that occurred in a period the cue names, or tells of one
    (`told_of`: "yesterday", "last month" in a memory that occurred the day after, the month after)."""
    if not periods or not day or relevance <= 0:
        return relevance
    if not any(p.contains(day) for p in periods) and not any(
        p.meets(span) for span in told_of(content, day) for p in periods
    ):
        return relevance
    return relevance + DATE_PREFERENCE * (1 - relevance)


Span = tuple[date, date]
"""First and last day of a stretch of time, both included."""

# Expressions of time relative to when a claim was made, each read against the memory's own
# occurrence date (what "yesterday" meant when it was said). Only expressions that name a definite
# stretch: "recently" or "the other day" could be any time, and "today" is the occurrence date.
_COUNTS = {"a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "couple of": 2}
_NUMBER = r"(?P<n>\d{1,2}|a|an|one|two|three|four|five|six|a couple of|couple of|a few|few)"
_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
# Two expressions, each run only on a text holding a word that every match of it holds: most
# claims hold none ("last" is also in "blast"), and looking for the words (in C) costs a tenth of
# running an expression.
_TOLD_NAMED = re.compile(
    r"\b(?:(?P<before_yesterday>the day before yesterday)"
    r"|(?P<yesterday>yesterday|last night)"
    r"|(?P<tomorrow>tomorrow)"
    r"|(?P<way>last|past|previous|next|coming)\s+(?P<what>weekend|week|month|year|" + "|".join(_WEEKDAYS) + r"))\b"
)
_TOLD_NAMED_ANCHORS = ("yesterday", "tomorrow", "last", "past", "previous", "next", "coming")
_TOLD_AGO = re.compile(rf"\b{_NUMBER}\s+(?P<unit>day|week|month|year)s?\s+ago\b")


def _month_span(year: int, month: int) -> Span:
    first = date(year, month, 1)
    after = date(year + 1, 1, 1) if month == 12 else date(year, month + 1, 1)
    return first, after - timedelta(days=1)


def _months_before(day: date, count: int) -> Span:
    index = day.year * 12 + day.month - 1 - count
    return _month_span(index // 12, index % 12 + 1)


@lru_cache(maxsize=16384)
def told_of(content: str, day: str) -> tuple[Span, ...]:
    """The stretches of time a memory that occurred on `day` (`YYYY-MM-DD`) tells of by words
    relative to that day: "yesterday" and "last night" the day before, "tomorrow" the day after,
    "last week" the seven days before, "next week" the seven after, "last weekend" the eight days
    before (a weekend within them), "last month" and "last year" the calendar month and year
    before (and "next" the ones after), "the past month" the thirty days before, "last Friday"
    the Friday before, "three days (weeks, months, years) ago" that day (with a few days either
    side for weeks; the calendar month, the year), "a few weeks ago" two to five of them. A time
    outside the calendar (before year 1, after 9999) is left out."""
    text = content.lower()
    found = list(_TOLD_AGO.finditer(text)) if " ago" in text else []
    if any(anchor in text for anchor in _TOLD_NAMED_ANCHORS):
        found += _TOLD_NAMED.finditer(text)
    if not found:
        return ()
    said = date.fromisoformat(day)
    spans = []
    for m in sorted(found, key=lambda m: m.start()):
        try:
            spans.append(_ago(said, m["n"], m["unit"]) if m.re is _TOLD_AGO else _named(said, m))
        except (ValueError, OverflowError):  # before year 1 or after 9999: no such time
            continue
    return tuple(spans)


def _ago(said: date, count: str, unit: str) -> Span:
    """ "three weeks ago", "a few days ago"."""
    n = count.removeprefix("a ").strip()
    low, high = (2, 5) if n == "few" else (int(n), int(n)) if n.isdigit() else (_COUNTS[n],) * 2
    if unit == "day":
        return said - timedelta(days=high), said - timedelta(days=low)
    if unit == "week":
        return said - timedelta(days=7 * high + 3), said - timedelta(days=max(1, 7 * low - 3))
    if unit == "month":
        return _months_before(said, high)[0], _months_before(said, low)[1]
    return date(said.year - high, 1, 1), date(said.year - low, 12, 31)


def _named(said: date, m: re.Match[str]) -> Span:
    """ "yesterday", "last week", "next Friday"."""
    if m["yesterday"]:
        return (said - timedelta(days=1),) * 2
    if m["before_yesterday"]:
        return (said - timedelta(days=2),) * 2
    if m["tomorrow"]:
        return (said + timedelta(days=1),) * 2
    way, what = m["way"], m["what"]
    ahead = way in ("next", "coming")
    if what in _WEEKDAYS:
        weekday = _WEEKDAYS.index(what)
        if ahead:
            return (said + timedelta(days=(weekday - said.weekday()) % 7 or 7),) * 2
        return (said - timedelta(days=(said.weekday() - weekday) % 7 or 7),) * 2
    if way == "past" and what != "weekend":  # the past month: the thirty days before
        days = {"week": 7, "month": 30, "year": 365}[what]
        return said - timedelta(days=days), said - timedelta(days=1)
    if what in ("week", "weekend"):
        days = 7 if what == "week" else 8
        if ahead:
            return said + timedelta(days=1), said + timedelta(days=days)
        return said - timedelta(days=days), said - timedelta(days=1)
    if what == "month":
        return _months_before(said, -1 if ahead else 1)
    year = said.year + (1 if ahead else -1)
    return date(year, 1, 1), date(year, 12, 31)
