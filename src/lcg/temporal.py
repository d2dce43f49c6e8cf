"""Time on both axes: which facts a read sees.

Valid time (`valid_at`/`invalid_at`) says when a fact was true in the world; system time
(`created_at`/`expired_at`) says when the graph believed it. A `TimeFilter` combines both:

- `as_of=T`: facts true in the world at T — `valid_at` absent or <= T, `invalid_at` absent or > T;
- `known_at=T`: facts the graph held at T — `created_at` <= T, `expired_at` absent or > T;
- neither, `include_invalidated=False` (the default): current facts — not expired, and not
  invalidated at or before now;
- `include_invalidated=True` lifts the "current" rule (and is implied by an explicit as_of or
  known_at, which ask about other instants).

Intervals are half-open: a fact invalidated at T is no longer true at T.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from lcg.models import Fact
from lcg.timeutil import now

__all__ = ["CURRENT", "TimeFilter"]


@dataclass(frozen=True)
class TimeFilter:
    """Which facts a read returns, on the valid-time and system-time axes."""

    as_of: datetime | None = None
    known_at: datetime | None = None
    include_invalidated: bool = False

    @property
    def is_current(self) -> bool:
        """True when only currently valid, unexpired facts are wanted (the default read)."""
        return self.as_of is None and self.known_at is None and not self.include_invalidated

    def admits(self, fact: Fact) -> bool:
        """Whether `fact` is visible under this filter."""
        if self.known_at is not None:
            if fact.created_at is not None and fact.created_at > self.known_at:
                return False
            if fact.expired_at is not None and fact.expired_at <= self.known_at:
                return False
        if self.as_of is not None:
            if fact.valid_at is not None and fact.valid_at > self.as_of:
                return False
            if fact.invalid_at is not None and fact.invalid_at <= self.as_of:
                return False
        if self.is_current:
            if fact.expired_at is not None:
                return False
            return fact.invalid_at is None or fact.invalid_at > now()
        return True


CURRENT = TimeFilter()
