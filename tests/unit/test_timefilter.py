"""TimeFilter: half-open intervals on both axes, absent bounds, and the held-history rule."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import numpy as np
import numpy.typing as npt
import pytest

from lcg.models import Fact
from lcg.timefilter import CURRENT, TimeFilter

T0 = datetime(2024, 1, 1, tzinfo=UTC)
T1 = datetime(2024, 6, 1, tzinfo=UTC)
C1 = datetime(2026, 1, 1, tzinfo=UTC)
C2 = datetime(2026, 2, 1, tzinfo=UTC)
NOW = datetime(2026, 6, 1, tzinfo=UTC)
EPS = timedelta(microseconds=1)


def fact(
    valid: datetime | None = None,
    invalid: datetime | None = None,
    created: datetime | None = None,
    expired: datetime | None = None,
) -> Fact:
    return Fact(
        uuid="f",
        group_id="g",
        source_uuid="a",
        target_uuid="b",
        name="R",
        fact="a R b",
        valid_at=valid,
        invalid_at=invalid,
        created_at=created,
        expired_at=expired,
    )


def test_a_fact_with_no_times_is_always_visible() -> None:
    bare = fact()
    for f in (
        CURRENT,
        TimeFilter(as_of=T0),
        TimeFilter(known_at=C1),
        TimeFilter(as_of=T0, known_at=C1),
        TimeFilter(include_invalidated=True),
    ):
        assert f.admits(bare, at=NOW), f


def test_valid_time_is_half_open() -> None:
    f = fact(valid=T0, invalid=T1)
    assert not TimeFilter(as_of=T0 - EPS).admits(f, at=NOW)
    assert TimeFilter(as_of=T0).admits(f, at=NOW)
    assert TimeFilter(as_of=T1 - EPS).admits(f, at=NOW)
    assert not TimeFilter(as_of=T1).admits(f, at=NOW)


def test_absent_valid_bounds_are_open_ended() -> None:
    assert TimeFilter(as_of=datetime(1900, 1, 1, tzinfo=UTC)).admits(fact(invalid=T1), at=NOW)
    assert TimeFilter(as_of=datetime(2999, 1, 1, tzinfo=UTC)).admits(fact(valid=T0), at=NOW)


def test_system_time_is_half_open() -> None:
    f = fact(valid=T0, created=C1, expired=C2)  # withdrawn at C2: no end of validity
    assert not TimeFilter(known_at=C1 - EPS).admits(f, at=NOW)
    assert TimeFilter(known_at=C1).admits(f, at=NOW)
    assert TimeFilter(known_at=C2 - EPS).admits(f, at=NOW)
    assert not TimeFilter(known_at=C2).admits(f, at=NOW)


def test_current_means_held_now_and_not_ended() -> None:
    assert CURRENT.is_current
    assert CURRENT.admits(fact(valid=T0, created=C1), at=NOW)
    assert not CURRENT.admits(fact(valid=T0, invalid=T1, created=C1), at=NOW)  # ended
    assert CURRENT.admits(fact(valid=T0, invalid=NOW + EPS), at=NOW)  # ends later
    assert not CURRENT.admits(fact(valid=T0, invalid=NOW), at=NOW)
    assert not CURRENT.admits(fact(created=C1, expired=C2), at=NOW)  # withdrawn
    assert not CURRENT.admits(fact(created=NOW + EPS), at=NOW)  # not learned yet


def test_a_superseded_fact_is_history_after_its_retirement_and_open_ended_before() -> None:
    old = fact(valid=T0, invalid=T1, created=C1, expired=C2)
    # As held today: true from T0 until T1.
    assert TimeFilter(as_of=T0).admits(old, at=NOW)
    assert not TimeFilter(as_of=T1).admits(old, at=NOW)
    assert not CURRENT.admits(old, at=NOW)
    # As held before C2: the graph did not know it would end.
    before = C2 - EPS
    assert TimeFilter(known_at=before).admits(old, at=NOW)
    assert TimeFilter(known_at=before, as_of=T1 + timedelta(days=60)).admits(old, at=NOW)
    # From C2 on it is history: not current, but still true as of T0.
    assert not TimeFilter(known_at=C2).admits(old, at=NOW)
    assert TimeFilter(known_at=C2, as_of=T0).admits(old, at=NOW)
    assert TimeFilter(known_at=C2, include_invalidated=True).admits(old, at=NOW)


def test_include_invalidated_lifts_the_current_rule_only() -> None:
    ended = fact(valid=T0, invalid=T1, created=C1)
    withdrawn = fact(valid=T0, created=C1, expired=C2)
    everything = TimeFilter(include_invalidated=True)
    assert not everything.is_current
    assert everything.admits(ended, at=NOW) and everything.admits(withdrawn, at=NOW)
    # An explicit instant still applies.
    assert not TimeFilter(as_of=T1, include_invalidated=True).admits(ended, at=NOW)
    assert not TimeFilter(known_at=C2, include_invalidated=True).admits(withdrawn, at=NOW)
    assert TimeFilter(known_at=C1, include_invalidated=True).admits(ended, at=NOW)


@pytest.mark.parametrize("known_at", [C1, C2, NOW])
def test_known_at_alone_excludes_facts_known_to_have_ended(known_at: datetime) -> None:
    ended = fact(valid=T0, invalid=T1, created=C1)  # created already ended, never retired
    assert not TimeFilter(known_at=known_at).admits(ended, at=NOW)
    assert TimeFilter(known_at=known_at, as_of=T0).admits(ended, at=NOW)


def test_the_clock_is_now_when_at_is_not_given() -> None:
    assert CURRENT.admits(fact(valid=T0, invalid=datetime(2999, 1, 1, tzinfo=UTC)))
    assert not CURRENT.admits(fact(valid=T0, invalid=T1))


def test_the_vectorised_mask_agrees_with_admits_on_every_combination() -> None:
    lo, hi = np.iinfo(np.int64).min, np.iinfo(np.int64).max
    epoch = datetime(1970, 1, 1, tzinfo=UTC)
    choices = (None, T0, T1, C1, C2)
    facts = [fact(*cols) for cols in itertools.product(choices, choices, choices, choices)]

    def col(name: str, missing: int) -> npt.NDArray[np.int64]:
        values = [getattr(f, name) for f in facts]
        return np.array(
            [missing if v is None else (v - epoch) // timedelta(microseconds=1) for v in values],
            dtype=np.int64,
        )

    columns = (
        col("valid_at", lo),
        col("invalid_at", hi),
        col("created_at", lo),
        col("expired_at", hi),
    )
    instants = (None, T0, T1 - EPS, T1, C1, C2, NOW)
    for as_of, known_at, inc in itertools.product(instants, instants, (False, True)):
        f = TimeFilter(as_of, known_at, inc)
        expected = [f.admits(x, at=NOW) for x in facts]
        assert f.mask(*columns, at=NOW).tolist() == expected, f
