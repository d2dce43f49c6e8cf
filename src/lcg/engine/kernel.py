"""`Engine`, the kernel: lifecycle, startup catch-up, reads, the commit primitive (`write`,
`writer`, `commit_episode`) and name resolution over one workspace's store, WAL and embedder.
Everything else is a function of its area built on these (see README.md in this directory).

Invariants it keeps:
- **WAL before acknowledgement.** A write is applied inside a DB transaction, appended to the WAL
  (fsync) while that transaction is open, its group's applied position is set in the same
  transaction, and only then committed. A failure before the append leaves no trace; a crash
  after it is repaired by replaying the tail at the next open.
- **One writer.** Writes are serialised by `_write_lock`; reads run in parallel on their own
  connections (Kuzu gives them snapshot isolation). Embedding happens before the lock is taken.
- **Validated before anything.** Engine methods receive typed, validated arguments (the
  registry's params models); what can only be checked against the graph is checked inside the
  write transaction, before the WAL append.

`read`, `write`, `commit_episode` and `entity_by_name` are async (anyio; the Kuzu work runs in
worker threads); `reader` and `writer` are for code already in a worker thread.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import ParamSpec, TypeVar

import anyio.to_thread

from lcg.config import Settings
from lcg.embedding.base import Embedder
from lcg.embedding.select import build_embedder
from lcg.embedding.vectors import embed_plan, plan_for_changes
from lcg.engine import applied
from lcg.engine.aftermath import Aftermath
from lcg.engine.carryover import move_aside, settle
from lcg.engine.catchup import CatchUp, Replay
from lcg.engine.checkpointer import Checkpointer
from lcg.engine.commits import Batch, EpisodeCommit, check_commit_references, episode_ops
from lcg.engine.follow import Follower, retrying
from lcg.engine.jobs import JobTable
from lcg.engine.modes import EmbeddedMode, ModeParts, ServerMode, StorageMode
from lcg.engine.namekeeper import NameKeeper
from lcg.engine.names import NameIndex, Names
from lcg.engine.parts import EngineState, Parts
from lcg.engine.replay import ReplayReport, applied_position, replay_group
from lcg.engine.walproblems import WalProblems
from lcg.engine.walscan import WalScan
from lcg.engine.warmup import SearchWarmup
from lcg.errors import UnavailableError
from lcg.extraction.llm import LlmClient
from lcg.extraction.select import LlmSlot
from lcg.fsmodes import private_dir
from lcg.models import Entity
from lcg.search.floor import vector_floor
from lcg.search.index import SearchIndex
from lcg.search.snapshot import Snapshots
from lcg.storage.backend import GraphBackend, GraphReader, GroupMovedError
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.select import open_backend
from lcg.telemetry import EventSink, NullSink
from lcg.wal.changes import decode_all
from lcg.wal.projection import Projection, SavedProjection
from lcg.wal.records import Op, WalRecord
from lcg.wal.writer import Wal

__all__ = ["Engine", "Writer", "open_engine"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")


class Writer:
    """The writer, while `Engine.writer()` holds the write lock: reads on the writer connection
    (never waiting for a pooled reader, which under load are all busy) and commits."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextlib.contextmanager
    def connection(self) -> Iterator[GraphReader]:
        """The writer connection (reads; writes go through `commit`)."""
        with self._engine._db.read_for_write() as conn:
            yield conn

    def read(self, fn: Callable[[GraphReader], T]) -> T:
        with self.connection() as conn:
            return fn(conn)

    def position(self, group_id: str) -> tuple[str | None, int]:
        """(generation, next seq) of the group's WAL, wherever it is kept; on a server, the
        position this process's indexes reflect (`lcg.engine.follow`)."""
        self._engine._db  # noqa: B018 -- degraded: UnavailableError, as any read
        return self._engine._mode.position(group_id)

    def stream(self, group_id: str, since: int) -> list[WalRecord] | None:
        """On a server, the group's WAL lines from seq `since` on (what other processes
        committed, for an area's own caches); None on the embedded store."""
        self._engine._db  # noqa: B018 -- degraded: UnavailableError, as any read
        return self._engine._mode.stream(group_id, since)

    def commit(self, batches: Sequence[Batch | tuple[str, list[Op]]]) -> list[tuple[int, int]]:
        """Apply, log and commit batches of several groups atomically: per group one WAL batch,
        all in one transaction. Returns each batch's (first, last) seq."""
        return self._engine._commit_planned(batches)


class Engine:
    """The context graph: one workspace's store, WAL and embedder.

    Its surface: `settings`, `parts` (what it was assembled from), `state` (its health), `names`,
    `ingest`, the reads (`read`, `reader`), the writes (`write`, `writer`, `commit_episode`),
    `entity_by_name`, `close` and `reopen`; `open_engine` builds one.
    """

    def __init__(
        self,
        settings: Settings,
        mode: StorageMode,
        wal: Wal,
        embedder: Embedder,
        events: EventSink | None = None,
        *,
        replay: Replay = replay_group,
        jobs: JobTable | None = None,
        llm: LlmClient | None = None,
        ingest: object | None = None,
        degraded_reason: str = "unknown",
    ) -> None:
        self.settings = settings
        events = events or NullSink()
        self._mode = mode  # chosen once, by `open_engine` (lcg.engine.modes)
        self._wal = wal
        self._write_lock = threading.RLock()
        self._names = NameIndex()
        # Saved next to an embedded database only, as the search index (lcg.engine.namekeeper).
        saved_names = settings.db_path.parent / "name-index" if mode.saves_indexes else None
        self._name_keeper = NameKeeper(lambda: self._db, self._names, saved_names)
        self.names = Names(self._names, self._name_keeper.reload)
        self._search = SearchIndex(
            self._read,
            embedder,
            vector_floor(embedder.identity, settings.search_vector_floor),
            Snapshots(
                settings.db_path.parent / "search-index",
                lambda group: self._read(lambda conn: applied_position(conn, group)),
            )
            # Only beside local database files (in server mode the workspace keeps none, and
            # the index is built from the server at open).
            if mode.saves_indexes
            else None,
            # Rows hydrated from a store only this process writes (lcg.search.rows).
            cache_rows=mode.exclusive_rows,
        )
        # The language model is built from the settings on first use unless given.
        self.parts = Parts(wal, embedder, events, self._search, LlmSlot(settings, events, llm))
        # The ingest pipeline (lcg.ingest: an area the kernel does not import), built on the
        # first ingest unless given: reached through the engine, never through a side table.
        self.ingest = ingest
        # The in-memory projections of the WAL, in the order each follows a commit: the name
        # index, then the search index (lcg.wal.projection); both saved at close.
        self._projections: tuple[Projection, ...] = (self._name_keeper, self._search)
        self._problems = WalProblems(lambda: self._db, wal, events)
        self._aftermath = Aftermath(
            lambda: self._db,
            settings,
            embedder,
            events,
            self._problems,
            self._search,
            self._name_keeper,
        )
        self._catchup = CatchUp(
            lambda: self._db,
            wal,
            settings,
            embedder,
            replay,
            self._aftermath,
            self._name_keeper,
            self._search,
        )
        self._warmup = SearchWarmup(lambda: self._db, settings, embedder, self._search)
        # Server mode: other processes' commits, followed into the indexes (lcg.engine.follow).
        self._follow = Follower(
            lambda: self._db,
            self._write_lock,
            self._projections,
            self._search,
            embedder,
            follows=mode.follows,
        )
        self._indices_built = False
        self._scan = WalScan(wal, self._problems, self._write_lock)  # started after the open
        self._jobs = jobs if jobs is not None else JobTable()
        self._checkpointer = Checkpointer(
            mode.journal, self._write_lock, settings.checkpoint_wal_bytes
        )
        mode.bind(
            ModeParts(
                settings,
                wal,
                embedder,
                events,
                self._search,
                self._projections,
                self._catchup,
                self._problems,
                self._follow,
                self._checkpointer,
                self._write_lock,
                self._prepare,
                self._commit,
            )
        )
        # Set when no database is open (store None): the service then runs degraded.
        self._degraded_reason = None if mode.store is not None else degraded_reason

    # -- plumbing --------------------------------------------------------------------------

    @property
    def _store(self) -> GraphBackend | None:
        return self._mode.store

    @property
    def _db(self) -> GraphBackend:
        if self._store is None:
            raise UnavailableError(self._degraded_reason or "unknown")
        return self._store

    @property
    def state(self) -> EngineState:
        """Whether a database is open (else why not) and whether the search index is loaded."""
        return EngineState(
            self._degraded_reason if self._store is None else None, self._indices_built
        )

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    @contextlib.contextmanager
    def reader(self) -> Iterator[GraphReader]:
        """A pooled reader connection (a snapshot), for code already in a worker thread."""
        with self._db.read() as conn:
            yield conn

    def _read(self, fn: Callable[[GraphReader], T]) -> T:
        with self.reader() as conn:
            return fn(conn)

    async def read(self, fn: Callable[[GraphReader], T]) -> T:
        """Run `fn` on a pooled reader connection in a worker thread (subsystems' reads)."""
        return await self._run(self._read, fn)

    @contextlib.contextmanager
    def writer(self) -> Iterator[Writer]:
        """Hold the write lock for a pass of several reads and commits (in a worker thread).

        The pass reads on the writer connection and commits through the commit primitive; it
        never calls a model (embed before entering). A commit that lost the race to another
        process raises `GroupMovedError` once the lock is released and this engine caught up
        with the group: plan again and retry (`lcg.engine.follow.retrying`)."""
        try:
            with self._write_lock:
                yield Writer(self)
        except GroupMovedError as exc:
            self._follow.moved(exc.group_id)
            raise

    def _startup(self) -> list[ReplayReport]:
        """Repair torn WAL tails, catch every group up to its WAL, load the name and search indexes.

        Returns the replay report of each group that had WAL lines to apply.
        """
        with self._write_lock:
            for torn in self._wal.open_all():
                logger.warning(
                    "WAL %s: cut a torn final line (%d bytes) left by a crash",
                    torn.path,
                    torn.bytes_dropped,
                )
                self.parts.events.emit(
                    "wal_torn_tail",
                    group_id=torn.group_id,
                    path=str(torn.path),
                    bytes_dropped=torn.bytes_dropped,
                    lines=torn.lines,
                )
                self._problems.record_torn(torn)
            self._problems.check_mark_files()
            self._problems.check_database_ahead()
            self._problems.check_gaps()  # after it: seqs only the database held are no gap
            self._mode.catch_up_store()
            self._follow.reset()  # before the indexes load: they hold at least that much
            # Before the replays: a bulk replay installs the partitions it built from its rows.
            self._search.reset()
            journal = self._mode.journal()
            crashed = journal is not None and journal.journal_at_open > 0
            reports = (
                applied.check(self._catchup, self._db, self._wal, self._problems, self.parts.events)
                if crashed
                else []
            )
            failed: set[str] = set()
            for group in self._wal.groups():
                report = self._catchup.catch_up(group)
                if report is not None:
                    reports.append(report)
                    if report.mode == "bulk" and report.transactions_rolled_back:
                        failed.add(group)
            if failed:
                reports += self._load_again(failed)
            if reports:
                self._aftermath.rewire_cross_group()
            self._name_keeper.load()
        self._indices_built = self._warmup.warm()
        return reports

    def _load_again(self, failed: set[str]) -> list[ReplayReport]:
        """(At open, after a bulk load failed.) Catch up once more every group but the failed
        ones: a bulk load that failed after its COPY starts a database holding only this
        open's bulk loads over empty (lcg.storage.store), so the groups loaded before it lost
        their rows. A failed group waits for the next open (its failure is in the replay
        report and `wal_problems`): loading it again here could fail the same way."""
        again: list[ReplayReport] = []
        for group in self._wal.groups():
            if group in failed:
                continue
            report = self._catchup.catch_up(group)
            if report is not None:
                logger.warning("group %r: loaded again after a failed bulk load", group)
                again.append(report)
        return again

    def close(self) -> None:
        # A background rebuild commits per batch and holds the write lock while it runs: wait
        # for it to end rather than closing the store under it (jobs are not resumed later).
        self._jobs.join()
        self._scan.stop()
        self._follow.stop()
        self._checkpointer.stop()  # after the checkpoint it may be running
        with self._write_lock:
            if self._store is not None:
                self._save_projections()
            self._wal.close()
            self._wal.unlock()
            self._mode.close()

    def _save_projections(self) -> None:
        """(Write lock held, at close.) Save the search and name indexes for the next open:
        derived data, so a failed save only means rebuilding it at the next open."""
        saved: tuple[tuple[str, SavedProjection], ...] = (
            ("search index", self._search),
            ("name index", self._name_keeper),
        )
        for name, projection in saved:
            try:
                projection.save()
            except Exception:
                logger.exception("%s: could not save it for the next open", name)

    def reopen(
        self,
        prepare: Callable[[Path], object],
        *,
        failed_reason: str,
        on_open: Callable[[GraphBackend], object] | None = None,
        catch_up: bool = True,
    ) -> list[ReplayReport]:
        """Replace the database in place: close it, `prepare(db_path)`, open it, catch up.

        `on_open(store)`, if given, sees the reopened database before the catch-up. Without
        `catch_up` the database is taken as it is (an empty one, for `knowledge_clear_all`):
        the name index starts empty and the search index unloaded.

        Callers (lcg.admin.recover, lcg.admin.clear), such as the service holding this Engine,
        keep the same object. The caller must hold the write lock. Returns the startup
        catch-up reports. If `prepare` or the reopening raises, the engine is left degraded
        with `failed_reason` (no store) and the error propagates.
        """
        self._degraded_reason = failed_reason  # reported while no database is open
        self._indices_built = False
        fresh = self._mode.reopen(prepare)
        try:
            if on_open is not None:
                on_open(fresh)
            if catch_up:
                reports = self._startup()
            else:
                reports = []
                self._names.load([])
                self._search.reset()
        except BaseException:
            self._mode.abandon()
            raise
        self._degraded_reason = None
        return reports

    # -- the commit primitive --------------------------------------------------------------

    def _prepare(self, group_id: str, ops: list[Op], *, cache_only: bool = False) -> Batch:
        """Plan and compute a batch's vectors, and those of its long episodes' windows (no lock
        held, unless `cache_only`: then only cached vectors are used and the model is never
        called)."""
        changes = decode_all(ops, group_id)  # a malformed op: refused here
        plan = plan_for_changes(changes)
        vectors = embed_plan(plan, self.parts.embedder, cache_only=cache_only)
        if not cache_only:  # the windows of long episodes, into the cache `apply` reads them from
            self._search.embed_windows(changes)
        return Batch(group_id, ops, vectors, plan.stale, decoded=changes)

    def _commit(
        self, batches: Sequence[Batch], logged: Sequence[bytes] | None = None
    ) -> list[tuple[int, int]]:
        """The one commit path (write lock held): apply, log and commit batches of several
        groups, made durable by the storage mode (`StorageMode.commit`: on the embedded store
        one transaction for all of them; on a server one commit per group), then the name and
        search indexes follow each batch (`_committed`). `logged`: one batch's WAL lines,
        verbatim (`lcg wal import`). Returns each batch's (first, last) seq.

        Raises:
            StorageError, WalError: nothing was applied or logged.
            GroupMovedError: (server) another process committed to a group first.
        """
        batches = [b for b in batches if b.ops]
        if not batches:
            return []
        return self._mode.commit(batches, self._committed, logged)

    def _committed(self, batch: Batch, first: int, last: int) -> None:
        """A batch is durable: the in-memory projections take its operations, decoded once
        (`Batch.changes`)."""
        changes = batch.changes
        for projection in self._projections:
            projection.apply(batch.group_id, changes, batch.vectors)

    def _commit_planned(
        self, batches: Sequence[Batch | tuple[str, list[Op]]]
    ) -> list[tuple[int, int]]:
        """Commit a plan's batches (write lock held). A `(group_id, ops)` batch gets its vectors
        from the embedding cache only (the model is never called under the lock): a text the
        cache lacks (a renamed entity, say) gets its vector later, from backfill or a rebuild,
        and the search index embeds it itself when it reloads the group."""
        return self._commit(
            [
                b if isinstance(b, Batch) else self._prepare(b[0], b[1], cache_only=True)
                for b in batches
            ]
        )

    async def write(
        self, plan: Callable[[GraphReader], tuple[T, Sequence[Batch | tuple[str, list[Op]]]]]
    ) -> T:
        """Run `plan` on the writer connection under the write lock, then commit the batches it
        returns (per group, one WAL batch; all of them in one transaction) and return its
        result. `plan` only reads and decides: it never calls a model. A `(group_id, ops)` batch
        gets its vectors from the embedding cache; a `Batch` carries its own (computed before
        the call)."""

        def run() -> T:
            with self.writer() as w:
                result, batches = w.read(plan)
                w.commit(batches)
                return result

        return await self._run(retrying, run)  # a lost race to another process: plan again

    async def commit_episode(
        self, commit: EpisodeCommit | Sequence[EpisodeCommit], *, at: int | None = None
    ) -> list[tuple[int, int]]:
        """Write one episode with its entities, facts, supersessions and mentions atomically;
        or several consecutive episodes of one group (each with its own reference time), in
        order, as one transaction and one WAL batch (lcg.engine.commits.episode_ops).

        `at`: the group's position (`Writer.position`) the episodes were resolved against; on
        a server, `GroupMovedError` (nothing written, this engine caught up) when the group is
        elsewhere now: resolve again and retry."""
        commits = [commit] if isinstance(commit, EpisodeCommit) else list(commit)
        ops = episode_ops(commits)
        group = commits[0].group_id
        batch = await self._run(self._prepare, group, ops)
        batch.new = frozenset(u for c in commits for u in c.new)

        def write() -> list[tuple[int, int]]:
            with self.writer():
                if at is not None:
                    self._mode.check_planned(group, at)
                with self._db.read_for_write() as conn:
                    check_commit_references(conn, commits)
                return self._commit([batch])

        return await self._run(write)

    # -- name resolution -------------------------------------------------------------------

    async def entity_by_name(self, group_id: str, name: str) -> Entity | None:
        """The entity a name resolves to in a group (exact, case-insensitive; merges followed)."""

        def read(conn: GraphReader) -> Entity | None:
            return self.names.resolve(conn, group_id, name)

        return await self._run(self._read, read)

    def _maybe_checkpoint(self) -> bool:
        """Checkpoint Kuzu's journal now if due and no reader is active, without waiting for
        the write lock (lcg.engine.checkpointer)."""
        return self._checkpointer.checkpoint_now()


def open_engine(
    settings: Settings,
    *,
    embedder: Embedder | None = None,
    events: EventSink | None = None,
    replay: Replay = replay_group,
    jobs: JobTable | None = None,
    llm: LlmClient | None = None,
    ingest: Callable[[Engine], object] | None = None,
) -> Engine:
    """Build an engine from settings: open the store and WAL, catch up, load indexes.

    Each part can be given instead of built: the embedder (wrapped in the embedding cache),
    the event sink, the replay step (startup catch-up and rebuilds), the table of background
    rebuild jobs, the language model (used as given) and the ingest pipeline (`ingest(engine)`,
    e.g. `lcg.ingest.pipeline.IngestPipeline`; else built on the first ingest).

    Raises:
        StorageError: the database cannot be opened.
        ConfigError: a setting is invalid.
    """
    private_dir(settings.home)
    # The embedder first (docs/api.md §startup: probe, then open the database): a bad one opens
    # nothing.
    cached = build_embedder(settings, embedder)
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    wal.lock()  # before the database: a second writer of this WAL touches nothing
    try:
        # A database the other embedded engine wrote is moved aside, to be rebuilt from the WAL
        # by the startup catch-up below (lcg.engine.carryover).
        carry = move_aside(settings, events or NullSink())
        store = open_backend(settings)
    except BaseException:
        wal.unlock()
        raise
    # The storage mode, chosen here once: the kernel and the areas ask the mode, never which
    # one it is (lcg.engine.modes).
    mode = EmbeddedMode(store) if isinstance(store, KuzuBackend) else ServerMode(store)
    engine = Engine(settings, mode, wal, cached, events, replay=replay, jobs=jobs, llm=llm)
    if ingest is not None:
        engine.ingest = ingest(engine)
    try:
        if carry is not None and isinstance(mode, EmbeddedMode):
            mode.carry_over = carry
        engine._startup()
        if carry is not None:
            with engine.reader() as conn:
                settle(carry, conn, mode.wal_states, engine.parts.events)
        engine._follow.start()  # server mode: other processes' commits (lcg.engine.follow)
        engine._scan.start()  # the WAL's checksums, read through in the background
    except BaseException:
        with contextlib.suppress(Exception):
            engine.close()
        raise
    return engine
