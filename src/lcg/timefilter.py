"""Time on both axes: which facts a read sees.

Valid time (`valid_at`/`invalid_at`) says when a fact was true in the world; system time
(`created_at`/`expired_at`) says when the graph believed it. A fact is one row, so its history
of beliefs is read from the row this way:

- before `created_at` the graph did not know the fact;
- from `created_at` to `expired_at` it held the fact as open-ended (supersession sets
  `invalid_at` and `expired_at` together, see `Engine.commit_episode`), or with the
  `invalid_at` it was created with when it was never retired;
- from `expired_at` on it holds a fact retired *with* an `invalid_at` as history (superseded:
  true from `valid_at` until `invalid_at`); a fact retired *without* one (withdrawn) is no longer
  held.

A `TimeFilter` asks at two instants:

- `known_at=T` (system time, default now): facts the graph held at T, as it held them;
- `as_of=T` (valid time): of those, the facts true in the world at T — `valid_at` absent or
  <= T, end of validity (as held) absent or > T;
- neither `as_of` nor `include_invalidated` (the default): the facts current at `known_at`
  (or now) — held then and not ended by then;
- `include_invalidated=True` lifts the "current" rule: without `as_of`, every fact held at
  `known_at` whatever its validity; without `known_at` either, every fact (withdrawn too).

Intervals are half-open: a fact invalidated at T is no longer true at T; a fact created at T is
known at T; a fact retired at T is held as history (or not at all) from T. The same rule has
two other forms: `TimeFilter.mask` over numpy columns (the search index) and
`storage/history.time_clause` in Cypher; tests/unit/test_timefilter.py and
tests/integration/reads/test_temporal_reads.py check that all three agree on every combination.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt

from lcg.models import Fact
from lcg.timeutil import now

__all__ = ["CURRENT", "TimeFilter"]

Micros = npt.NDArray[np.int64]
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


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

    def admits(self, fact: Fact, *, at: datetime | None = None) -> bool:
        """Whether `fact` is visible under this filter; `at` stands for "now" (default: the clock)."""
        invalid_at = fact.invalid_at
        if self.known_at is not None or not self.include_invalidated:
            system = self.known_at or at or now()
            if fact.created_at is not None and fact.created_at > system:
                return False
            if fact.expired_at is not None:
                if fact.expired_at > system:
                    invalid_at = None  # retired later: held as open-ended then
                elif fact.invalid_at is None:
                    return False  # withdrawn
        if self.as_of is not None:
            if fact.valid_at is not None and fact.valid_at > self.as_of:
                return False
            return invalid_at is None or invalid_at > self.as_of
        if self.include_invalidated:
            return True
        reference = self.known_at or at or now()
        return invalid_at is None or invalid_at > reference

    def mask(
        self,
        valid_at: Micros,
        invalid_at: Micros,
        created_at: Micros,
        expired_at: Micros,
        *,
        at: datetime | None = None,
    ) -> npt.NDArray[np.bool_]:
        """`admits` over columns of microseconds since the epoch, vectorised (same rule).

        An absent `valid_at`/`created_at` must be encoded as a value below every instant (e.g.
        the int64 minimum), an absent `invalid_at`/`expired_at` as one above (the maximum).
        """
        keep = np.ones(valid_at.shape, dtype=bool)
        held_open = np.zeros(valid_at.shape, dtype=bool)  # retired later: open-ended then
        if self.known_at is not None or not self.include_invalidated:
            system = _micros(self.known_at or at or now())
            never = np.iinfo(np.int64).max
            keep &= created_at <= system
            keep &= (expired_at > system) | (invalid_at != never)
            held_open = (expired_at != never) & (expired_at > system)
        if self.as_of is not None:
            as_of = _micros(self.as_of)
            return keep & (valid_at <= as_of) & (held_open | (invalid_at > as_of))
        if self.include_invalidated:
            return keep
        reference = _micros(self.known_at or at or now())
        return keep & (held_open | (invalid_at > reference))


CURRENT = TimeFilter()
