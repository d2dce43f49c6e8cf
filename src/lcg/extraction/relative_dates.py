"""Relative dates against a reference time: "yesterday", "last Friday", "in March", "next month".

Pure and small: `resolve_relative(text, reference)` finds the first relative date expression in
`text` and returns it with the day it names (midnight UTC), or None. What each form means:

- `today`, `yesterday`, `tomorrow`, `the day before yesterday`;
- `N days/weeks/months/years ago` (N a digit or a word up to twelve, "a", "an", "a couple of"),
  `in N days/weeks/months` (future);
- `last/next/this <weekday>`: the nearest such day strictly before (`last`) or after (`next`)
  the reference; `this` the one of the reference's week (Monday first); a bare `on <weekday>`
  is the nearest one before the reference, or after it in a future-tense sentence
  ("will", "going to", "plan", "scheduled");
- `last/next/this week`: the Monday of that week; `... month`: its first day; `... year`:
  January 1;
- `in <month>` / `last <month>` / `next <month>` without a year: the first day of the nearest
  such month at or before the reference month (`in`, past tense), strictly before (`last`), or
  after (`next`, or `in` in a future-tense sentence). A month followed by a day or a year is an
  absolute date and is left to the absolute parser.

Vague spans ("recently", "a few weeks ago", "soon") resolve to nothing: a wrong date is worse
than the episode's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from lcg.timeutil import MONTHS

__all__ = ["RelativeDate", "resolve_relative"]

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_MONTHS = MONTHS
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "a couple of": 2,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "eleven": 11,
    "twelve": 12,
}
_COUNT = (
    r"(?P<n>\d{1,3}|a couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
)
_UNIT = r"(?P<unit>day|week|month|year)s?"
_WEEKDAY = "|".join(_WEEKDAYS)
_MONTH = "|".join(_MONTHS)
_PATTERN = re.compile(
    r"\b(?:"
    r"(?P<dby>the\s+day\s+before\s+yesterday)"
    r"|(?P<day>today|yesterday|tomorrow)"
    rf"|{_COUNT}\s+{_UNIT}\s+(?P<ago>ago|later|from\s+now)"
    rf"|in\s+(?P<n2>\d{{1,3}}|a couple of|an?|one|two|three|four|five|six|seven|eight|nine|ten|"
    rf"eleven|twelve)\s+(?P<unit2>day|week|month|year)s?\b"
    rf"|(?P<which>last|next|this|coming|past)\s+(?P<span>week|month|year|{_WEEKDAY}|{_MONTH})"
    rf"|on\s+(?P<weekday>{_WEEKDAY})"
    rf"|(?:in|during|since|by|until)\s+(?P<month>{_MONTH})"
    r")\b(?!\s*(?:\d|,\s*\d))",
    re.IGNORECASE,
)
_FUTURE = re.compile(
    r"\b(?:will|won't|going to|gonna|plan(?:s|ning)?\s+to|scheduled|upcoming|shall)\b",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RelativeDate:
    """A relative date expression found in a text: where it is and the day it names."""

    start: int
    end: int
    text: str
    date: datetime  # midnight UTC


def _midnight(when: datetime) -> datetime:
    if when.tzinfo is not None:
        when = when.astimezone(UTC)
    return datetime(when.year, when.month, when.day, tzinfo=UTC)


def _add_months(day: datetime, months: int) -> datetime:
    index = day.year * 12 + (day.month - 1) + months
    return datetime(index // 12, index % 12 + 1, 1, tzinfo=UTC)


def _shift(day: datetime, n: int, unit: str) -> datetime:
    unit = unit.casefold()
    if unit == "day":
        return day + timedelta(days=n)
    if unit == "week":
        return day + timedelta(weeks=n)
    if unit == "month":
        first = _add_months(day, n)
        # The same day of that month, clamped to its length.
        following = _add_months(first, 1)
        return first + timedelta(days=min(day.day, (following - first).days) - 1)
    year = day.year + n
    try:
        return day.replace(year=year)
    except ValueError:  # February 29 in a year without one
        return day.replace(year=year, day=28)


def _count(text: str) -> int:
    key = " ".join(text.casefold().split())
    return int(key) if key.isdigit() else _NUMBERS[key]


def _resolve(m: re.Match[str], day: datetime, future: bool) -> datetime | None:
    if m.group("dby"):
        return day - timedelta(days=2)
    if word := m.group("day"):
        return day + timedelta(days={"today": 0, "yesterday": -1, "tomorrow": 1}[word.casefold()])
    if m.group("ago"):
        n = _count(m.group("n"))
        sign = -1 if m.group("ago").casefold() == "ago" else 1
        return _shift(day, sign * n, m.group("unit"))
    if m.group("unit2"):
        return _shift(day, _count(m.group("n2")), m.group("unit2"))
    if which := m.group("which"):
        which, span = which.casefold(), m.group("span").casefold()
        step = {"last": -1, "past": -1, "next": 1, "coming": 1, "this": 0}[which]
        if span == "week":
            monday = day - timedelta(days=day.weekday())
            return monday + timedelta(weeks=step)
        if span == "month":
            return _add_months(day, step) if step else _add_months(day, 0)
        if span == "year":
            return datetime(day.year + step, 1, 1, tzinfo=UTC)
        if span in _WEEKDAYS:
            target = _WEEKDAYS.index(span)
            if step == 0:
                return day - timedelta(days=day.weekday()) + timedelta(days=target)
            if step < 0:
                back = (day.weekday() - target) % 7 or 7
                return day - timedelta(days=back)
            ahead = (target - day.weekday()) % 7 or 7
            return day + timedelta(days=ahead)
        month = _MONTHS.index(span) + 1
        if step == 0:
            return datetime(day.year, month, 1, tzinfo=UTC)
        if step < 0:
            year = day.year if month < day.month else day.year - 1
        else:
            year = day.year if month > day.month else day.year + 1
        return datetime(year, month, 1, tzinfo=UTC)
    if weekday := m.group("weekday"):
        target = _WEEKDAYS.index(weekday.casefold())
        if future:
            return day + timedelta(days=(target - day.weekday()) % 7 or 7)
        return day - timedelta(days=(day.weekday() - target) % 7 or 7)
    if month_name := m.group("month"):
        month = _MONTHS.index(month_name.casefold()) + 1
        if future:
            year = day.year if month >= day.month else day.year + 1
        else:
            year = day.year if month <= day.month else day.year - 1
        return datetime(year, month, 1, tzinfo=UTC)
    return None


def resolve_relative(text: str, reference: datetime) -> RelativeDate | None:
    """The first relative date `text` names, resolved against `reference`, or None.

    Args:
        text: a sentence (or any text).
        reference: the time the text was written (an episode's reference time); naive
            datetimes are read as UTC.

    Returns:
        The expression's span and text, and the day it names at midnight UTC.
    """
    day = _midnight(reference if reference.tzinfo else reference.replace(tzinfo=UTC))
    future = bool(_FUTURE.search(text))
    for m in _PATTERN.finditer(text):
        resolved = _resolve(m, day, future)
        if resolved is not None:
            return RelativeDate(m.start(), m.end(), m.group(0), resolved)
    return None
