"""Timestamps: parsing inputs, the three wire formats, and the naive-UTC form Kuzu stores.

Kuzu's TIMESTAMP ignores a datetime's zone (a +02:00 value is stored as its wall time), so every
datetime crosses into storage as naive UTC, and every datetime inside lcg is aware UTC.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

# The months' English names, January first: `MONTHS.index(name) + 1` is the month's number.
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
_DATE_ONLY = re.compile(r"\d{4}-\d{2}-\d{2}")
_DB_FORMAT = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,6})?")
_RFC3339 = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")


def now() -> datetime:
    """The current time, aware UTC, truncated to microseconds."""
    return datetime.now(UTC)


def parse_timestamp(value: str) -> datetime:
    """Parse RFC 3339 (any offset) or the DB read format `YYYY-MM-DD HH:MM:SS` (UTC).

    Raises:
        ValueError: the string is neither.
    """
    text = value.strip()
    if _DB_FORMAT.fullmatch(text):
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    if not _RFC3339.fullmatch(text):
        raise ValueError(f"not an RFC 3339 timestamp: {value!r}")
    text = text.replace("z", "Z").replace("t", "T")
    frac = re.search(r"\.(\d+)", text)
    if frac and len(frac.group(1)) > 6:  # fromisoformat takes at most microseconds
        text = text.replace(frac.group(0), "." + frac.group(1)[:6])
    parsed = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return parsed.astimezone(UTC)


def parse_wire_timestamp(value: str) -> datetime:
    """A timestamp as a client sends one: `parse_timestamp`'s forms, or a bare date `YYYY-MM-DD`
    meaning its midnight UTC (what a person means typing `since: 2025-05-01`). Stored formats
    (the WAL's) stay strict: they go through `parse_timestamp`/`from_wal`.

    Raises:
        ValueError: the string is none of these, or names an impossible date.
    """
    text = value.strip()
    if _DATE_ONLY.fullmatch(text):
        return datetime.fromisoformat(text).replace(tzinfo=UTC)
    return parse_timestamp(text)


def to_wal(value: datetime | None) -> str | None:
    """RFC 3339 with a fixed six-digit fraction, as the WAL stores timestamps."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def from_wal(value: str | None) -> datetime | None:
    """Inverse of `to_wal` (accepts any RFC 3339 text).

    The WAL's own fixed format takes a fast path: replay parses tens of thousands of these.
    """
    if value is None:
        return None
    if len(value) == 32 and value.endswith("+00:00") and value[10] == "T":
        try:
            return datetime.fromisoformat(value)
        except ValueError:
            pass
    return parse_timestamp(value)


def to_db(value: datetime | None) -> datetime | None:
    """Naive UTC, the only form Kuzu stores faithfully."""
    if value is None:
        return None
    return value.astimezone(UTC).replace(tzinfo=None)


def from_db(value: datetime | None) -> datetime | None:
    """A naive-UTC value read from Kuzu, made aware."""
    if value is None:
        return None
    return value.replace(tzinfo=UTC)


def to_read_format(value: datetime | None) -> str | None:
    """The reference's DB read format `YYYY-MM-DD HH:MM:SS` (UTC, no zone, no fraction)."""
    if value is None:
        return None
    if value.tzinfo is not UTC:
        value = value.astimezone(UTC)
    # isoformat is several times faster than strftime, and reads return thousands of these.
    return value.isoformat(" ", "seconds")[:19]


def to_iso_z(value: datetime) -> str:
    """`YYYY-MM-DDTHH:MM:SSZ` (whole seconds, UTC)."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
