"""`NameIndex.load` (one sort per name, for the open of a large graph) gives the index that
`put` of each row in turn gives: order by (created_at, uuid), a repeated uuid's last row wins,
names normalised, no created_at first."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

from lcg.engine.names import NameIndex


def _rows(seed: int) -> list[tuple[str, str, str, datetime | None, bool]]:
    rng = random.Random(seed)
    base = datetime(2026, 1, 1, tzinfo=UTC)
    rows = []
    for _ in range(400):
        at = None if rng.random() < 0.1 else base + timedelta(seconds=rng.randrange(50))
        name = rng.choice(["Alice", " alice ", "ALICE", "Bob", "bob", "Carol", ""])
        uuid = f"e-{rng.randrange(150):03d}"  # repeats: a later row of a uuid replaces it
        rows.append((rng.choice(["g", "h"]), name, uuid, at, rng.random() < 0.2))
    return rows


def test_load_matches_put_of_each_row_in_turn() -> None:
    for seed in range(5):
        rows = _rows(seed)
        loaded, put = NameIndex(), NameIndex()
        loaded.load([("g", "Stale", "e-stale", None, False)])  # replaced, not kept
        loaded.load(rows)
        for row in rows:
            put.put(*row)
        assert len(loaded) == len(put)
        assert "e-stale" not in loaded
        for group in ("g", "h"):
            for name in ("alice", "Bob", "carol", "", "stale"):
                assert loaded.lookup(group, name) == put.lookup(group, name)
        assert dict(loaded._by_key) == dict(put._by_key)
        assert loaded._key_of == put._key_of


def test_a_loaded_index_takes_later_puts_and_removes() -> None:
    at = datetime(2026, 1, 1, tzinfo=UTC)
    index = NameIndex()
    index.load([("g", "Alice", "e-2", at, False), ("g", "alice", "e-1", at, True)])
    assert index.lookup("g", "ALICE") == [("e-1", True), ("e-2", False)]
    index.put("g", "Alice", "e-0", at - timedelta(days=1), False)
    index.remove("e-1")
    assert index.lookup("g", "alice") == [("e-0", False), ("e-2", False)]
    index.drop_group("g")
    assert len(index) == 0 and index.lookup("g", "alice") == []
