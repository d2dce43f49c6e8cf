"""The vectorised time filter of fact search agrees with `TimeFilter.admits` on every fact."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from lcg.graph.hybrid import _time_mask
from lcg.models import Fact
from lcg.search.index import ALWAYS, NEVER, micros
from lcg.search.partition import Partition
from lcg.search.text import Vocabulary
from lcg.timefilter import TimeFilter

BASE = datetime(2020, 1, 1, tzinfo=UTC)
moment = st.integers(-5, 5).map(lambda d: BASE + timedelta(days=d))
maybe = st.none() | moment
future = st.none() | st.integers(1, 3).map(lambda d: datetime.now(UTC) + timedelta(days=d))
facts = st.builds(
    lambda v, i, c, e: Fact("u", "g", "a", "b", "N", "f", valid_at=v, invalid_at=i,
                            created_at=c, expired_at=e),
    maybe, maybe | future, maybe, maybe | future,
)  # fmt: skip
filters = st.builds(TimeFilter, maybe, maybe, st.booleans())


@settings(max_examples=200, deadline=None)
@given(st.lists(facts, min_size=1, max_size=12), filters)
def test_time_mask_equals_admits(rows: list[Fact], time: TimeFilter) -> None:
    part = Partition(Vocabulary(), [], 4, ["valid_at", "invalid_at", "created_at", "expired_at"])
    cols = {
        "valid_at": [micros(f.valid_at, ALWAYS) for f in rows],
        "invalid_at": [micros(f.invalid_at, NEVER) for f in rows],
        "created_at": [micros(f.created_at, ALWAYS) for f in rows],
        "expired_at": [micros(f.expired_at, NEVER) for f in rows],
    }
    part.add(
        [f"u{i}" for i in range(len(rows))],
        ["x"] * len(rows),
        columns={k: np.array(v, dtype=np.int64) for k, v in cols.items()},
    )
    mask = _time_mask(part.view(), time)
    assert mask.tolist() == [time.admits(f) for f in rows]
