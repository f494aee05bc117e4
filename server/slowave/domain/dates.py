"""Time in retrieval: the words of the date a memory occurred on, and the dates a cue names.

A memory remembered with `occurred_at` is findable by the words of that date (its month's name
and its year) and, when a cue names a day, a month or a year, memories that occurred then are
preferred. Both are read from the calendar date in UTC; nothing depends on the clock, so the same
cue against the same store ranks the same (behaviour §12.2 L7).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
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


def prefer_named_dates(relevance: float, periods: tuple[Period, ...], day: str | None) -> float:
    if not periods or not day or relevance <= 0 or not any(p.contains(day) for p in periods):
        return relevance
    return relevance + DATE_PREFERENCE * (1 - relevance)
