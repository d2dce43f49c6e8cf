"""`RowCache`: the rows search results were hydrated with, kept for the next search.

A search ranks documents in the in-process index, then reads the winning rows (entities, facts,
episodes) from the database. At 10k entities that read cost about as much as the ranking (Kuzu
answers a batch of ten primary keys with a table scan, or ten prepared statements of ~0.3 ms
each), while repeated and overlapping queries return the same rows again and again.

Each cached row is stamped with its group's index version (`SearchIndex.stamp`), read *before*
the database read that fetched it. Every commit bumps the version of its group after it is
visible in the database (`SearchIndex.apply`), and so do `invalidate` and `reset` (all
groups), so a row is served from here only while no write touched its group since it was read:
a search never sees a row older than the index it ranked with. Rows are immutable model
objects; the cache holds the most recently used `capacity` of each family (LRU).
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from typing import Generic, TypeVar

__all__ = ["ROWS_PER_FAMILY", "RowCache"]

T = TypeVar("T")
Stamp = tuple[int, int]

# Rows kept per family (entity, fact, episode): a few MB each.
ROWS_PER_FAMILY = 4096


class RowCache(Generic[T]):
    """Rows by uuid with the stamp of their group when read; least recently used go first."""

    def __init__(self, capacity: int = ROWS_PER_FAMILY) -> None:
        self._capacity = capacity
        self._rows: OrderedDict[str, tuple[Stamp, T]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    def get(
        self,
        wanted: Iterable[tuple[str, Stamp]],
        read: Callable[[list[str]], Mapping[str, T]],
    ) -> dict[str, T]:
        """Rows of `wanted` (uuid, current stamp of its group): cached ones whose stamp is
        current, the others from `read` (missing ones are absent), which are then cached under
        the stamp given here (the caller took it before calling, so before `read` ran)."""
        found: dict[str, T] = {}
        missing: dict[str, Stamp] = {}
        with self._lock:
            for uuid, stamp in wanted:
                entry = self._rows.get(uuid)
                if entry is not None and entry[0] == stamp:
                    self._rows.move_to_end(uuid)
                    found[uuid] = entry[1]
                else:
                    missing[uuid] = stamp
        if not missing:
            return found
        fresh = read(list(missing))
        with self._lock:
            for uuid, row in fresh.items():
                if uuid in missing:
                    self._rows[uuid] = (missing[uuid], row)
                self._rows.move_to_end(uuid)
            while len(self._rows) > self._capacity:
                self._rows.popitem(last=False)
        found.update(fresh)
        return found

    def clear(self) -> None:
        with self._lock:
            self._rows.clear()
