"""Server mode (docs/design.md): many processes, one graph. What this process's derived state (the
name index and the search index) reflects of each group's WAL stream, bringing it up to the
commits of other processes, and the rules for a write that lost the race to one of them.

- **Positions.** `Follower.at(group)` is the stream position the derived state reflects. A
  commit goes in at exactly that position (`commits.store_commit`): the store refuses it with
  `GroupMovedError` (nothing applied) when another process committed first, so a plan made
  under the write lock — reads of the server plus the name index — is committed only if the
  group did not move since the derived state was brought up to it.
- **Catching up.** `Follower.sync(group)` reads the stream from that position, embeds the
  texts the new operations need (outside the write lock: the embedding cache serves texts
  seen before), and applies the operations under the lock to the name index and the search
  partitions, incrementally, as the kernel does a commit (`Projection.apply` of each,
  lcg.wal.projection; a batch this version cannot read has each reload the group).
  Lines below the position (this process's own commits, applied when committed) are skipped.
- **Following.** `Follower.start()` runs a daemon thread that does this for every group of the
  store (learning new groups every `GROUPS_EVERY_S`), waiting on the stream between rounds;
  errors are logged and retried with backoff; `stop()` ends it at close. `status()` is the
  `storage.follower` entry of `knowledge_status`.
- **A lost race** (`retrying`, `lost_race`): the engine has caught up when `GroupMovedError`
  reaches the retry loop; the loop waits a jittered backoff and runs the plan and commit again
  (the caller's extraction and vectors are reused: only resolution and planning run again),
  at most `ATTEMPTS` times, then raises `ConflictError`.

On an embedded store (Kuzu: one process owns the workspace) the follower does nothing.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, runtime_checkable

from lcg.embedding.base import Embedder
from lcg.embedding.vectors import embed_plan, plan_for_changes
from lcg.errors import ConflictError, WalOpError
from lcg.search.index import SearchIndex
from lcg.storage.backend import GraphBackend, GroupMovedError
from lcg.wal.changes import Change, decode_all
from lcg.wal.projection import Projection
from lcg.wal.records import Op, WalRecord

__all__ = [
    "ATTEMPTS",
    "Follower",
    "lost_race",
    "retrying",
]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# A write that lost the race to another process is planned and committed again at most this
# many times in all, waiting a jittered backoff of up to BACKOFF_BASE_S * 2**attempt (capped
# at BACKOFF_MAX_S) between attempts. The loser is the one behind: a long wait only lets the
# winner's next commits in (two processes ingesting one group as fast as they can: 12
# attempts with waits up to 0.5 s left one episode of 300 without a commit), so the waits stay
# short and the attempts many (at most ~2 s of waiting in all).
ATTEMPTS = 40
BACKOFF_BASE_S = 0.002
BACKOFF_MAX_S = 0.05
# The follower thread: how long one round waits for a new commit, how often it asks the store
# for groups it does not know yet, and its backoff after an error.
WAIT_S = 0.05
GROUPS_EVERY_S = 0.25
ERROR_BACKOFF_MAX_S = 5.0


def lost_race(exc: GroupMovedError, attempt: int) -> float:
    """The seconds to wait before attempt `attempt + 1` after attempt `attempt` (1-based) lost
    the race to another process.

    Raises:
        ConflictError: that was the last attempt (nothing of the write was applied).
    """
    if attempt >= ATTEMPTS:
        raise ConflictError(
            f"group {exc.group_id!r} kept moving under this write: {attempt} attempts lost the "
            f"race to other processes' commits; nothing of it was applied, send it again"
        ) from exc
    return random.uniform(0.0, min(BACKOFF_MAX_S, BACKOFF_BASE_S * 2**attempt))


def retrying(attempt: Callable[[], T]) -> T:
    """Run `attempt` (a plan and its commit, under the write lock inside it) until it does not
    lose the race to another process (`GroupMovedError`, after which the engine has caught
    up), waiting `lost_race`'s backoff between tries (in this thread, never holding the lock).

    Raises:
        ConflictError: every attempt lost the race.
    """
    for n in range(1, ATTEMPTS + 1):
        try:
            return attempt()
        except GroupMovedError as exc:
            time.sleep(lost_race(exc, n))
    raise AssertionError("unreachable: the last attempt returns or raises")


@runtime_checkable
class _Waits(Protocol):
    """A store that can wait for the next commit of any of several groups
    (FalkorBackend.follow_many)."""

    def follow_many(
        self, positions: Mapping[str, int], block_ms: int = ...
    ) -> dict[str, list[WalRecord]]: ...


def _batches(records: Sequence[WalRecord]) -> list[list[WalRecord]]:
    """The records split into their commits (a batch's lines carry their index `at`)."""
    out: list[list[WalRecord]] = []
    for r in records:
        if not out or not r.at:
            out.append([r])
        else:
            out[-1].append(r)
    return out


def _decoded(group: str, ops: Sequence[Op]) -> list[Change] | None:
    """A batch of another process's commit as changes; None when this version cannot read
    one of its operations (a newer writer's, say)."""
    try:
        return decode_all(ops, group)
    except WalOpError:
        return None


class Follower:
    """One engine's view of the groups' streams on a store that keeps the WAL itself."""

    def __init__(
        self,
        store: Callable[[], GraphBackend],
        lock: threading.RLock,
        projections: Sequence[Projection],
        search: SearchIndex,
        embedder: Embedder,
        *,
        follows: bool,
    ) -> None:
        self._store = store
        self._follows = follows  # whether other processes commit to the store (lcg.engine.modes)
        self._lock = lock
        self._projections = projections  # the name and search indexes (lcg.wal.projection)
        self._search = search  # whose long episodes' windows are embedded before the lock
        self._embedder = embedder
        self._positions: dict[str, int] = {}
        self._epoch = 0  # bumped by `reset`: records read before it are not applied after it
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._stats: dict[str, Any] = {
            "lost_races": 0,
            "applied_commits": 0,
            "applied_lines": 0,
            "last_applied_at": None,
            "errors": 0,
            "last_error": None,
        }

    # -- positions (write lock held) ------------------------------------------------------

    def _active(self) -> bool:
        if not self._follows:
            return False
        try:
            self._store()
        except Exception:  # no database open (degraded): nothing to follow
            return False
        return True

    def reset(self) -> None:
        """(Write lock held, before the name index loads.) Take every group's position from
        the store: the indexes loaded after it hold at least that much."""
        self._positions.clear()
        self._epoch += 1
        if not self._active():
            return
        store = self._store()
        with store.read_for_write() as r:
            for group in r.group_ids():
                self._positions[group] = r.position(group) or 0

    def at(self, group: str) -> int:
        """The position of the group's stream the derived state reflects (0: none of it)."""
        return self._positions.get(group, 0)

    def committed(self, group: str, first: int, last: int) -> None:
        """(Write lock held.) This process committed lines first..last of the group."""
        if first == self.at(group):
            self._positions[group] = last + 1

    # -- catching up ------------------------------------------------------------------------

    def moved(self, group: str) -> int:
        """A commit of this process lost the race for `group` (`GroupMovedError`): count it
        and catch up (`sync`)."""
        self._stats["lost_races"] += 1
        return self.sync(group)

    def sync(self, group: str, records: Sequence[WalRecord] | None = None) -> int:
        """Apply what the group's stream holds beyond `at(group)` (or `records`, read from
        there) to the name and search indexes; how many lines were applied. Vectors are
        computed before the write lock is taken; a thread already holding it (a nested pass)
        uses cached vectors only, and a partition missing one reloads instead."""
        if not self._active():
            return 0
        epoch, start = self._epoch, self.at(group)
        if records is None:
            records = self._store().stream_records(group, start)
        records = [r for r in records if r.seq >= start]
        if not records:
            return 0
        owned = self._lock._is_owned()  # type: ignore[attr-defined]  # CPython's RLock has it, the stub lacks it
        batches = [(b, [Op(r.op, r.data) for r in b]) for b in _batches(records)]
        changes = [_decoded(group, ops) for _, ops in batches]
        vectors = [
            embed_plan(plan_for_changes(typed or ()), self._embedder, cache_only=owned)
            for typed in changes
        ]
        if not owned:  # the windows of long episodes, into the cache `apply` reads them from
            for typed in changes:
                self._search.embed_windows(typed or ())
        applied = 0
        with self._lock:
            for (batch, _), rows, typed in zip(batches, vectors, changes, strict=True):
                if epoch != self._epoch or batch[0].seq != self.at(group):
                    continue  # this process committed it (or it was applied meanwhile)
                for projection in self._projections:
                    if typed is None:  # an operation this version cannot read: a reload
                        projection.reload([group])
                    else:
                        projection.apply(group, typed, rows)
                self._positions[group] = batch[-1].seq + 1
                applied += len(batch)
                self._stats["applied_commits"] += 1
        if applied:
            self._stats["applied_lines"] += applied
            self._stats["last_applied_at"] = time.time()
        return applied

    # -- the thread -------------------------------------------------------------------------

    def start(self) -> None:
        """Follow every group of the store in a daemon thread (a store that keeps the WAL)."""
        if self._thread is not None or not self._active():
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="lcg-follower", daemon=True)
        self._thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        """End the thread (at close); it finishes the round it is in."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout)
        if thread.is_alive():
            logger.warning("the stream follower did not stop within %.0f s", timeout)

    def _learn_groups(self) -> None:
        known = set(self._positions)
        with self._store().read() as r:
            fresh = [g for g in r.group_ids() if g not in known]
        if fresh:
            with self._lock:
                for group in fresh:
                    self._positions.setdefault(group, 0)

    def round(self) -> int:
        """One round: every known group brought up to its stream, waiting up to `WAIT_S` on
        the streams when nothing is new; how many lines were applied."""
        groups = list(self._positions)
        store = self._store()
        if isinstance(store, _Waits):
            found = store.follow_many({g: self.at(g) for g in groups}, int(WAIT_S * 1000))
            return sum(self.sync(g, records) for g, records in found.items())
        applied = sum(self.sync(g) for g in groups)
        if not applied:
            self._stop.wait(WAIT_S)
        return applied

    def _run(self) -> None:
        failures = 0
        learned = 0.0
        while not self._stop.is_set():
            try:
                if time.monotonic() - learned >= GROUPS_EVERY_S:
                    self._learn_groups()
                    learned = time.monotonic()
                if not self._positions:
                    self._stop.wait(WAIT_S)
                    continue
                self.round()
                failures = 0
            except Exception as exc:  # logged and retried: a follower must outlive a hiccup
                failures += 1
                self._stats["errors"] += 1
                self._stats["last_error"] = f"{type(exc).__name__}: {exc}"
                logger.exception("stream follower: round failed (retrying)")
                self._stop.wait(min(ERROR_BACKOFF_MAX_S, 0.1 * 2 ** min(failures, 6)))

    def status(self) -> dict[str, Any]:
        """`knowledge_status` → `storage.follower`: running or not, each group's position and
        lag (lines in its stream this process has not applied yet), the commits of this
        process that lost a race (and were planned again), what was applied."""
        groups: dict[str, dict[str, int]] = {}
        if self._active():
            with self._store().read() as r:
                for group in sorted(set(self._positions) | set(r.group_ids())):
                    head = r.position(group) or 0
                    at = self.at(group)
                    groups[group] = {"position": at, "lag": max(0, head - at)}
        return {"running": self._thread is not None, "groups": groups, **self._stats}
