"""`Engine`: the library API of lcg — WAL, graph store, embedder and name index composed.

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

Public methods are async (anyio); the Kuzu work runs in worker threads.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import shutil
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import anyio.to_thread

from lcg.config import Settings
from lcg.embedding import stamp
from lcg.embedding.base import Embedder
from lcg.embedding.select import build_embedder, embedder_for_stamp
from lcg.embedding.vectors import embed_plan, plan_for_ops
from lcg.engine.jobs import JobTable, RebuildJob
from lcg.engine.names import NameIndex
from lcg.engine.replay import ReplayReport, loss_key, position_key, replay_group, write_position
from lcg.errors import (
    ConfigError,
    ConflictError,
    InvalidRequestError,
    LcgError,
    StorageError,
    UnavailableError,
    WalError,
    WalGenerationError,
)
from lcg.fsmodes import private_dir
from lcg.models import (
    EmbeddingRow,
    Entity,
    Episode,
    Fact,
)
from lcg.ontology import record_ingested_ontology
from lcg.search.floor import vector_floor
from lcg.search.index import SearchIndex
from lcg.storage import crossgroup, graph
from lcg.storage.store import Conn, Store, delete_database_files
from lcg.telemetry import EventSink, NullSink
from lcg.timeutil import from_wal, to_wal
from lcg.wal.layout import encode_group, ordered_files
from lcg.wal.lock import LOCK_FILE
from lcg.wal.reader import ReadStats, iter_records
from lcg.wal.records import Op, entity_op, episode_op, fact_op
from lcg.wal.writer import TornTail, Wal

__all__ = ["Engine", "EpisodeCommit", "Invalidation", "open_engine"]

logger = logging.getLogger(__name__)

P = ParamSpec("P")
T = TypeVar("T")
# A pass run after a full rebuild of a group, write lock held (cross-group pointers: lcg.admin.rebuild).
Rebind = Callable[["Engine", str], dict[str, int]]

# How long `reopen_store` waits for running reads before closing the database under them.
_READERS_DRAIN_SECONDS = 30.0
# Checkpoint by commit count (`maybe_checkpoint`): try after this many commits when no reader
# is active; after `_CHECKPOINT_DRAIN_COMMITS`, make readers wait (at most
# `_CHECKPOINT_DRAIN_SECONDS` for the running ones to finish) and checkpoint anyway.
_CHECKPOINT_EVERY_COMMITS = 100
_CHECKPOINT_DRAIN_COMMITS = 200
_CHECKPOINT_DRAIN_SECONDS = 2.0


@dataclass(frozen=True)
class Invalidation:
    """Supersession of an existing fact: when it stopped being true, when the graph retired it."""

    fact_uuid: str
    invalid_at: datetime | None
    expired_at: datetime


@dataclass(frozen=True)
class EpisodeCommit:
    """Everything one ingested episode changes, committed as one WAL batch and one transaction."""

    group_id: str
    episode: Episode
    entities: Sequence[Entity] = ()
    facts: Sequence[Fact] = ()
    invalidations: Sequence[Invalidation] = ()
    mentions: Sequence[str] = ()


@dataclass
class Batch:
    """Operations of one group, plus the vectors they need (computed before the lock).

    `apply`, when given, applies the operations in the commit's transaction instead of
    `graph.apply_ops` (a raw statement whose rows its caller keeps: lcg.admin.cypher).
    """

    group_id: str
    ops: list[Op]
    vectors: list[EmbeddingRow] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    apply: Callable[[Conn], object] | None = None


@dataclass(frozen=True)
class _RebuildPlan:
    """What a rebuild will do once its checks passed (API.md §2.34 steps 6-8)."""

    from_seq: int
    to_seq: int | None
    has_data: bool
    reset: bool
    previous: str | None
    generation: str | None


# The kinds of `wal_problems` entries in knowledge_status (kept in Meta `wal_loss:<group>`).
_LOST = "batch_not_applied"  # a batch with an unreadable line, passed over by a replay
_AHEAD = "database_ahead_of_wal"  # seqs the database applied that the WAL no longer holds
_TORN = "torn_tail"  # unacknowledged lines a crash left at a stream's end, cut at startup


class Writer:
    """The writer, while `Engine.writer()` holds the write lock: reads on the writer connection
    (never waiting for a pooled reader, which under load are all busy) and commits."""

    def __init__(self, engine: Engine) -> None:
        self._engine = engine

    @contextlib.contextmanager
    def connection(self) -> Iterator[Conn]:
        """The writer connection (reads; writes go through `commit`)."""
        with self._engine._db.writer() as conn:
            yield conn

    def read(self, fn: Callable[[Conn], T]) -> T:
        with self.connection() as conn:
            return fn(conn)

    def commit(self, batches: Sequence[Batch | tuple[str, list[Op]]]) -> list[tuple[int, int]]:
        """Apply, log and commit batches of several groups atomically: per group one WAL batch,
        all in one transaction. Returns each batch's (first, last) seq."""
        return self._engine._commit_planned(batches)


class Engine:
    """The context graph: one workspace's store, WAL and embedder."""

    def __init__(
        self,
        settings: Settings,
        store: Store | None,
        wal: Wal,
        embedder: Embedder,
        events: EventSink | None = None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.events: EventSink = events or NullSink()
        self._store: Store | None = store
        self._wal = wal
        self._write_lock = threading.RLock()
        self._names = NameIndex()
        self._search = SearchIndex(
            self._read, embedder, vector_floor(embedder.identity, settings.search_vector_floor)
        )
        self.indices_built = False
        self._jobs = JobTable()
        # Set when no database is open (store None): the service then runs degraded.
        self.degraded_reason: str | None = None if store is not None else "unknown"

    # -- plumbing --------------------------------------------------------------------------

    @property
    def _db(self) -> Store:
        if self._store is None:
            raise UnavailableError(self.degraded_reason or "unknown")
        return self._store

    @property
    def is_open(self) -> bool:
        """Whether a database is open (False: degraded, or closed)."""
        return self._store is not None

    @property
    def name_index_trusted(self) -> bool:
        """Whether the name index is complete (raw Cypher writes make it fall back to scans)."""
        return self._names.trusted

    @property
    def wal(self) -> Wal:
        return self._wal

    async def _run(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        return await anyio.to_thread.run_sync(functools.partial(fn, *args, **kwargs))

    @contextlib.contextmanager
    def reader(self) -> Iterator[Conn]:
        """A pooled reader connection (a snapshot), for code already in a worker thread."""
        with self._db.read() as conn:
            yield conn

    def _read(self, fn: Callable[[Conn], T]) -> T:
        with self.reader() as conn:
            return fn(conn)

    async def read(self, fn: Callable[[Conn], T]) -> T:
        """Run `fn` on a pooled reader connection in a worker thread (subsystems' reads)."""
        return await self._run(self._read, fn)

    @contextlib.contextmanager
    def writer(self) -> Iterator[Writer]:
        """Hold the write lock for a pass of several reads and commits (in a worker thread).

        The pass reads on the writer connection and commits through the commit primitive; it
        never calls a model (embed before entering)."""
        with self._write_lock:
            yield Writer(self)

    def startup(self) -> list[ReplayReport]:
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
                self.events.emit(
                    "wal_torn_tail",
                    group_id=torn.group_id,
                    path=str(torn.path),
                    bytes_dropped=torn.bytes_dropped,
                    lines=torn.lines,
                )
                self._record_torn(torn)
            self._check_database_ahead()
            found = [(g, self._catch_up_plan(g)) for g in self._wal.groups()]
            plans = [(g, plan) for g, plan in found if plan is not None]
            reports: list[ReplayReport] = []
            for group, plan in plans:
                report = self._catch_up(group, plan)
                if report is not None:
                    reports.append(report)
            if reports:
                self._rewire_cross_group()
            self._names.load(self._read(graph.name_rows))
            self._search.reset()
        self.indices_built = self._warm_search()
        return reports

    def close(self) -> None:
        # A background rebuild commits per batch and holds the write lock while it runs: wait
        # for it to end rather than closing the store under it (jobs are not resumed later).
        self._jobs.join()
        with self._write_lock:
            self._wal.close()
            self._wal.unlock()
            if self._store is not None:
                self._store.close()
                self._store = None

    def reopen_store(
        self,
        prepare: Callable[[Path], object],
        *,
        failed_reason: str,
        on_open: Callable[[Store], object] | None = None,
    ) -> list[ReplayReport]:
        """Replace the database in place: close it, `prepare(db_path)`, open it, catch up.

        `on_open(store)`, if given, sees the reopened database before the catch-up.

        The recovery hook (lcg.admin.recover): callers, such as the service holding this
        Engine, keep the same object. The caller must hold the write lock. Returns the startup
        catch-up reports. If `prepare` or the reopening raises, the engine is left degraded
        with `failed_reason` (no store) and the error propagates.
        """
        store, self._store = self._store, None
        self.degraded_reason = failed_reason
        self.indices_built = False
        if store is not None:
            # New reads now fail as degraded; let the reads already running finish first.
            if not store.wait_idle(_READERS_DRAIN_SECONDS):
                logger.warning("reopening the database with reads still running")
            store.close()
        self._wal.close()
        prepare(self.settings.db_path)
        fresh = Store(self.settings.db_path, buffer_pool_mb=self.settings.kuzu_buffer_pool_mb)
        self._store = fresh
        try:
            if on_open is not None:
                on_open(fresh)
            reports = self.startup()
        except BaseException:
            self._store = None
            fresh.close()
            raise
        self.degraded_reason = None
        return reports

    # -- positions and catch-up ------------------------------------------------------------

    def _position(self, conn: Conn, group_id: str) -> tuple[int | None, str | None] | None:
        raw = graph.get_meta(conn, position_key(group_id))
        if raw is None:
            return None
        value = json.loads(raw)
        return value.get("applied_seq"), value.get("generation")

    def _database_ahead(self, conn: Conn, group_id: str) -> tuple[int, int | None] | None:
        """(applied_seq, max_seq) when the database has applied seqs its WAL stream no longer
        holds (same generation): a fidelity problem, as a rebuild would lose them."""
        position = self._position(conn, group_id)
        if position is None or position[0] is None:
            return None
        if position[1] != self._wal.generation(group_id):
            return None
        max_seq = self._wal.bounds(group_id).max_seq
        if max_seq is not None and position[0] <= max_seq:
            return None
        return position[0], max_seq

    def _check_database_ahead(self, groups: Sequence[str] | None = None) -> None:
        """(Write lock held.) Report every group whose database is ahead of its WAL, record it
        for `knowledge_status`, and move the group's stream past every seq ever applied, so no
        seq is handed out twice."""
        for group_id in self._wal.groups() if groups is None else groups:
            with self._db.writer() as conn:
                ahead = self._database_ahead(conn, group_id)
                known = self._losses(conn, group_id)
            floor = max((x["last_seq"] for x in known if x.get("kind") == _AHEAD), default=None)
            if ahead is not None:
                applied, max_seq = ahead
                first = 0 if max_seq is None else max_seq + 1
                logger.error(
                    "group %r: the database has applied WAL seq %d but the WAL ends at %s; "
                    "seqs %d..%d exist only in the database and a rebuild from the WAL would "
                    "lose them; new writes continue at seq %d",
                    group_id,
                    applied,
                    max_seq,
                    first,
                    applied,
                    applied + 1,
                )
                self.events.emit(
                    "wal_behind_database",
                    group_id=group_id,
                    applied_seq=applied,
                    max_seq=max_seq,
                    next_seq=applied + 1,
                )
                entry = {"kind": _AHEAD, "file": None, "first_seq": first, "last_seq": applied}
                if entry not in known:
                    with self._db.transaction() as tx:
                        graph.set_meta(tx, loss_key(group_id), json.dumps([*known, entry]))
                floor = applied if floor is None else max(floor, applied)
            if floor is not None:
                self._wal.stream(group_id).skip_to(floor + 1)

    def _losses(self, conn: Conn, group_id: str) -> list[dict[str, Any]]:
        raw = graph.get_meta(conn, loss_key(group_id))
        value = json.loads(raw) if raw else []
        return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []

    def _record_losses(self, report: ReplayReport, *, full: bool) -> None:
        """Keep the batches a replay could not apply (write lock held), for `knowledge_status`.

        A replay of the whole stream replaces the group's record of them; a tail replay adds
        to it. Seqs the database held beyond its WAL stay recorded (they bound the next seq).
        """
        for loss in report.lost:
            logger.error(
                "group %r: WAL batch seq %s..%s in %s has an unreadable line and was not "
                "applied (%d readable lines dropped)",
                report.group_id,
                loss.first_seq,
                loss.last_seq,
                loss.file,
                loss.lines_dropped,
            )
            self.events.emit("wal_batch_lost", group_id=report.group_id, **loss.to_wire())
        if not report.lost and not full:
            return
        with self._db.writer() as conn:
            known = self._losses(conn, report.group_id)
        if full:  # a replay re-derives batches; what the WAL itself lost stays recorded
            known = [x for x in known if x.get("kind") in (_AHEAD, _TORN)]
        fresh = [{"kind": _LOST, **loss.to_wire()} for loss in report.lost]
        merged = known + [x for x in fresh if x not in known]
        with self._db.transaction() as tx:
            graph.set_meta(tx, loss_key(report.group_id), json.dumps(merged) if merged else None)

    def _record_torn(self, torn: TornTail) -> None:
        """(Write lock held.) Keep a torn tail cut at startup for `knowledge_status`."""
        entry = {"kind": _TORN, **torn.to_wire()}
        with self.store.writer() as conn:
            known = self._losses(conn, torn.group_id)
        with self.store.transaction() as tx:
            graph.set_meta(tx, loss_key(torn.group_id), json.dumps([*known, entry]))

    def wal_problems(self, conn: Conn) -> list[dict[str, Any]]:
        """The `wal_problems` of `knowledge_status` (an lcg extension): WAL lines lost, by group."""
        return [
            {"group_id": group_id, **loss}
            for group_id in self._wal.groups()
            for loss in self._losses(conn, group_id)
        ]

    def _group_has_data(self, conn: Conn, group_id: str) -> bool:
        return any(graph.group_counts(conn, group_id).values())

    def _catch_up_plan(self, group_id: str) -> tuple[str, int] | None:
        """How to bring a group up to its WAL: ("bulk", n) or ("tail", n) operations, or None."""
        bounds = self._wal.bounds(group_id)
        if bounds.max_seq is None:
            return None
        generation = self._wal.generation(group_id)
        with self._db.writer() as conn:
            position = self._position(conn, group_id)
            has_data = self._group_has_data(conn, group_id)
        if position is None or position[0] is None or position[1] != generation:
            if has_data:
                logger.warning(
                    "group %r: WAL position unknown or its generation changed; "
                    "run knowledge_rebuild_from_wal to re-derive it",
                    group_id,
                )
                return None
            return ("bulk", bounds.max_seq + 1)
        if position[0] < bounds.max_seq:
            held = self._held_through(group_id)
            if held is not None and bounds.max_seq <= held:
                logger.info(
                    "group %r: WAL lines %d..%d are held back by a bounded restore",
                    group_id,
                    position[0] + 1,
                    held,
                )
                return None
            return ("tail", bounds.max_seq - position[0])
        return None

    def _held_through(self, group_id: str) -> int | None:
        with self._db.writer() as conn:
            raw = graph.get_meta(conn, position_key(group_id))
        held = json.loads(raw).get("held_through") if raw else None
        return held if isinstance(held, int) else None

    def _catch_up(self, group_id: str, plan: tuple[str, int] | None = None) -> ReplayReport | None:
        """Apply what the group's WAL holds beyond its applied position (write lock held)."""
        plan = plan if plan is not None else self._catch_up_plan(group_id)
        if plan is None:
            return None
        generation = self._wal.generation(group_id)
        directory = self._wal.directory(group_id)
        with self._db.writer() as conn:
            position = self._position(conn, group_id)
        if plan[0] == "bulk":
            report = replay_group(
                self._db,
                directory,
                group_id,
                self.embedder,
                generation=generation,
                bulk_load=True,
                batch_size=self.settings.replay_batch_size,
            )
        else:
            assert position is not None and position[0] is not None
            report = replay_group(
                self._db,
                directory,
                group_id,
                self.embedder,
                generation=generation,
                from_seq=position[0] + 1,
                batch_size=self.settings.replay_batch_size,
            )
        self._stamp_replayed(group_id, full=plan[0] == "bulk")
        self._record_losses(report, full=plan[0] == "bulk")
        self._search.invalidate([group_id])
        self._emit_replay(report)
        return report

    # The group's embedder stamp (lcg.embedding.stamp) is kept in each batch's transaction: it
    # exists exactly while the group holds vectors, and names the embedder of its first ones.

    def _first_vectors(self, tx: Conn, batch: Batch) -> bool:
        """Whether the batch writes the first vectors of its group (its ops already applied)."""
        if any(op.name == "group.purge" for op in batch.ops):
            stamp.clear_stamp(tx, batch.group_id)
        return bool(batch.vectors) and stamp.is_unstamped_and_empty(tx, batch.group_id)

    def _settle_stamp(self, tx: Conn, batch: Batch, first: bool) -> None:
        if first:
            stamp.write_stamp(tx, batch.group_id, self.embedder.identity)
        elif not batch.vectors and (
            batch.stale or any(op.name == "episode.delete" for op in batch.ops)
        ):
            stamp.clear_if_empty(tx, batch.group_id)  # the last vectors may have gone

    def _stamp_replayed(self, group_id: str, full: bool) -> None:
        """After a replay (write lock held): a group re-derived whole (`full`) holds only vectors
        of the embedder in use, so it is stamped with it; a tail leaves the stamp as it was."""
        if full:
            with self._db.transaction() as tx:
                stamp.restamp_group(tx, group_id, self.embedder.identity)

    def _emit_replay(self, report: ReplayReport) -> None:
        self.events.emit(
            "wal_replay_complete",
            **report.to_wire(
                self.settings.replay_failure_samples, self.settings.replay_fidelity_threshold
            ),
        )

    # -- the commit primitive --------------------------------------------------------------

    def _prepare(self, group_id: str, ops: list[Op], *, cache_only: bool = False) -> Batch:
        """Plan and compute a batch's vectors (no lock held, unless `cache_only`: then only
        cached vectors are used and the model is never called)."""
        plan = plan_for_ops(group_id, ops)
        vectors = embed_plan(plan, self.embedder, cache_only=cache_only)
        return Batch(group_id, ops, vectors, plan.stale)

    def _commit(self, batches: Sequence[Batch]) -> list[tuple[int, int]]:
        """Apply, log and commit batches of several groups atomically (write lock held).

        Returns each batch's (first, last) seq.

        Raises:
            StorageError, WalError: nothing was applied or logged.
        """
        batches = [b for b in batches if b.ops]
        if not batches:
            return []
        appended: list[tuple[str, int, int]] = []
        body_done = False
        try:
            with self._db.transaction() as tx:
                for batch in batches:
                    if batch.apply is not None:
                        batch.apply(tx)
                    else:
                        graph.apply_ops(tx, batch.group_id, batch.ops)
                    stamps = self._first_vectors(tx, batch)
                    graph.put_embeddings(tx, batch.vectors)
                    graph.delete_embeddings(tx, batch.stale)
                    self._settle_stamp(tx, batch, stamps)
                for batch in batches:
                    stream = self._wal.stream(batch.group_id)
                    first, last = stream.append(batch.ops)
                    appended.append((batch.group_id, first, last))
                    write_position(tx, batch.group_id, last, stream.generation)
                body_done = True
        except BaseException:
            if not appended or not self._recover_failed_commit(appended, body_done):
                raise
        for batch in batches:
            self._index_names(batch)
            self._search.apply(batch.group_id, batch.ops, batch.vectors)
            stream = self._wal.stream(batch.group_id)
            while stream.rotated:
                closed, opened = stream.rotated.pop(0)
                self.events.emit(
                    "wal_rotated",
                    group_id=batch.group_id,
                    closed_file=str(closed),
                    new_file=str(opened),
                )
        self.maybe_checkpoint()
        return [(first, last) for _, first, last in appended]

    def _recover_failed_commit(self, appended: list[tuple[str, int, int]], body_done: bool) -> bool:
        """A commit failed after WAL lines were written: make the WAL and the DB agree again.

        Returns True when the write turned out to be committed (the COMMIT raised but the
        positions it set are visible), False when it was rolled back and its lines were removed.
        """
        if body_done:
            with self._db.writer() as conn:
                if all(
                    (self._position(conn, g) or (None, None))[0] == last for g, _, last in appended
                ):
                    return True
        for group_id, first, _ in appended:
            try:
                self._wal.stream(group_id).truncate_from(first)
            except WalError:
                # The lines are durable and cannot be removed: apply them so the DB matches.
                logger.exception(
                    "could not remove WAL lines of group %r; applying them instead", group_id
                )
                self._catch_up(group_id)
        return False

    def _index_names(self, batch: Batch) -> None:
        for op in batch.ops:
            if op.name == "entity.upsert":
                d = op.data
                self._names.put(
                    batch.group_id,
                    d["name"],
                    d["uuid"],
                    from_wal(d.get("created_at")),
                    "Merged" in d.get("labels", ()),
                )
            elif op.name == "group.purge":
                self._names.drop_group(batch.group_id)
            elif op.name == "cypher.exec":
                self._reload_names()

    def settle_search_embedder(self) -> None:
        """Answer searches with the model that made the workspace's vectors: while groups are
        stamped by one other model that loads offline, with that one (until a re-embed,
        lcg.admin.reembed, restamps them); otherwise with the embedder in use."""
        found = self._read(lambda c: stamp.foreign_stamp(c, self.embedder.identity))
        current = self._search.embedder.identity
        if found == (current.model, current.dim):
            return
        wanted = embedder_for_stamp(self.settings, *found) if found is not None else None
        target = wanted or self.embedder
        if current == target.identity:
            return
        floor = vector_floor(target.identity, self.settings.search_vector_floor)
        self._search.swap_embedder(target, floor)
        model = self.embedder.identity.model
        if found is None:
            logger.info("search answers with %s", model)
        elif wanted is not None:
            logger.warning(
                "this workspace was embedded with %s: search answers with it until "
                "`lcg models reembed` (knowledge_backfill_summary_embeddings) re-embeds it "
                "with %s",
                found[0],
                model,
            )
        else:
            logger.warning(
                "this workspace was embedded with %s, which cannot be loaded here: search "
                "embeds with %s as it loads; `lcg models reembed` makes it permanent",
                found[0],
                model,
            )

    def _warm_search(self, groups: Sequence[str] | None = None) -> bool:
        """Load the search index of `groups` (None: all) now rather than on the first search;
        whether it loaded (a failure only defers the load to the next search)."""
        try:
            self.settle_search_embedder()
            self._search.warm(groups)
        except Exception:  # derived data: a failed load must not fail the open or the rebuild
            logger.exception("search index load failed; it is retried on the next search")
            if groups is None:
                self._search.reset()
            else:
                self._search.invalidate(groups)
            return False
        return True

    @property
    def search_index(self) -> SearchIndex:
        """The in-process lexical and vector index (lcg.search), kept in step with commits."""
        return self._search

    def _reload_names(self) -> None:
        try:
            self._names.load(self._read(graph.name_rows))
        except StorageError:
            logger.exception("name index reload failed; marking it untrusted")
            self._names.trusted = False

    def _rewire_cross_group(self) -> None:
        """Restore the hops of cross-group facts into entities replayed after them (derived)."""
        with self._db.transaction() as tx:
            crossgroup.rewire_hops(tx)

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
        self, plan: Callable[[Conn], tuple[T, Sequence[Batch | tuple[str, list[Op]]]]]
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

        return await self._run(run)

    def name_lookup(self, group_id: str, name: str) -> list[tuple[str, bool]]:
        """(uuid, is_merged) of the entities with this name in the group, earliest first."""
        return self._names.lookup(group_id, name)

    def resolve_merged(self, conn: Conn, entity: Entity, what: str) -> Entity:
        """Follow `merged_into` from a tombstone to the live entity (InvalidRequestError if none)."""
        return self._follow_merged(conn, entity, what)

    def applied_seq(self, conn: Conn, group_id: str) -> int | None:
        """The group's recorded applied WAL position, None when unknown."""
        position = self._position(conn, group_id)
        return position[0] if position else None

    async def commit_episode(self, commit: EpisodeCommit) -> list[tuple[int, int]]:
        """Write one episode with its entities, facts, supersessions and mentions atomically."""
        ops: list[Op] = [entity_op(e) for e in commit.entities]
        ops += [fact_op(f) for f in commit.facts]
        ops += [
            Op(
                "fact.invalidate",
                {
                    "uuid": inv.fact_uuid,
                    "invalid_at": to_wal(inv.invalid_at),
                    "expired_at": to_wal(inv.expired_at),
                },
            )
            for inv in commit.invalidations
        ]
        ops.append(episode_op(commit.episode))
        if commit.mentions:
            ops.append(
                Op(
                    "mentions.add",
                    {
                        "episode": commit.episode.uuid,
                        "entities": list(dict.fromkeys(commit.mentions)),
                    },
                )
            )
        _check_commit_shape(commit)
        batch = await self._run(self._prepare, commit.group_id, ops)

        def write() -> list[tuple[int, int]]:
            with self._write_lock:
                with self._db.writer() as conn:
                    self._check_commit_references(conn, commit)
                return self._commit([batch])

        return await self._run(write)

    def _check_commit_references(self, conn: Conn, commit: EpisodeCommit) -> None:
        """Fact endpoints, mentions and superseded facts must exist in the group (lock held)."""
        group = commit.group_id
        own = {e.uuid for e in commit.entities}
        wanted = {u for f in commit.facts for u in (f.source_uuid, f.target_uuid)} | set(
            commit.mentions
        )
        stored = graph.entities_by_uuids(conn, wanted - own) if wanted - own else {}
        missing = sorted(u for u in wanted - own if u not in stored or stored[u].group_id != group)
        if missing:
            raise InvalidRequestError(
                f"entities {missing} do not exist in group '{group}'", field="facts"
            )
        targets = [inv.fact_uuid for inv in commit.invalidations]
        facts = graph.facts_by_uuids(conn, targets) if targets else {}
        gone = sorted(u for u in targets if u not in facts or facts[u].group_id != group)
        if gone:
            raise InvalidRequestError(
                f"superseded facts {gone} do not exist in group '{group}'", field="invalidations"
            )

    # -- resolution ------------------------------------------------------------------------

    def resolve_name(self, conn: Conn, group_id: str, name: str) -> Entity | None:
        """Exact (trimmed, case-insensitive) name in the group, earliest first, tombstones followed."""
        hits = self._names.lookup(group_id, name)
        if not hits:
            return None
        entity = graph.entity_by_uuid(conn, hits[0][0])
        if entity is None:  # index out of date: trust the database
            self._reload_names()
            hits = self._names.lookup(group_id, name)
            entity = graph.entity_by_uuid(conn, hits[0][0]) if hits else None
            if entity is None:
                return None
        return self._follow_merged(conn, entity, f"name '{name}'")

    def _follow_merged(self, conn: Conn, entity: Entity, what: str) -> Entity:
        seen = {entity.uuid}
        current = entity
        while "Merged" in current.labels:
            target_uuid = current.merged_into or json.loads(current.attributes or "{}").get(
                "merged_into"
            )
            target = (
                graph.entity_by_uuid(conn, target_uuid) if isinstance(target_uuid, str) else None
            )
            if target is None or target.group_id != entity.group_id or target.uuid in seen:
                raise InvalidRequestError(
                    f"{what} resolves to a Merged tombstone whose merged_into chain is missing, "
                    f"dangling, cyclic or crosses groups; refusing to guess"
                )
            seen.add(target.uuid)
            current = target
        return current

    async def entity_by_name(self, group_id: str, name: str) -> Entity | None:
        """The entity a name resolves to in a group (exact, case-insensitive; merges followed)."""

        def read(conn: Conn) -> Entity | None:
            return self.resolve_name(conn, group_id, name)

        return await self._run(self._read, read)

    # -- deletes ---------------------------------------------------------------------------

    async def clear_all(self, confirm: bool, preserve_wal: bool) -> dict[str, Any]:
        """Delete the whole graph (and, unless `preserve_wal`, the whole WAL); start empty."""
        if not confirm:
            raise InvalidRequestError("Must set 'confirm' to true to clear graph", field="confirm")

        def write() -> dict[str, Any]:
            with self._write_lock:
                marks = (
                    {
                        g: (self._wal.bounds(g).max_seq, self._wal.generation(g))
                        for g in self._wal.groups()
                    }
                    if preserve_wal
                    else {}
                )
                store = self._db
                self._store = None
                self.degraded_reason = "unknown"
                # New reads now fail as unavailable; let the reads already running finish first.
                if not store.wait_idle(_READERS_DRAIN_SECONDS):
                    logger.warning("clearing the database with reads still running")
                store.close()
                self._wal.close()
                try:
                    delete_database_files(store.path)
                    if not preserve_wal and self._wal.root.exists():
                        # Everything but the lock file, which this process still holds.
                        for child in self._wal.root.iterdir():
                            if child.name == LOCK_FILE:
                                continue
                            if child.is_dir() and not child.is_symlink():
                                shutil.rmtree(child)
                            else:
                                child.unlink()
                except OSError as exc:
                    raise InvalidRequestError(f"failed to delete DB or WAL files: {exc}") from exc
                try:
                    fresh = Store(store.path, buffer_pool_mb=self.settings.kuzu_buffer_pool_mb)
                except LcgError as exc:
                    raise InvalidRequestError(
                        f"Graph files deleted but reinitialization failed: {exc}. "
                        "Restart the service to recover."
                    ) from exc
                with fresh.transaction() as tx:
                    # A preserved WAL is history the user chose to keep but not to show: record
                    # each stream as applied so a restart does not resurrect it; an explicit
                    # knowledge_rebuild_from_wal brings it back.
                    for g, (max_seq, gen) in marks.items():
                        if max_seq is not None:
                            write_position(tx, g, max_seq, gen)
                self._store = fresh
                self.degraded_reason = None
                self._names.load([])
                self._search.reset()
                self.indices_built = False
            return {"success": True, "message": "Graph cleared and reinitialized successfully"}

        return await self._run(write)

    # -- raw Cypher, indexes -------------------------------------------------------------------

    def build_search_index(self) -> None:
        """Drop the in-process search index and load it again for every group, now.

        Runs without the write lock, as the load at open does: texts the embedding cache lacks
        may need the model, and loads that race with commits are settled by the index's
        per-group versions. `indices_built` is false from the start and true only once every
        partition loaded.

        Raises:
            StorageError: the load failed (the index then reloads lazily on the next search).
        """
        self.indices_built = False
        self._search.reset()
        try:
            self._search.warm()
        except Exception as exc:
            self._search.reset()
            raise StorageError(f"search index build failed: {exc}") from exc
        self.indices_built = True

    async def build_indices(self) -> dict[str, Any]:
        """`knowledge_build_indices` (API.md §2.36): rebuild lcg's search index eagerly."""

        def write() -> dict[str, Any]:
            self.build_search_index()
            return {"status": "ok", "indices_built": True}

        return await self._run(write)

    # -- reads ---------------------------------------------------------------------------------

    # -- status ----------------------------------------------------------------------------

    def wal_state(self, conn: Conn, group_id: str) -> dict[str, Any]:
        bounds = self._wal.bounds(group_id)
        generation = self._wal.generation(group_id)
        position = self._position(conn, group_id)
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

    def backfill_positions(self) -> None:
        """Record a position for groups that have none where that is certain (API.md §3.1.4).

        Only the first backfill rule applies here: a group with no data and no WAL line gets
        `(0, on-disk generation)`. A group whose WAL has lines but no data is hydrated by the
        next startup's bulk catch-up, which recording 0 would turn into a tail replay from seq
        1; a group with data and no position stays unknown — guessing it from the latest
        episode would make startup tail-replay from the guess (`_catch_up_plan` refuses to
        guess: it asks for an explicit rebuild). See README, "Differences from the reference".
        """
        # Only a group without WAL lines can qualify: most calls need no lock at all (a running
        # background rebuild holds it for its whole replay).
        candidates = [g for g in self._wal.groups() if self._wal.bounds(g).max_seq is None]
        if not candidates:
            return
        with self._write_lock:
            for group_id in candidates:
                try:
                    with self._db.writer() as conn:
                        position = self._position(conn, group_id)
                        if position is not None and position[0] is not None:
                            continue
                        if self._group_has_data(conn, group_id):
                            continue
                    generation = self._wal.generation(group_id)
                    with self._db.transaction() as tx:
                        write_position(tx, group_id, 0, generation)
                except (LcgError, OSError, ValueError) as exc:  # degrade to null, never fail
                    logger.warning("group %r: WAL position backfill failed: %s", group_id, exc)

    # -- rebuild ---------------------------------------------------------------------------

    async def rebuild_from_wal(
        self,
        group_id: str,
        from_seq: int = 0,
        to_seq: int | None = None,
        dry_run: bool = False,
        force_clear: bool = False,
        progress: Callable[[dict[str, Any]], None] | None = None,
        *,
        rebind: Rebind | None,
    ) -> dict[str, Any]:
        """Replay a group's WAL into the graph (API.md §2.34, synchronous form); `rebind` runs
        after a full rebuild (`lcg.admin.rebuild` passes the cross-group pointer pass)."""
        return await self._run(
            self._rebuild, group_id, from_seq, to_seq, dry_run, force_clear, progress, rebind
        )

    async def rebuild_groups(
        self,
        group_ids: Sequence[str],
        *,
        force_clear: bool = True,
        dry_run: bool = False,
        progress: Callable[[dict[str, Any]], None] | None = None,
        rebind: Rebind | None,
    ) -> list[dict[str, Any]]:
        """Rebuild several groups from their WALs, under one hold of the write lock."""

        def run() -> list[dict[str, Any]]:
            with self._write_lock:
                if dry_run:
                    return [
                        self._rebuild(g, 0, None, True, force_clear, progress, rebind)
                        for g in group_ids
                    ]
                results = [
                    self._rebuild(g, 0, None, False, force_clear, progress, rebind)
                    for g in group_ids
                ]
                self.indices_built = all(r["indices_built"] for r in results)
                return results

        return await self._run(run)

    async def start_rebuild(
        self,
        group_id: str,
        from_seq: int = 0,
        to_seq: int | None = None,
        force_clear: bool = False,
        *,
        rebind: Rebind | None,
    ) -> dict[str, Any]:
        """Start a real rebuild as a background job (API.md §2.34 step 9, non-streaming form).

        Every refusal of steps 4-8 is raised here, before a job exists (the checks read a
        snapshot; the job repeats them under the write lock, and fails if the state changed in
        between). If a job is already running (any group), that job is returned instead.
        """
        return await self._run(self._start_rebuild, group_id, from_seq, to_seq, force_clear, rebind)

    def _start_rebuild(
        self,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        force_clear: bool,
        rebind: Rebind | None,
    ) -> dict[str, Any]:
        directory = self._rebuild_directory(group_id)
        self._read(
            lambda conn: self._rebuild_plan(
                conn, directory, group_id, from_seq, to_seq, False, force_clear
            )
        )

        def work(job: RebuildJob) -> dict[str, Any]:
            result = self._rebuild(
                group_id, from_seq, to_seq, False, force_clear, job.progress, rebind
            )
            result.pop("success", None)
            return result

        job, _ = self._jobs.start(group_id, len(ordered_files(directory)), work)
        return {"success": True, "job_id": job.job_id, "status": "running"}

    def rebuild_status(self, job_id: str) -> dict[str, Any]:
        """`knowledge_rebuild_status` (API.md §2.35): a background job's state, from memory."""
        job = self._jobs.get(job_id)
        if job is None:
            return {"status": "not_found"}
        return job.to_wire()

    def _rebuild_directory(self, group_id: str) -> Path:
        """The group's WAL directory, if it holds any WAL file (API.md §2.34 steps 4-5)."""
        directory = self._wal.directory(group_id)
        if not directory.is_dir() or not any(directory.glob("*.jsonl")):
            raise InvalidRequestError(f"No WAL files found at {directory}", field="group_id")
        return directory

    def _rebuild_plan(
        self,
        conn: Conn,
        directory: Path,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        dry_run: bool,
        force_clear: bool,
    ) -> _RebuildPlan | dict[str, Any]:
        """API.md §2.34 steps 6-8 (checks only): the effective plan, or a dry run's reset answer.

        Raises:
            WalGenerationError, ConflictError: the rebuild is refused.
        """
        position = self._position(conn, group_id)
        has_data = self._group_has_data(conn, group_id)
        applied, previous = position if position else (None, None)
        generation = self._wal.generation(group_id)
        if applied is not None and generation is None:
            raise WalGenerationError(
                f'group "{group_id}": {directory}/.wal-generation.json is absent or unreadable — '
                "republish the full WAL directory including its dot-files, or create the file by "
                'hand with {"generation": "<any unique string>"}'
            )
        reset = applied is not None and generation != previous
        if reset and dry_run:
            return {
                "success": True,
                "group_id": group_id,
                "dry_run": True,
                "reset_detected": True,
                "previous_generation": previous,
                "generation": generation,
                "message": "the WAL stream's generation changed since it was applied; a real "
                "rebuild will purge the group and replay the whole stream",
            }
        if reset:
            from_seq, to_seq, force_clear = 0, None, True
        if from_seq == 0 and has_data:
            prefix = (
                f'knowledge_rebuild_from_wal: group "{group_id}" already contains data and '
                "from_seq: 0 is a full rebuild."
            )
            if dry_run:
                raise ConflictError(
                    f"{prefix} A dry run cannot preview this cleanly — purge the "
                    "group first or pass a from_seq > 0."
                )
            if not force_clear:
                raise ConflictError(
                    f"{prefix} Pass force_clear: true to purge the group and replay "
                    "it, or a from_seq > 0 to replay a tail."
                )
        return _RebuildPlan(from_seq, to_seq, has_data, reset, previous, generation)

    def _rebuild(
        self,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        dry_run: bool,
        force_clear: bool,
        progress: Callable[[dict[str, Any]], None] | None,
        rebind: Rebind | None,
    ) -> dict[str, Any]:
        directory = self._rebuild_directory(group_id)
        with self._write_lock:
            with self._db.writer() as conn:
                plan = self._rebuild_plan(
                    conn, directory, group_id, from_seq, to_seq, dry_run, force_clear
                )
            if isinstance(plan, dict):
                return plan
            from_seq, to_seq, has_data = plan.from_seq, plan.to_seq, plan.has_data
            reset, previous, generation = plan.reset, plan.previous, plan.generation
            if dry_run:
                return self._dry_run(directory, group_id, from_seq, to_seq, previous, generation)
            self.indices_built = False
            self._search.invalidate([group_id])
            self._wal.drop_stream(group_id)
            if from_seq == 0 and has_data:
                with self._db.transaction() as tx:
                    graph.purge_group(tx, group_id)
                    write_position(tx, group_id, None, generation)
            report = replay_group(
                self._db,
                directory,
                group_id,
                self.embedder,
                generation=generation,
                from_seq=from_seq,
                to_seq=to_seq,
                bulk_load=from_seq == 0,
                batch_size=self.settings.replay_batch_size,
                progress=progress,
            )
            self._stamp_replayed(group_id, full=from_seq == 0)
            self._record_losses(report, full=from_seq == 0)
            self._check_database_ahead([group_id])  # its stream was dropped: floor it again
            max_seq = self._wal.bounds(group_id).max_seq
            if (
                to_seq is not None
                and max_seq is not None
                and report.last_committed_seq is not None
                and to_seq < max_seq
            ):
                # A bounded restore: keep the later lines from being replayed at the next open.
                with self._db.transaction() as tx:
                    write_position(tx, group_id, report.last_committed_seq, generation, max_seq)
            self._reload_names()
            self._search.invalidate([group_id])
            self._rewire_cross_group()
            # Pointers into a re-derived group are re-resolved by name, ignoring the staleness
            # gate: after a reset or a bounded restore, positions are not comparable.
            rebound = rebind(self, group_id) if rebind is not None and from_seq == 0 else None
            # The group's texts were just embedded by the replay: loading it hits the cache.
            self.indices_built = self._warm_search([group_id])
            self._emit_replay(report)
            record_ingested_ontology(self.settings)  # the graph now reflects the current ontology
            result = report.to_wire(
                self.settings.replay_failure_samples, self.settings.replay_fidelity_threshold
            )
            result.update(
                {
                    "success": True,
                    "dry_run": False,
                    "indices_built": self.indices_built,
                    "reset_detected": reset,
                    "previous_generation": previous,
                    "generation": generation,
                    "cross_group_rebind": rebound if reset else None,
                }
            )
            return result

    def _dry_run(
        self,
        directory: Any,
        group_id: str,
        from_seq: int,
        to_seq: int | None,
        previous: str | None,
        generation: str | None,
    ) -> dict[str, Any]:
        stats = ReadStats()
        report = ReplayReport(group_id, from_seq, to_seq, mode="dry_run")
        report.mutations_replayed = sum(1 for _ in iter_records(directory, from_seq, to_seq, stats))
        report.unparseable_lines = stats.unparseable
        report.unrecognised_lines = stats.unrecognised
        report.torn_tail_lines = stats.torn_tail
        report.incomplete_batch_lines = stats.incomplete_batch_lines
        report.corrupt_batch_lines = stats.corrupt_batch_lines
        report.lost = stats.lost
        report.wal_files_processed = stats.files_processed
        result = report.to_wire(
            self.settings.replay_failure_samples, self.settings.replay_fidelity_threshold
        )
        result.update(
            {
                "success": True,
                "dry_run": True,
                "reset_detected": False,
                "previous_generation": previous,
                "generation": generation,
                "cross_group_rebind": None,
            }
        )
        return result

    def maybe_checkpoint(self) -> bool:
        """Checkpoint Kuzu's journal if it is large, or if `_CHECKPOINT_EVERY_COMMITS` commits
        ran since the last one, and no reader is active (never blocks writes).

        Kuzu holds the old versions of updated rows in memory until a checkpoint (~300 KB per
        one-entity update, storage/README.md): under a steady read load a reader is nearly
        always active, so once `_CHECKPOINT_DRAIN_COMMITS` commits are owed the checkpoint
        drains the readers (new reads wait for it, ~tens of ms) instead of waiting for a gap.
        """
        store = self._store
        if store is None:
            return False
        limit = self.settings.checkpoint_wal_bytes
        by_size = limit > 0 and store.journal_bytes() >= limit
        if not by_size and store.commits_since_checkpoint < _CHECKPOINT_EVERY_COMMITS:
            return False
        if not self._write_lock.acquire(blocking=False):
            return False
        try:
            overdue = store.commits_since_checkpoint >= _CHECKPOINT_DRAIN_COMMITS
            return store.checkpoint(drain=_CHECKPOINT_DRAIN_SECONDS if overdue else 0.0)
        except StorageError as exc:  # the write before it is committed: never fail it
            logger.warning("checkpoint failed, retried after a later commit: %s", exc)
            return False
        finally:
            self._write_lock.release()


def no_ontology() -> dict[str, Any]:
    """The `ontology` object of `knowledge_status` when no ontology is loaded (API.md §3.1.5)."""
    return {
        "present": False,
        "loaded": False,
        "mode": None,
        "entity_type_count": 0,
        "relation_type_count": 0,
        "drifted": False,
        "drift_summary": None,
    }


def _check_commit_shape(commit: EpisodeCommit) -> None:
    """Every row of an episode commit belongs to its group; the group can hold a WAL stream.

    Raises:
        InvalidRequestError: naming the offending part.
    """
    group = commit.group_id
    if not group:
        raise InvalidRequestError(
            'group_id must be non-empty: writes to group "" cannot be logged', field="group_id"
        )
    encode_group(group)
    rows: list[tuple[str, Any]] = [("episode", commit.episode)]
    rows += [("entities", e) for e in commit.entities] + [("facts", f) for f in commit.facts]
    for part, row in rows:
        if row.group_id != group:
            raise InvalidRequestError(
                f"{part}: {row.uuid} belongs to group '{row.group_id}', not '{group}'", field=part
            )


def open_engine(
    settings: Settings, *, embedder: Embedder | None = None, events: EventSink | None = None
) -> Engine:
    """Build an engine from settings: open the store and WAL, catch up, load indexes.

    Raises:
        StorageError: the database cannot be opened.
        ConfigError: a setting is invalid.
    """
    if settings.storage != "kuzu":  # lcg.storage.falkordb exists; the engine is not wired to it
        raise ConfigError(
            f"LCG_STORAGE={settings.storage}: the engine runs on the embedded Kuzu store only "
            "so far (server mode is issue 19, in progress)"
        )
    private_dir(settings.home)
    # The embedder first (API.md §4.7: probe, then open the database): a bad one opens nothing.
    cached = build_embedder(settings, embedder)
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    wal.lock()  # before the database: a second writer of this WAL touches nothing
    try:
        store = Store(settings.db_path, buffer_pool_mb=settings.kuzu_buffer_pool_mb)
    except BaseException:
        wal.unlock()
        raise
    engine = Engine(settings, store, wal, cached, events)
    try:
        engine.startup()
    except BaseException:
        with contextlib.suppress(Exception):
            engine.close()
        raise
    return engine
