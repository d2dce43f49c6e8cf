"""Relative dates resolve against the reference time, and vague spans resolve to nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lcg.extraction.relative_dates import resolve_relative

# A Wednesday.
REF = datetime(2025, 5, 14, 15, 30, tzinfo=UTC)


def _day(text: str, reference: datetime = REF) -> str | None:
    found = resolve_relative(text, reference)
    return None if found is None else found.date.date().isoformat()


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Yesterday Bruno moved to the risk team.", "2025-05-13"),
        ("It ships tomorrow.", "2025-05-15"),
        ("the day before yesterday", "2025-05-12"),
        ("Since last Friday the web team is led by Petra.", "2025-05-09"),
        ("We meet next Friday.", "2025-05-16"),
        ("last Wednesday", "2025-05-07"),
        ("this Monday", "2025-05-12"),
        ("She was promoted last month.", "2025-04-01"),
        ("The audit moves to next month.", "2025-06-01"),
        ("last week", "2025-05-05"),
        ("last year", "2024-01-01"),
        ("Two weeks ago the service migrated.", "2025-04-30"),
        ("3 days ago", "2025-05-11"),
        ("a month ago", "2025-04-14"),
        ("a couple of years ago", "2023-05-14"),
        ("In March Ines took over.", "2025-03-01"),
        ("In June we moved.", "2024-06-01"),
        ("We will launch in June.", "2025-06-01"),
        ("last June", "2024-06-01"),
        ("next March", "2026-03-01"),
        ("in two weeks", "2025-05-28"),
        ("I went there on Monday.", "2025-05-12"),
        ("I will go on Monday.", "2025-05-19"),
    ],
)
def test_relative_expressions_name_the_day_against_the_reference(text: str, expected: str) -> None:
    assert _day(text) == expected


@pytest.mark.parametrize(
    "text",
    ["recently", "a few weeks ago", "soon", "in March 2024", "on March 3, 2024", "no date", ""],
)
def test_vague_or_absolute_spans_are_not_relative_dates(text: str) -> None:
    assert resolve_relative(text, REF) is None


def test_the_span_is_reported_and_a_naive_reference_is_read_as_utc() -> None:
    found = resolve_relative("Moved here two days ago, I think.", datetime(2025, 1, 1))
    assert found is not None
    assert (found.text, found.date) == ("two days ago", datetime(2024, 12, 30, tzinfo=UTC))
    assert "Moved here two days ago, I think."[found.start : found.end] == "two days ago"


def test_a_month_end_clamps_when_shifting_by_months() -> None:
    assert _day("a month ago", datetime(2025, 3, 31, tzinfo=UTC)) == "2025-02-28"
