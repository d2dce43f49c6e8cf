"""Temporal lists answered from columns in memory: the facts visible at an instant, newest uuid
first, and the facts that changed in a window, without scanning the Fact table.

Kuzu has no secondary index on a property, so `GraphReader.facts_at` and `fact_changes` scan
and join every fact of the groups (at 1M facts: seconds). The search index already holds, per
group, every fact's uuid and its four time columns (`lcg.search`, kept in step with each
commit; read through `View.uuids`, `View.columns` and `View.live()`). These reads evaluate the
time rule on those columns (`TimeFilter.mask`, the same rule as the Cypher
`storage.history.time_clause`), pick the candidates in the order the answer needs, and read the
candidates' rows in one batched read, which also drops a fact whose structural hops are
missing, as the Cypher reads do: from the rows held in memory (lcg.search.factrows, on an
embedded store), else `GraphReader.facts_with_hops_by_uuid`. Candidates are taken in order, in
growing rounds (one batched read each), until the answer is full or they run out, so the result
is the Cypher read's.

The uuid order of a partition's documents is sorted once per uuid list (a partition replaces
its list when it compacts) and kept; an `as_of` page tests the time rule on documents in that
order, a block at a time, until the page is full (documents added since the order was made
are few and all tested).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

import anyio.to_thread
import numpy as np
import numpy.typing as npt

from lcg.models import Fact
from lcg.timefilter import TimeFilter

if TYPE_CHECKING:
    from lcg.search.factrows import FactRows
    from lcg.search.index import SearchIndex
    from lcg.search.partition import View
    from lcg.storage.backend import GraphReader

__all__ = ["changed_facts", "fact_views", "visible_newest"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
Ints = npt.NDArray[np.int64]


def _micros(value: datetime) -> int:
    return (value - _EPOCH) // timedelta(microseconds=1)


class _Order:
    """A partition's first `n` documents by uuid, largest first."""

    def __init__(self, uuids: list[str], n: int) -> None:
        self.n = n
        # UTF-8 bytes sort as the strings do (code point order), in a quarter of the room.
        keys = np.array([u.encode() for u in uuids[:n]], dtype="S") if n else np.zeros(0, "S1")
        self.desc: npt.NDArray[np.int64] = np.argsort(keys, kind="stable")[::-1].copy()


_MAX_ORDERS = 16
_orders: dict[int, tuple[list[str], _Order]] = {}
_orders_lock = threading.Lock()


def _order(view: View) -> _Order:
    """The uuid order of `view`'s documents: sorted once per uuid list and reused while the
    documents added since (sorted per read) stay few."""
    with _orders_lock:
        known = _orders.get(id(view.uuids))
    if known is not None and known[0] is view.uuids:
        done = known[1]
        if done.n <= view.n and view.n - done.n <= max(1024, done.n // 8):
            return done
    made = _Order(view.uuids, view.n)
    with _orders_lock:
        _orders.pop(id(view.uuids), None)
        _orders[id(view.uuids)] = (view.uuids, made)  # holding the list keeps its id unique
        while len(_orders) > _MAX_ORDERS:  # lists of compacted partitions: forget the oldest
            del _orders[next(iter(_orders))]
    return made


# Documents whose time columns a page tests at first, in uuid order (doubled while the page is
# not full): a page of 100 at an instant that sees half the facts tests ~1k documents, not the
# partition's 1M (~13 ms of CPU at 1M facts).
_FIRST_BLOCK = 1024
_TIMES = ("valid_at", "invalid_at", "created_at", "expired_at")


def _shown(view: View, docs: npt.NDArray[np.int64], time: TimeFilter, at: datetime) -> Ints:
    """The documents of `docs` (in their order) live and visible under `time`."""
    # Plain views: indexing a mapped column (`np.memmap`) makes a memmap each time.
    c = {name: view.columns[name].view(np.ndarray) for name in _TIMES}
    keep = view.alive[docs] & time.mask(
        c["valid_at"][docs],
        c["invalid_at"][docs],
        c["created_at"][docs],
        c["expired_at"][docs],
        at=at,
    )
    return docs[keep]


def _newest(view: View, time: TimeFilter, at: datetime, count: int) -> tuple[list[str], bool]:
    """The uuids of up to `count` documents of `view` visible under `time`, largest first, and
    whether it holds more than that: its documents are tested in uuid order, a block at a time,
    until `count + 1` are found (those added since the order was made, all of them)."""
    order = _order(view)
    found: list[Ints] = []
    held, start, block = 0, 0, max(_FIRST_BLOCK, 2 * count)
    while start < order.n and held <= count:
        docs = _shown(view, order.desc[start : start + block], time, at)
        found.append(docs)
        held += len(docs)
        start += block
        block *= 2
    added = _shown(view, np.arange(order.n, view.n, dtype=np.int64), time, at)
    # The ordered documents found are already largest first: the first `count + 1` of them
    # with those added since hold the answer.
    docs = (np.concatenate(found) if found else added[:0])[: count + 1]
    picked = [view.uuids[i] for i in docs.tolist()]
    if len(added):
        picked = sorted(picked + [view.uuids[i] for i in added.tolist()], reverse=True)
    return picked[:count], held + len(added) > count


def _read(
    conn: GraphReader, held: FactRows | None, uuids: Sequence[str], seen: dict[str, Fact | None]
) -> None:
    """Read the rows of the `uuids` not in `seen` yet in one batched read (from the rows held
    in memory where there are some); a fact whose hops are missing is recorded as None."""
    wanted = [u for u in dict.fromkeys(uuids) if u not in seen]
    if wanted:
        found = (
            held.facts_with_hops(conn, wanted)
            if held is not None
            else conn.facts_with_hops_by_uuid(wanted)
        )
        for uuid in wanted:
            seen[uuid] = found.get(uuid)


async def held_rows(index: SearchIndex) -> FactRows | None:
    """The temporal rows held in memory (lcg.search.factrows), built first if they are not
    (waiting in a worker thread, before the caller takes its reader connection: the build
    takes one of its own); None where the index holds none (a server's store)."""
    held = index.temporal
    if held is not None and held.pending():
        await anyio.to_thread.run_sync(held.ready)
    return held


async def fact_views(index: SearchIndex, groups: Sequence[str] | None) -> list[View]:
    """Snapshots of the groups' fact columns, taken in a worker thread before the read (a
    partition not loaded yet is read from the store on its own connection)."""
    pairs = await anyio.to_thread.run_sync(index.views, "fact", groups)
    return [view for _, view in pairs]


def visible_newest(
    views: Sequence[View],
    conn: GraphReader,
    time: TimeFilter,
    at: datetime,
    limit: int,
    held: FactRows | None = None,
) -> list[Fact]:
    """`GraphReader.facts_at(groups, time, at, limit)` from the groups' `views` (module
    docstring); the rows from `held` where given."""
    seen: dict[str, Fact | None] = {}
    want = limit  # hopless facts are rare: a first round of exactly the page
    while True:
        # Every document not taken as a candidate sorts below `floor` (below the last
        # candidate of each partition that had more), so the newest facts at or above it are
        # the answer's first ones: read them in one batch, keep them in order.
        floor, more = "", False
        candidates: list[str] = []
        for view in views:
            picked, truncated = _newest(view, time, at, want)
            candidates += picked
            if truncated:
                more = True
                floor = max(floor, picked[-1])
        ordered = [u for u in sorted(set(candidates), reverse=True) if u >= floor]
        _read(conn, held, ordered, seen)
        out = [fact for u in ordered if (fact := seen[u]) is not None][:limit]
        if len(out) == limit or not more:
            return out
        want *= 2


def changed_facts(
    views: Sequence[View],
    conn: GraphReader,
    since: datetime,
    until: datetime,
    kinds: Sequence[str],
    limit: int,
    held: FactRows | None = None,
) -> list[Fact]:
    """Facts of the groups' `views` with a column of `kinds` in `[since, until)`
    (`GraphReader.fact_changes` without an entity): enough of them for the first `limit + 1`
    change entries in time order.

    Entries are ordered by (instant, position of the column in `kinds`); the facts returned
    are those holding the first `limit` entries whose hops exist, every entry tied with the
    last of them (the caller orders ties by the facts' text, `timeline.stable_key`, which the
    columns do not hold) and the entry after those (all of them when there are fewer), so the
    caller can build its entries and tell if more existed.
    """
    s, u = _micros(since), _micros(until)
    entries: list[tuple[int, int, str]] = []
    for view in views:
        if u <= s:
            break
        live = view.live()
        for rank, column in enumerate(kinds):
            values = view.columns[column][: view.n]
            # s <= v < u as one unsigned comparison of v - s (wrapping) with u - s: a pass
            # fewer over the column, and liveness tested on the hits only.
            hit = np.flatnonzero((values - s).view(np.uint64) < np.uint64(u - s))
            hit = hit[live[hit]]
            entries += [(int(values[i]), rank, view.uuids[i]) for i in hit.tolist()]
    entries.sort()
    seen: dict[str, Fact | None] = {}
    want = limit + 1
    while True:
        # The distinct facts of the first entries, up to `want` of them, in one batch.
        batch = list(dict.fromkeys(uuid for _, _, uuid in entries))[:want]
        _read(conn, held, batch, seen)
        facts: dict[str, Fact] = {}
        kept = 0
        tie: tuple[int, int] | None = None  # (instant, column) of the `limit`-th entry
        for instant, rank, uuid in entries:  # in order, until the entry after the ties
            if uuid not in seen:  # beyond this round's batch: read more
                break
            fact = seen[uuid]
            if fact is None:
                continue
            facts[uuid] = fact
            if tie is not None and (instant, rank) != tie:
                return list(facts.values())
            kept += 1
            if kept == limit:
                tie = (instant, rank)
        else:
            return list(facts.values())
        want *= 2
