"""The storage mode, chosen once by `open_engine`: where a commit is made durable, where a
group's position is kept, how the database is replaced. The kernel asks the mode; it never asks
which mode it runs in (docs/design.md, "Storage modes").

- `EmbeddedMode`: the local Kuzu store (`KuzuBackend`) and the workspace's JSONL WAL. A commit
  applies every batch in one database transaction, appends each group's lines to the WAL
  (fsync) while that transaction is open, sets the groups' positions in it and commits; the
  journal is checkpointed by the engine (`lcg.engine.checkpointer`); the database files are
  replaced by closing and reopening them.
- `ServerMode`: a store that keeps the WAL itself (FalkorDB, one stream per group next to each
  group's graph). A commit is one `GraphBackend.commit` per group at the position this
  process's indexes reflect (`lcg.engine.follow`), lines included (`commits.store_commit`); the
  workspace's JSONL WAL stays empty; the server checkpoints itself; other processes' commits
  are followed into the indexes.

Both implement `StorageMode.commit`, the one durable step of the kernel's one commit path
(`Engine._commit`): what runs before it (validation, planning, vectors) and after it (the name
and search indexes, through `committed`) is the kernel's and the same in both modes.
"""

from __future__ import annotations

import itertools
import logging
import os
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from lcg.config import Settings
from lcg.embedding.base import Embedder
from lcg.embedding.vectors import embed_plan, plan_for_rows
from lcg.engine.carryover import CarryOver
from lcg.engine.catchup import CatchUp, group_has_data
from lcg.engine.checkpointer import Checkpointer
from lcg.engine.commits import Batch, first_vectors, settle_stamp, store_commit
from lcg.engine.follow import Follower
from lcg.engine.replay import ReplayReport, applied_position, write_position
from lcg.engine.walproblems import WalProblems
from lcg.engine.warmup import PrebuiltSearch
from lcg.errors import (
    ConflictError,
    InvalidRequestError,
    UnavailableError,
    WalError,
    WalGenerationError,
)
from lcg.fsmodes import open_private, private_dir
from lcg.models import DEFAULT_GROUP_ID
from lcg.search.index import SearchIndex
from lcg.storage.backend import GraphBackend, GraphReader, GroupMovedError
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.select import open_store
from lcg.storage.store import Store
from lcg.telemetry import EventSink
from lcg.wal.fold import fold
from lcg.wal.layout import fsync_dir, group_dir, ordered_files
from lcg.wal.projection import Projection
from lcg.wal.reader import ReadStats, iter_records
from lcg.wal.records import Op, WalRecord
from lcg.wal.writer import Wal

__all__ = ["EmbeddedMode", "ModeParts", "RebuildPlan", "ServerMode", "StorageMode"]

logger = logging.getLogger(__name__)

# How long `reopen` waits for running reads before closing the database under them.
_READERS_DRAIN_SECONDS = 30.0

# A batch made durable: (batch, first seq, last seq), for the kernel's in-memory projections.
Committed = Callable[[Batch, int, int], None]


@dataclass(frozen=True)
class RebuildPlan:
    """What a rebuild of a group will do once its checks passed (docs/api.md
    §knowledge_rebuild_from_wal, the generation and data checks): `StorageMode.rebuild_plan`."""

    group_id: str
    from_seq: int  # 0: the whole group re-derived (purged first when it holds data)
    to_seq: int | None  # a bounded restore's last seq
    has_data: bool  # the group held rows when it was checked
    reset: bool  # the WAL's generation changed since it was applied: a full rebuild
    previous: str | None  # the generation the group was applied from
    generation: str | None  # the WAL's generation now
    steps: int  # a background job's progress total
    # Whether other groups' cross-group pointers into the group are re-resolved by name after
    # the replay (WAL files may have been re-minted or restored to an earlier seq, so positions
    # are not comparable; a server's stream is neither, and keeps the entities' uuids).
    rebinds: bool
    records: Sequence[WalRecord] = ()  # (server) the stream's lines the checks read

    @property
    def full(self) -> bool:
        return self.from_seq == 0


def _refuse_full_rebuild(group_id: str, dry_run: bool, force_clear: bool, tails: bool) -> None:
    """A full rebuild (`from_seq` 0) of a group that holds data: refused for a dry run, and
    without `force_clear` (`tails`: the mode can replay a tail instead, so say so).

    Raises:
        ConflictError: the rebuild is refused.
    """
    prefix = (
        f'knowledge_rebuild_from_wal: group "{group_id}" already contains data and '
        "from_seq: 0 is a full rebuild."
    )
    if dry_run:
        instead = " or pass a from_seq > 0" if tails else ""
        raise ConflictError(
            f"{prefix} A dry run cannot preview this cleanly — purge the group first{instead}."
        )
    if not force_clear:
        instead = ", or a from_seq > 0 to replay a tail" if tails else ""
        raise ConflictError(
            f"{prefix} Pass force_clear: true to purge the group and replay it{instead}."
        )


@dataclass(frozen=True)
class ModeParts:
    """The engine's own parts a mode works with (given once the engine is assembled)."""

    settings: Settings
    wal: Wal
    embedder: Embedder
    events: EventSink
    search: SearchIndex
    projections: Sequence[Projection]  # the name and search indexes (lcg.wal.projection)
    catchup: CatchUp
    problems: WalProblems
    follow: Follower
    checkpointer: Checkpointer
    lock: threading.RLock  # the engine's write lock
    prepare: Callable[[str, list[Op]], Batch]  # a batch with its vectors (no lock held)
    commit: Callable[[Sequence[Batch], Sequence[bytes] | None], list[tuple[int, int]]]


class StorageMode(ABC):
    """One storage mode: its store, its commit, positions, catch-up from the store, journal,
    reopening and closing. Methods that write expect the engine's write lock held."""

    # Whether the search and name indexes are saved beside local database files for the next
    # open (else they are built from the store at open).
    saves_indexes: ClassVar[bool]
    # Whether only this process writes the store (rows read from it may be kept in memory).
    exclusive_rows: ClassVar[bool]
    # Whether other processes commit to the store too (their commits are followed).
    follows: ClassVar[bool]

    _parts: ModeParts | None = None

    def bind(self, parts: ModeParts) -> None:
        """Called once by the engine that uses this mode, when its parts are built."""
        self._parts = parts

    @property
    def parts(self) -> ModeParts:
        if self._parts is None:
            raise RuntimeError("the storage mode is not bound to an engine")
        return self._parts

    @property
    @abstractmethod
    def store(self) -> GraphBackend | None:
        """The open database (None: none is open, the engine is degraded)."""

    def _db(self) -> GraphBackend:
        store = self.store
        if store is None:
            raise UnavailableError("no database is open")
        return store

    @abstractmethod
    def commit(
        self, batches: Sequence[Batch], committed: Committed, logged: Sequence[bytes] | None = None
    ) -> list[tuple[int, int]]:
        """Apply, log and position non-empty batches of several groups (write lock held);
        `committed(batch, first, last)` runs for each batch once it is durable. `logged`: one
        batch's WAL lines, verbatim (`lcg wal import`). Returns each batch's (first, last) seq.

        Raises:
            StorageError, WalError: nothing was applied or logged.
            GroupMovedError: (server) another process committed to a group first.
        """

    @abstractmethod
    def position(self, group_id: str) -> tuple[str | None, int]:
        """(generation, next seq) of the group's WAL, as this process's indexes reflect it."""

    @abstractmethod
    def stream(self, group_id: str, since: int) -> list[WalRecord] | None:
        """What other processes committed to the group from seq `since` on (None: no other
        process writes this store)."""

    @abstractmethod
    def check_planned(self, group_id: str, at: int) -> None:
        """Raise `GroupMovedError` when the group is no longer at `at`, the position a commit
        was planned against (nothing written; the engine catches up)."""

    @abstractmethod
    def catch_up_store(self, groups: Sequence[str] | None = None) -> int:
        """(Write lock held, at open.) Apply what the store's own streams hold beyond their
        graphs (None: every group); how many lines were applied."""

    @abstractmethod
    def journal(self) -> Store | None:
        """The local database whose journal the engine checkpoints (None: none to checkpoint)."""

    @abstractmethod
    def reopen(self, prepare: Callable[[Path], object]) -> GraphBackend:
        """Replace the database in place (`Engine.reopen`): `prepare(db_path)` runs while it
        is closed, and the database open afterwards is returned."""

    @abstractmethod
    def abandon(self) -> None:
        """A reopen failed after `reopen` returned: leave the engine as that failure does."""

    @abstractmethod
    def close(self) -> None:
        """Close the database (write lock held, the indexes saved)."""

    # -- what the admin passes ask of the mode ---------------------------------------------

    @abstractmethod
    def wal_groups(self) -> list[str]:
        """The groups that have a WAL, sorted."""

    @abstractmethod
    def wal_records(self, group_id: str) -> tuple[list[WalRecord], ReadStats]:
        """The group's WAL as replay reads it, and what that read left out."""

    @abstractmethod
    def wal_states(self, conn: GraphReader) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """`knowledge_status`'s `wal` (the default group's) and `wal_groups`
        (docs/api.md §status-wal)."""

    @abstractmethod
    def status(self) -> dict[str, Any]:
        """What `knowledge_status`'s `storage` holds beyond the store's own status."""

    def check_import(self, group_id: str, records: Sequence[WalRecord]) -> None:
        """Refuse (`InvalidRequestError`) a group's imported WAL this mode cannot hold."""
        return None

    @abstractmethod
    def import_group(
        self, group_id: str, batches: Sequence[tuple[list[Op], list[bytes]]], file_name: str
    ) -> None:
        """(Write lock not held: taken as needed.) Load a group that holds nothing yet from
        an imported WAL, given batch by batch as operations with their lines verbatim (`lcg
        wal import`); `file_name`: the WAL file that holds them, where the mode keeps files."""

    @abstractmethod
    def empty_store(self, preserve_wal: bool) -> None:
        """(Write lock held.) The first step of `knowledge_clear_all`, before the reopen:
        empty what the reopen does not (`preserve_wal`: keep each group's WAL, recorded as
        applied, so that nothing resurrects it before a rebuild)."""

    # -- a rebuild of a group from its WAL (lcg.admin.rebuild) ------------------------------

    @abstractmethod
    def rebuild_plan(
        self,
        conn: GraphReader,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        dry_run: bool,
        force_clear: bool,
    ) -> RebuildPlan:
        """The checks of a rebuild, read through `conn` (docs/api.md
        §knowledge_rebuild_from_wal, steps 4-8): the effective plan. A plan with `reset` set
        for a dry run is the dry run's whole answer (nothing further was checked).

        Raises:
            InvalidRequestError: the group has no WAL, or the mode cannot rebuild as asked;
            WalGenerationError, ConflictError: the rebuild is refused.
        """

    @abstractmethod
    def rebuild_dry_run(self, plan: RebuildPlan) -> tuple[ReplayReport, bool]:
        """Count what the rebuild would replay, writing nothing; and whether the dry run's
        result reports `indices_built`."""

    @abstractmethod
    def rebuild_replay(
        self,
        plan: RebuildPlan,
        dropping: Callable[[], None],
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[ReplayReport, PrebuiltSearch | None]:
        """(Write lock held.) Purge the group for a full rebuild when it holds data and replay
        its WAL into the store; `dropping()` runs just before the store changes where the
        group's indexes go stale while it does. Returns the replay's report and the search
        partitions its bulk load built (None: none). What every replay leaves behind
        (`Aftermath.rebuilt`, lcg.engine.aftermath; the indexes) is the caller's.

        Raises:
            ConflictError: (server) another process committed to the group meanwhile.
        """


class EmbeddedMode(StorageMode):
    """The local Kuzu store and the workspace's JSONL WAL (this process owns both)."""

    saves_indexes = True
    exclusive_rows = True
    follows = False

    def __init__(self, store: KuzuBackend | None) -> None:
        # A move from the other embedded engine this open made or finished (lcg.engine.carryover).
        self.carry_over: CarryOver | None = None
        self._store = store

    @property
    def store(self) -> KuzuBackend | None:
        return self._store

    def commit(
        self, batches: Sequence[Batch], committed: Committed, logged: Sequence[bytes] | None = None
    ) -> list[tuple[int, int]]:
        if logged is not None:
            raise InvalidRequestError(
                "WAL lines are imported verbatim into a server store only; the embedded store "
                "replays its WAL files",
                field="directory",
            )
        parts, db, wal = self.parts, self._db(), self.parts.wal
        appended: list[tuple[str, int, int]] = []
        body_done = False
        try:
            with db.transaction() as tx:
                for batch in batches:
                    if batch.apply is not None:
                        batch.apply(tx)
                    else:
                        tx.apply_ops(batch.group_id, batch.ops, batch.new)
                    stamps = first_vectors(tx, batch)
                    tx.put_embeddings(batch.vectors, new=batch.new)
                    tx.delete_embeddings(batch.stale)
                    settle_stamp(tx, batch, stamps, parts.embedder.identity)
                # Several batches: each head line names the seqs of all (a crash between two
                # appends is cut at startup, never replayed by halves: lcg.wal.writer).
                mark = wal.plan_commit([(b.group_id, len(b.ops)) for b in batches])
                for batch in batches:
                    stream = wal.stream(batch.group_id)
                    first, last = stream.append(batch.ops, mark)
                    appended.append((batch.group_id, first, last))
                    write_position(tx, batch.group_id, last, stream.generation)
                body_done = True
        except BaseException:
            if not appended or not self._recover_failed_commit(appended, body_done):
                raise
        for batch, (_, first, last) in zip(batches, appended, strict=True):
            committed(batch, first, last)
            stream = wal.stream(batch.group_id)
            while stream.rotated:
                closed, opened = stream.rotated.pop(0)
                parts.events.emit(
                    "wal_rotated",
                    group_id=batch.group_id,
                    closed_file=str(closed),
                    new_file=str(opened),
                )
        parts.checkpointer.after_commit()  # a due checkpoint runs after this commit returns
        return [(first, last) for _, first, last in appended]

    def _recover_failed_commit(self, appended: list[tuple[str, int, int]], body_done: bool) -> bool:
        """A commit failed after WAL lines were written: make the WAL and the DB agree again.

        Returns True when the write turned out to be committed (the COMMIT raised but the
        positions it set are visible), False when it was rolled back and its lines were removed.
        """
        if body_done:
            with self._db().read_for_write() as conn:
                if all(
                    (applied_position(conn, g) or (None, None))[0] == last
                    for g, _, last in appended
                ):
                    return True
        for group_id, first, _ in appended:
            try:
                self.parts.wal.stream(group_id).truncate_from(first)
            except WalError:
                # The lines are durable and cannot be removed: apply them so the DB matches.
                logger.exception(
                    "could not remove WAL lines of group %r; applying them instead", group_id
                )
                self.parts.catchup.catch_up(group_id)
        return False

    def position(self, group_id: str) -> tuple[str | None, int]:
        wal = self.parts.wal
        if not wal.directory(group_id).is_dir():
            return (None, 0)
        stream = wal.stream(group_id)
        return (stream.generation, stream.next_seq)

    def stream(self, group_id: str, since: int) -> list[WalRecord] | None:
        return None

    def check_planned(self, group_id: str, at: int) -> None:
        return None  # this process is the store's only writer: nothing moves under it

    def catch_up_store(self, groups: Sequence[str] | None = None) -> int:
        return 0  # the store keeps no WAL: the catch-up replays the workspace's WAL files

    def journal(self) -> Store | None:
        return None if self._store is None else self._store.store

    def reopen(self, prepare: Callable[[Path], object]) -> KuzuBackend:
        settings = self.parts.settings
        store, self._store = self._store, None
        if store is not None:
            # New reads now fail as degraded; let the reads already running finish first.
            if not store.store.wait_idle(_READERS_DRAIN_SECONDS):
                logger.warning("reopening the database with reads still running")
            store.close()
        self.parts.wal.close()
        prepare(settings.db_path)
        self._store = KuzuBackend(open_store(settings))
        return self._store

    def abandon(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def wal_groups(self) -> list[str]:
        return sorted(self.parts.wal.groups())

    def wal_records(self, group_id: str) -> tuple[list[WalRecord], ReadStats]:
        stats = ReadStats()
        directory = self.parts.wal.directory(group_id)
        return list(iter_records(directory, stats=stats)), stats

    def wal_states(self, conn: GraphReader) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        wal = self.parts.wal
        default_dir = group_dir(wal.root, DEFAULT_GROUP_ID)
        files = ordered_files(default_dir)
        default = {
            "exists": default_dir.is_dir(),
            "file_count": len(files),
            "byte_size": sum(p.stat().st_size for p in files),
            **self._wal_state(conn, DEFAULT_GROUP_ID),
        }
        return default, {g: self._wal_state(conn, g) for g in wal.groups()}

    def _wal_state(self, conn: GraphReader, group_id: str) -> dict[str, Any]:
        bounds = self.parts.wal.bounds(group_id)
        generation = self.parts.wal.generation(group_id)
        position = applied_position(conn, group_id)
        applied = position[0] if position else None
        max_seq = bounds.max_seq
        if generation is not None:
            gen_status = "known"
        elif max_seq is None:
            gen_status = "not_applicable"
        else:
            gen_status = "unknown"
        if max_seq is None or max_seq == 0:
            hydration = "not_applicable"
        elif (applied if applied is not None else 0) >= max_seq:
            hydration = "hydrated"
        else:
            hydration = "wal_ahead"
        return {
            "applied_seq": applied,
            "max_seq": max_seq,
            "generation": generation,
            "generation_status": gen_status,
            "hydration_status": hydration,
        }

    def status(self) -> dict[str, Any]:
        return {} if self.carry_over is None else {"carry_over": self.carry_over.status()}

    def import_group(
        self, group_id: str, batches: Sequence[tuple[list[Op], list[bytes]]], file_name: str
    ) -> None:
        """The lines copied into the group's WAL directory, then the group caught up from
        them (the bulk replay of startup)."""
        parts = self.parts
        with parts.lock:
            directory = parts.wal.directory(group_id)
            private_dir(directory)
            path = directory / file_name
            with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL), "wb") as f:
                for _, lines in batches:
                    for line in lines:
                        f.write(line)
                f.flush()
                os.fsync(f.fileno())
            fsync_dir(directory)
            parts.wal.drop_stream(group_id)
            parts.wal.stream(group_id)  # its generation, minted now
            parts.catchup.catch_up(group_id)
            for projection in parts.projections:  # replayed: each reloads the group
                projection.reload([group_id])

    def empty_store(self, preserve_wal: bool) -> None:
        return None  # the reopen's `prepare` deletes the database files themselves

    def _rebuild_directory(self, group_id: str) -> Path:
        """The group's WAL directory, if it holds any WAL file (docs/api.md
        §knowledge_rebuild_from_wal, the WAL directory check)."""
        directory = self.parts.wal.directory(group_id)
        if not directory.is_dir() or not any(directory.glob("*.jsonl")):
            raise InvalidRequestError(f"No WAL files found at {directory}", field="group_id")
        return directory

    def rebuild_plan(
        self,
        conn: GraphReader,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        dry_run: bool,
        force_clear: bool,
    ) -> RebuildPlan:
        """The WAL files' generation decides: a generation changed since the group was
        applied is a reset (a full rebuild whatever was asked)."""
        directory = self._rebuild_directory(group_id)
        wal = self.parts.wal
        position = applied_position(conn, group_id)
        has_data = group_has_data(conn, group_id)
        applied, previous = position if position else (None, None)
        generation = wal.generation(group_id)
        if applied is not None and generation is None:
            raise WalGenerationError(
                f'group "{group_id}": {directory}/.wal-generation.json is absent or unreadable — '
                "republish the full WAL directory including its dot-files, or create the file by "
                'hand with {"generation": "<any unique string>"}'
            )
        reset = applied is not None and generation != previous
        steps = len(ordered_files(directory))
        if reset and not dry_run:
            from_seq, to_seq, force_clear = 0, None, True
        if from_seq == 0 and has_data and not (reset and dry_run):
            _refuse_full_rebuild(group_id, dry_run, force_clear, tails=True)
        full = from_seq == 0
        return RebuildPlan(
            group_id, from_seq, to_seq, has_data, reset, previous, generation, steps, full
        )

    def rebuild_dry_run(self, plan: RebuildPlan) -> tuple[ReplayReport, bool]:
        """The lines the replay would read, and what it would leave out; no index is built."""
        stats = ReadStats()
        directory = self._rebuild_directory(plan.group_id)
        report = ReplayReport(plan.group_id, plan.from_seq, plan.to_seq, mode="dry_run")
        records = iter_records(directory, plan.from_seq, plan.to_seq, stats)
        report.mutations_replayed = sum(1 for _ in records)
        report.unparseable_lines = stats.unparseable
        report.unrecognised_lines = stats.unrecognised
        report.torn_tail_lines = stats.torn_tail
        report.incomplete_batch_lines = stats.incomplete_batch_lines
        report.corrupt_batch_lines = stats.corrupt_batch_lines
        report.lost = stats.lost
        report.wal_files_processed = stats.files_processed
        return report, False

    def rebuild_replay(
        self,
        plan: RebuildPlan,
        dropping: Callable[[], None],
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[ReplayReport, PrebuiltSearch | None]:
        """The catch-up's replay of the WAL files (bulk for a full rebuild, building the
        group's search partitions from its rows), then the group's stream floored past every
        seq the database holds (it was dropped), and a bounded restore's later lines held back
        from the next open's catch-up."""
        parts, db, catchup = self.parts, self._db(), self.parts.catchup
        group_id, generation = plan.group_id, plan.generation
        directory = self._rebuild_directory(group_id)
        dropping()
        parts.wal.drop_stream(group_id)
        if plan.full and plan.has_data:
            with db.transaction() as tx:
                tx.purge_group(group_id)
                write_position(tx, group_id, None, generation)
        prebuilt = catchup.prebuilt_search()
        report = catchup.replay(
            db,
            directory,
            group_id,
            parts.embedder,
            generation=generation,
            from_seq=plan.from_seq,
            to_seq=plan.to_seq,
            bulk_load=plan.full,
            batch_size=parts.settings.replay_batch_size,
            progress=progress,
            loaded=prebuilt,
        )
        parts.problems.check_database_ahead([group_id])  # its stream was dropped: floor it
        max_seq = parts.wal.bounds(group_id).max_seq
        if (
            plan.to_seq is not None
            and max_seq is not None
            and report.last_committed_seq is not None
            and plan.to_seq < max_seq
        ):
            # A bounded restore: keep the later lines from being replayed at the next open.
            with db.transaction() as tx:
                write_position(tx, group_id, report.last_committed_seq, generation, max_seq)
        return report, prebuilt


class ServerMode(StorageMode):
    """A store that keeps each group's WAL as a stream next to its graph (a FalkorDB server),
    written by several processes."""

    saves_indexes = False
    exclusive_rows = False
    follows = True

    def __init__(self, store: GraphBackend) -> None:
        self._store: GraphBackend | None = store

    @property
    def store(self) -> GraphBackend | None:
        return self._store

    def commit(
        self, batches: Sequence[Batch], committed: Committed, logged: Sequence[bytes] | None = None
    ) -> list[tuple[int, int]]:
        """Each group's batch with its lines in one `GraphBackend.commit`, one group after
        another."""
        follow = self.parts.follow
        done: list[tuple[int, int]] = []
        for batch in batches:
            at = None if logged is not None else follow.at(batch.group_id)
            first, last = self._commit_one(batch, logged, at)
            done.append((first, last))
            follow.committed(batch.group_id, first, last)
            committed(batch, first, last)
        return done

    def _commit_one(
        self, batch: Batch, logged: Sequence[bytes] | None, at: int | None
    ) -> tuple[int, int]:
        """`commits.store_commit` at position `at` (the one the batch was planned against;
        None: the store's), after applying what the group's stream holds beyond its graph: a
        stream ahead of its graph (a commit whose graph change failed after its append) would
        otherwise take this batch in at seqs the stream already gave away, since the
        graph-side guard sees only the graph's position.

        Raises:
            GroupMovedError: the group moved (lines were caught up, or another writer got
                there first): nothing of the batch applied; catch up, plan again and retry
                (`lcg.engine.follow`).
        """
        db = self._db()
        moved = self.catch_up_store([batch.group_id])
        if moved:
            with db.read() as r:
                now_at = r.position(batch.group_id)
            raise GroupMovedError(batch.group_id, (now_at or 0) - moved, now_at)
        try:
            return store_commit(db, batch, self.parts.embedder.identity, logged, at)
        except GroupMovedError:  # a stream ahead of its graph is repaired before the retry
            self.catch_up_store([batch.group_id])
            raise

    def position(self, group_id: str) -> tuple[str | None, int]:
        # No generation: a server's stream is never re-minted.
        return (None, self.parts.follow.at(group_id))

    def stream(self, group_id: str, since: int) -> list[WalRecord] | None:
        return self._db().stream_records(group_id, since)

    def check_planned(self, group_id: str, at: int) -> None:
        now_at = self.parts.follow.at(group_id)
        if at != now_at:
            raise GroupMovedError(group_id, at, now_at)

    def catch_up_store(self, groups: Sequence[str] | None = None) -> int:
        """Drops the search partitions of the groups that moved; the caller reloads the names
        when it is not 0."""
        store = self._db()
        if groups is None:
            with store.read() as r:
                groups = r.group_ids()
        applied = 0
        for group_id in groups:
            n = store.catch_up(group_id)
            if n:
                logger.info("group %r: applied %d WAL lines from the store's stream", group_id, n)
                self.parts.search.invalidate([group_id])
                applied += n
        return applied

    def journal(self) -> Store | None:
        return None  # a server checkpoints itself

    def reopen(self, prepare: Callable[[Path], object]) -> GraphBackend:
        """The store stays connected (the caller changed what it holds); `prepare` sees the
        workspace's local database path."""
        prepare(self.parts.settings.db_path)
        return self._db()

    def abandon(self) -> None:
        return None  # still connected: the engine keeps serving from the server

    def close(self) -> None:
        store, self._store = self._store, None
        if store is not None:
            store.close()

    def wal_groups(self) -> list[str]:
        with self._db().read() as r:
            return sorted(r.group_ids())

    def wal_records(self, group_id: str) -> tuple[list[WalRecord], ReadStats]:
        return self._db().stream_records(group_id), ReadStats()

    def wal_states(self, conn: GraphReader) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
        """Per group, the stream (`stream`, `entries`, `byte_size`), `max_seq` its last line,
        `applied_seq` the last line the group's graph holds; no generation (a server's stream
        is never re-minted). `wal` is the default group's, with `exists` and `file_count` 0
        (no files)."""
        store = self._db()

        def state(group_id: str) -> dict[str, Any]:
            bounds = store.stream_bounds(group_id) or {}
            max_seq = bounds.get("max_seq")
            held = conn.position(group_id) or 0
            applied = held - 1 if held else None
            if max_seq is None:
                hydration = "not_applicable"
            else:
                hydration = (
                    "hydrated" if applied is not None and applied >= max_seq else "wal_ahead"
                )
            return {
                "applied_seq": applied,
                "max_seq": max_seq,
                "generation": None,
                "generation_status": "not_applicable",
                "hydration_status": hydration,
                "stream": bounds.get("stream"),
                "entries": bounds.get("entries", 0),
                "byte_size": bounds.get("byte_size", 0),
            }

        groups = {g: state(g) for g in sorted({*conn.group_ids(), DEFAULT_GROUP_ID})}
        default = groups[DEFAULT_GROUP_ID]
        wal = {"exists": default["entries"] > 0, "file_count": 0, **default}
        return wal, {g: s for g, s in groups.items() if s["entries"] or g != DEFAULT_GROUP_ID}

    def status(self) -> dict[str, Any]:
        return {"follower": self.parts.follow.status()}  # other processes' commits, followed

    def empty_store(self, preserve_wal: bool) -> None:
        """Drop each group's graph and stream, or, to preserve the WAL, delete every row and
        meta entry of the group but keep its stream and its position at the stream's end (as
        the embedded store records each stream as applied), so a rebuild from the stream
        brings the graph back and nothing resurrects it before."""
        store = self._db()
        with store.read() as r:
            groups = r.group_ids()
            metas = {g: r.meta_with_prefix("", g) for g in groups} if preserve_wal else {}
        for group in groups:
            if not preserve_wal:
                store.drop_group(group)
                continue
            with store.transaction() as tx:
                tx.purge_group(group)
                for key in metas[group]:
                    tx.set_meta(key, None, group)

    def check_import(self, group_id: str, records: Sequence[WalRecord]) -> None:
        """A server stream holds contiguous seqs from 0 only."""
        for before, after in itertools.pairwise(records):
            if after.seq != before.seq + 1:
                raise InvalidRequestError(
                    f"group {group_id!r}: the WAL skips from seq {before.seq} to {after.seq}; a "
                    "server stream holds contiguous seqs only: nothing was imported",
                    field="directory",
                )
        if records and records[0].seq != 0:
            raise InvalidRequestError(
                f"group {group_id!r}: the WAL starts at seq {records[0].seq}, not 0; a server "
                "stream starts at 0: nothing was imported",
                field="directory",
            )

    def import_group(
        self, group_id: str, batches: Sequence[tuple[list[Op], list[bytes]]], file_name: str
    ) -> None:
        """Batch by batch, committed with the lines verbatim, so the server's stream holds
        the same lines (and exports the same bytes)."""
        parts = self.parts
        for ops, lines in batches:
            prepared = parts.prepare(group_id, ops)  # embeds: no lock held
            with parts.lock:
                parts.commit([prepared], lines)

    def rebuild_plan(
        self,
        conn: GraphReader,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        dry_run: bool,
        force_clear: bool,
    ) -> RebuildPlan:
        """The group's stream (from `from_seq` on) is read now, for the dry run and the fold;
        a stream is never re-minted (no reset) and cannot be restored to an earlier seq."""
        db = self._db()
        if to_seq is not None:
            raise InvalidRequestError(
                f"on LCG_STORAGE={db.backend} to_seq is refused: a group's graph always holds "
                "its whole stream (the position every process's commit is checked against), so "
                "it cannot be restored to an earlier seq without cutting acknowledged lines "
                "from the stream; a bounded restore replays the embedded store's WAL files",
                field="to_seq",
            )
        records = db.stream_records(group_id, from_seq)
        if not records and not (db.stream_bounds(group_id) or {}).get("entries"):
            raise InvalidRequestError(
                f"No WAL stream found for group '{group_id}' on the server", field="group_id"
            )
        # A tail: the lines applied again on top of the group's rows (none when from_seq is
        # past the stream's end, as with the WAL files).
        has_data = from_seq == 0 and group_has_data(conn, group_id)
        if has_data:
            _refuse_full_rebuild(group_id, dry_run, force_clear, tails=False)
        return RebuildPlan(group_id, from_seq, None, has_data, False, None, None, 1, False, records)

    def rebuild_dry_run(self, plan: RebuildPlan) -> tuple[ReplayReport, bool]:
        report = ReplayReport(plan.group_id, plan.from_seq, None, mode="dry_run")
        report.mutations_replayed = len(plan.records)
        return report, True

    def rebuild_replay(
        self,
        plan: RebuildPlan,
        dropping: Callable[[], None],
        progress: Callable[[dict[str, Any]], None] | None = None,
    ) -> tuple[ReplayReport, PrebuiltSearch | None]:
        """Full (`from_seq` 0): fold every line, then purge the group and bulk-load the fold
        in one commit of the group (all or nothing). A tail (`from_seq` > 0): the lines from
        `from_seq` on applied again to the group's rows, in order, in one unit guarded at the
        group's position (`GraphBackend.replay_tail`: a commit of another process meanwhile
        applies nothing). One unit either way: `progress` has nothing to report.

        Raises:
            InvalidRequestError: the stream holds raw Cypher operations; ConflictError:
                another process committed to the group during a tail (send it again).
        """
        db, group_id, records = self._db(), plan.group_id, plan.records
        report = ReplayReport(
            group_id, plan.from_seq, None, mode="bulk" if plan.full else "incremental"
        )
        if not plan.full:
            try:
                report.mutations_replayed = db.replay_tail(group_id, plan.from_seq)
            except GroupMovedError as exc:
                raise ConflictError(
                    f"group '{group_id}' moved during the tail rebuild (another process "
                    "committed to it): nothing was applied, send it again"
                ) from exc
            report.transactions_committed = 1
            report.last_committed_seq = records[-1].seq if records else None
            return report, None
        folded = fold(group_id, list(records))
        if folded.needs_statement_replay:
            raise InvalidRequestError(
                f"group {group_id!r}: its stream holds raw Cypher operations, which do not "
                f"run on LCG_STORAGE={db.backend}",
                field="group_id",
            )
        report.unrecognised_lines = folded.unrecognised
        report.noop_lines = folded.noops
        report.failed_lines = len(folded.failures)
        rows = plan_for_rows(
            folded.entities.values(), folded.facts.values(), folded.episodes.values()
        )
        vectors = embed_plan(rows, self.parts.embedder)
        dropping()
        with db.transaction() as tx:
            tx.purge_group(group_id)
            tx.load_folded(folded, vectors)
        report.transactions_committed = 1
        report.mutations_replayed = folded.applied
        report.last_committed_seq = folded.last_seq
        return report, None
