"""`RowCache`: the rows search results were hydrated with, kept for the next search.

A search ranks documents in the in-process index, then reads the winning rows (entities, facts,
episodes) from the database. At 10k entities that read cost about as much as the ranking
(~5 ms for ten entities, ~8 ms for ten facts: Kuzu's per-statement cost), so rows are kept
here: while the groups fit (`capacity` rows a family), every row of a group searched once
(`whole`: read in one paged scan, so the searches after it never read the database for rows
that did not change), and beside them the `lru` most recently used rows of other reads.

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

__all__ = ["EPISODE_ROWS", "LRU_ROWS", "ROWS_PER_FAMILY", "RowCache"]

# Rows kept per family: of groups read whole at most `ROWS_PER_FAMILY`, of other reads at most
# `LRU_ROWS` (what every graph kept before groups were read whole). Entities and facts: a row
# with a 100-word text is ~1-2 KB, so ~25-50 MB a family at most. Episodes (whose texts can be
# long): `EPISODE_ROWS` of each kind, the 4,096 rows they kept before.
ROWS_PER_FAMILY = 20_000
LRU_ROWS = 4096
EPISODE_ROWS = 2048
# Forgets remembered for readers in flight (a reader older than these caches nothing).
_LOG = 256


class _Row(Protocol):
    @property
    def group_id(self) -> str: ...


T = TypeVar("T", bound=_Row)


class RowCache(Generic[T]):
    """Rows by uuid: those of groups read whole, and the least recently used others (module
    docstring)."""

    def __init__(self, capacity: int = ROWS_PER_FAMILY, lru: int = LRU_ROWS) -> None:
        self.capacity = capacity
        self._lru = lru
        self._kept: dict[str, T] = {}  # rows of the groups read whole
        self._whole: dict[str, int] = {}  # group read whole -> its rows then
        self._rows: OrderedDict[str, T] = OrderedDict()  # other rows, least recent first
        self._version = 0
        # (version after the forget, uuids forgotten, groups forgotten; None: everything)
        self._log: deque[tuple[int, frozenset[str], frozenset[str] | None]] = deque(maxlen=_LOG)
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept) + len(self._rows)

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
                row = self._kept.get(uuid)
                if row is None:
                    row = self._rows.get(uuid)
                    if row is None:
                        continue
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
            fresh = [
                (uuid, row)
                for uuid, row in rows
                if uuid not in skip_uuids and row.group_id not in skip_groups
            ]
            if whole is not None:
                taken = sum(self._whole.values())
                if (
                    whole in skip_groups
                    or whole in self._whole
                    or taken + len(fresh) > self.capacity
                ):
                    return  # overtaken, or a concurrent read of it or of others came first
                self._whole[whole] = len(fresh)
                for uuid, row in fresh:
                    self._rows.pop(uuid, None)
                    self._kept[uuid] = row
                return
            for uuid, row in fresh:
                self._kept.pop(uuid, None)
                self._rows[uuid] = row
                self._rows.move_to_end(uuid)
            while len(self._rows) > self._lru:
                self._rows.popitem(last=False)

    def forget(self, uuids: Iterable[str], groups: Iterable[str] = ()) -> None:
        """Drop the rows of `uuids` and every row of `groups` (their database rows changed)."""
        keys, gone = frozenset(uuids), frozenset(groups)
        with self._lock:
            self._version += 1
            self._log.append((self._version, keys, gone))
            for uuid in keys:
                self._kept.pop(uuid, None)
                self._rows.pop(uuid, None)
            if gone:
                for group in gone:
                    self._whole.pop(group, None)
                for rows in (self._kept, self._rows):
                    for uuid in [u for u, row in rows.items() if row.group_id in gone]:
                        del rows[uuid]

    def clear(self) -> None:
        """Forget everything."""
        with self._lock:
            self._version += 1
            self._log.append((self._version, frozenset(), None))
            self._kept.clear()
            self._whole.clear()
            self._rows.clear()
