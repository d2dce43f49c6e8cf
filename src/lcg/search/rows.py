"""`RowCache`: the rows search results were hydrated with, kept for the next search.

A search ranks documents in the in-process index, then reads the winning rows (entities, facts,
episodes) from the database. At 10k entities that read cost about as much as the ranking
(~5 ms for ten entities, ~8 ms for ten facts: Kuzu's per-statement cost), so rows are kept
here: the most recently used `capacity` of each family (LRU), and, while the groups fit in
it, every row of a group searched once (`whole`: read in one paged scan, so the searches after
it never read the database for rows that did not change).

Freshness is kept per row. Every commit, after it is visible in the database, forgets the rows
its operations name (`SearchIndex.apply`: upserts, invalidations, episode adds and deletes);
an operation that may touch rows it does not name forgets its whole group, and so do
`SearchIndex.invalidate` (those groups) and `reset` (everything). Each forget advances the
cache's `version`. A reader takes the version *before* its database read and `put`s the rows
under it: rows a forget named since then are dropped (the read may have preceded the commit),
so a later search never sees a row older than the last commit that named it. The forgets
since a version are kept in a short log (`_LOG` entries); a reader older than that caches
nothing. Rows are immutable model objects.
"""

from __future__ import annotations

import threading
from collections import OrderedDict, deque
from collections.abc import Iterable
from typing import Generic, Protocol, TypeVar

__all__ = ["EPISODE_ROWS", "ROWS_PER_FAMILY", "RowCache"]

# Rows kept per family: entities and facts (a row with a 100-word text ~1-2 KB, so at most
# ~20-40 MB each), episodes (whose texts can be long).
ROWS_PER_FAMILY = 20_000
EPISODE_ROWS = 4096
# Forgets remembered for readers in flight (a reader older than these caches nothing).
_LOG = 256


class _Row(Protocol):
    @property
    def group_id(self) -> str: ...


T = TypeVar("T", bound=_Row)


class RowCache(Generic[T]):
    """Rows by uuid; least recently used go first (module docstring)."""

    def __init__(self, capacity: int = ROWS_PER_FAMILY) -> None:
        self.capacity = capacity
        self._rows: OrderedDict[str, T] = OrderedDict()
        self._version = 0
        # (version after the forget, uuids forgotten, groups forgotten; None: everything)
        self._log: deque[tuple[int, frozenset[str], frozenset[str] | None]] = deque(maxlen=_LOG)
        self._whole: dict[str, int] = {}  # group -> rows put when the whole group was read
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._rows)

    @property
    def version(self) -> int:
        """Take it before a database read whose rows go to `put`."""
        with self._lock:
            return self._version

    def get(self, uuids: Iterable[str]) -> dict[str, T]:
        """The cached rows of `uuids` (absent: not cached)."""
        found: dict[str, T] = {}
        with self._lock:
            for uuid in uuids:
                row = self._rows.get(uuid)
                if row is not None:
                    self._rows.move_to_end(uuid)
                    found[uuid] = row
        return found

    def wants_whole(self, group: str, rows: int) -> bool:
        """Whether to read all `rows` (at most) of `group` at once: it was not read whole since
        it was last forgotten, it is at most half the capacity (such a read costs ~20-40 ms of
        CPU a thousand rows), and it fits beside the groups that were."""
        with self._lock:
            return (
                group not in self._whole
                and 2 * rows <= self.capacity
                and sum(self._whole.values()) + rows <= self.capacity
            )

    def put(self, version: int, rows: Iterable[tuple[str, T]], whole: str | None = None) -> None:
        """Cache `rows` ((uuid, row) pairs) read from the database after `version` was taken,
        except those forgotten since; `whole`: they are every row of that group."""
        with self._lock:
            if version == self._version:
                skip_uuids: set[str] = set()
                skip_groups: set[str] | None = set()
            elif self._log and self._log[0][0] <= version + 1:
                skip_uuids, skip_groups = set(), set()
                for at, uuids, groups in self._log:
                    if at <= version:
                        continue
                    skip_uuids |= uuids
                    if groups is None:
                        skip_groups = None
                        break
                    skip_groups |= groups
            else:
                return  # older than the log: nothing is known to be fresh
            if skip_groups is None:
                return
            count = 0
            for uuid, row in rows:
                count += 1
                if uuid in skip_uuids or row.group_id in skip_groups:
                    continue
                self._rows[uuid] = row
                self._rows.move_to_end(uuid)
            if whole is not None and whole not in skip_groups:
                self._whole[whole] = count
            while len(self._rows) > self.capacity:
                self._rows.popitem(last=False)

    def forget(self, uuids: Iterable[str], groups: Iterable[str] = ()) -> None:
        """Drop the rows of `uuids` and every row of `groups` (their database rows changed)."""
        keys, gone = frozenset(uuids), frozenset(groups)
        with self._lock:
            self._version += 1
            self._log.append((self._version, keys, gone))
            for uuid in keys:
                self._rows.pop(uuid, None)
            if gone:
                for group in gone:
                    self._whole.pop(group, None)
                for uuid in [u for u, row in self._rows.items() if row.group_id in gone]:
                    del self._rows[uuid]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._version += 1
            self._log.append((self._version, frozenset(), None))
            self._rows.clear()
            self._whole.clear()
