"""lcg.timeutil: parsing inputs, the wire formats, and the naive-UTC form Kuzu stores."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lcg.timeutil import (
    from_db,
    from_wal,
    now,
    parse_timestamp,
    parse_wire_timestamp,
    to_db,
    to_iso_z,
    to_read_format,
    to_wal,
)

MOON = datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1969-07-20T20:17:40Z", MOON),
        ("1969-07-20t20:17:40z", MOON),
        ("1969-07-20 20:17:40Z", MOON),
        ("1969-07-20T20:17:40+00:00", MOON),
        ("1969-07-20T22:17:40+02:00", MOON),
        ("1969-07-20T15:17:40-05:00", MOON),
        ("1969-07-21T01:47:40+05:30", MOON),
        ("1969-07-20 20:17:40", MOON),  # the DB read format is UTC
        ("  1969-07-20T20:17:40Z  ", MOON),
        ("1969-07-20T20:17:40.5Z", MOON.replace(microsecond=500_000)),
        ("1969-07-20T20:17:40.123456Z", MOON.replace(microsecond=123_456)),
        ("1969-07-20T20:17:40.123456789Z", MOON.replace(microsecond=123_456)),
        ("1969-07-20 20:17:40.25", MOON.replace(microsecond=250_000)),
    ],
)
def test_parse_timestamp_accepts_rfc3339_and_the_db_read_format(
    text: str, expected: datetime
) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected
    assert parsed.tzinfo is UTC


@pytest.mark.parametrize(
    "text",
    [
        "",
        "yesterday",
        "1969-07-20",
        "1969-07-20T20:17:40",  # RFC 3339 needs a zone
        "1969-07-20T20:17Z",
        "1969-13-20T20:17:40Z",
        "1969-07-32T20:17:40Z",
        "1969-07-20T24:17:40Z",
        "1969-07-20T20:17:60Z",
        "1969-07-20T20:17:40+2:00",
        "1969-07-20T20:17:40.Z",
        "20:17:40",
        "1969-07-20 20:17:40.1234567",  # the DB format has at most microseconds
    ],
)
def test_parse_timestamp_rejects_everything_else(text: str) -> None:
    with pytest.raises(ValueError):
        parse_timestamp(text)


def test_to_wal_writes_six_fraction_digits_and_a_literal_utc_offset() -> None:
    assert to_wal(MOON) == "1969-07-20T20:17:40.000000+00:00"
    paris = datetime(2024, 1, 1, 2, 0, 0, 42, tzinfo=timezone(timedelta(hours=2)))
    assert to_wal(paris) == "2024-01-01T00:00:00.000042+00:00"
    assert to_wal(None) is None


@pytest.mark.parametrize(
    "value",
    [MOON, MOON.replace(microsecond=1), datetime(2024, 2, 29, 23, 59, 59, 999_999, tzinfo=UTC)],
)
def test_wal_timestamps_round_trip(value: datetime) -> None:
    text = to_wal(value)
    assert text is not None
    back = from_wal(text)
    assert back == value
    assert back is not None and back.utcoffset() == timedelta(0)


def test_from_wal_accepts_any_rfc3339_text_and_none() -> None:
    assert from_wal("1969-07-20T22:17:40+02:00") == MOON
    assert from_wal("1969-07-20T20:17:40Z") == MOON
    assert from_wal(None) is None
    with pytest.raises(ValueError):
        from_wal("not a time")


def test_to_db_gives_naive_utc_and_from_db_makes_it_aware_again() -> None:
    paris = datetime(1969, 7, 20, 22, 17, 40, tzinfo=timezone(timedelta(hours=2)))
    stored = to_db(paris)
    assert stored == datetime(1969, 7, 20, 20, 17, 40)
    assert stored is not None and stored.tzinfo is None
    restored = from_db(stored)
    assert restored == MOON
    assert restored is not None and restored.tzinfo is UTC
    assert to_db(None) is None
    assert from_db(None) is None


def test_to_read_format_drops_the_zone_and_the_fraction() -> None:
    assert to_read_format(MOON.replace(microsecond=999_999)) == "1969-07-20 20:17:40"
    assert to_read_format(
        datetime(1969, 7, 20, 22, 17, 40, tzinfo=timezone(timedelta(hours=2)))
    ) == ("1969-07-20 20:17:40")
    assert to_read_format(None) is None


def test_the_read_format_parses_back_to_the_same_second() -> None:
    text = to_read_format(MOON)
    assert text is not None
    assert parse_timestamp(text) == MOON


def test_to_iso_z_ends_in_z() -> None:
    assert to_iso_z(MOON.replace(microsecond=7)) == "1969-07-20T20:17:40Z"


def test_now_is_aware_utc() -> None:
    before = datetime.now(UTC)
    value = now()
    assert value.tzinfo is UTC
    assert before <= value <= datetime.now(UTC)


def test_a_wire_timestamp_may_be_a_bare_date_meaning_its_midnight_utc() -> None:
    # `since: "2025-05-01"` is how a person types a time.
    assert parse_wire_timestamp("1969-07-20") == datetime(1969, 7, 20, tzinfo=UTC)
    assert parse_wire_timestamp(" 2025-05-01 ") == datetime(2025, 5, 1, tzinfo=UTC)
    assert parse_wire_timestamp("1969-07-20T20:17:40Z") == MOON
    for bad in ("1969-02-30", "20/07/1969", "yesterday"):
        with pytest.raises(ValueError):
            parse_wire_timestamp(bad)
