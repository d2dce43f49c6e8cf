"""Startup catch-up and what a replay leaves behind: bringing each group up to its WAL, the
applied positions, and the derived state a replay refreshes (names, search, cross-group hops,
the embedder stamp). The WAL problems kept for `knowledge_status` are `lcg.engine.walproblems`'s.

The kernel runs it at open (`open_engine`, `Engine.reopen`) and after a failed commit; the
admin area's rebuild (`lcg.admin.rebuild`) drives the same pieces through `lcg.engine.exclusive`. Every
method that writes expects the write lock held.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol

from lcg.config import Settings
from lcg.embedding import stamp
from lcg.embedding.base import Embedder
from lcg.embedding.select import embedder_for_stamp
from lcg.engine.names import NameIndex, NameRow, name_rows_of, names_stamp
from lcg.engine.replay import Loaded, ReplayReport, applied_position, position_key
from lcg.engine.walproblems import WalProblems
from lcg.errors import StorageError
from lcg.gcpause import no_gc
from lcg.search.floor import vector_floor
from lcg.search.index import SearchIndex
from lcg.search.partition import Partition
from lcg.storage.backend import GraphBackend, GraphReader
from lcg.telemetry import EventSink
from lcg.wal.fold import FoldedGroup
from lcg.wal.writer import Wal

__all__ = ["CatchUp", "PrebuiltSearch", "Replay"]

logger = logging.getLogger(__name__)


class Replay(Protocol):
    """The replay step (`lcg.engine.replay.replay_group`, or what `open_engine` was given)."""

    def __call__(
        self,
        store: GraphBackend,
        directory: Path,
        group_id: str,
        embedder: Embedder,
        *,
        generation: str | None,
        from_seq: int = 0,
        to_seq: int | None = None,
        bulk_load: bool = False,
        batch_size: int = ...,
        progress: Callable[[dict[str, Any]], None] | None = None,
        loaded: Loaded | None = None,
    ) -> ReplayReport: ...


class PrebuiltSearch:
    """A group's search partitions built from the rows of its bulk replay (`loaded` of
    lcg.engine.replay, `SearchIndex.build_from_rows`), installed by `install` once the replay's
    aftermath (which drops the group's partitions) is done: no read of the rows back from the
    database, no second pass over the embedding cache by text. Also the group's name index
    rows (`name_rows_of`), which `CatchUp.load_names` may use instead of a scan."""

    def __init__(self, search: SearchIndex) -> None:
        self._search = search
        self._parts: dict[str, Partition] = {}
        self._model = ""
        self._names: list[NameRow] | None = None
        self._discarded = False
        self._lock = threading.Lock()

    def build(self, folded: FoldedGroup) -> None:
        """(The replay's `Loaded.build`: in a thread, while the rows load.)"""
        model = self._search.embedder.identity.model
        names = name_rows_of(folded.entities.values())
        try:
            parts = self._search.build_from_rows(
                list(folded.entities.values()),
                list(folded.facts.values()),
                list(folded.episodes.values()),
            )
        except Exception:  # derived data: the partitions then load from the database
            logger.exception("search partitions of a bulk replay not built; loaded later")
            parts = {}
        with self._lock:
            if not self._discarded:
                self._parts, self._model, self._names = parts, model, names

    def discard(self) -> None:
        with self._lock:
            self._discarded = True
            self._parts = {}
            self._names = None

    def install(self, group_id: str) -> None:
        """Serve the partitions (write lock held; the database holds exactly their rows)."""
        with self._lock:
            parts, self._parts = self._parts, {}
        if parts:
            self._search.install(group_id, parts, self._model)

    def name_rows(self) -> list[NameRow] | None:
        """The group's name index rows (None: the load failed, or did not hand its rows over)."""
        with self._lock:
            return self._names


class CatchUp:
    """One engine's catch-up machinery (its store, WAL, indexes and replay step)."""

    def __init__(
        self,
        store: Callable[[], GraphBackend],
        wal: Wal,
        settings: Settings,
        embedder: Embedder,
        events: EventSink,
        names: NameIndex,
        search: SearchIndex,
        replay: Replay,
        problems: WalProblems,
        *,
        saves_indexes: bool,
    ) -> None:
        self._store = store
        self.problems = problems  # what a replay could not apply is recorded there
        self._saves_indexes = saves_indexes  # beside local database files (lcg.engine.modes)
        self._wal = wal
        self.settings = settings
        self.embedder = embedder
        self.events = events
        self._names = names
        self._search = search
        self.replay = replay
        # The name index rows of the bulk replays since the last `load_names`, and the
        # database's `names_stamp` after the last of them (`_note_names`).
        self._replayed_names: tuple[list[NameRow], dict[str, Any]] | None = None

    def _read(self, fn: Callable[[GraphReader], Any]) -> Any:
        with self._store().read() as conn:
            return fn(conn)

    def prebuilt_search(self) -> PrebuiltSearch:
        """The `loaded` step of a bulk replay that builds the group's search partitions."""
        return PrebuiltSearch(self._search)

    def position(self, conn: GraphReader, group_id: str) -> tuple[int | None, str | None] | None:
        return applied_position(conn, group_id)

    def group_has_data(self, conn: GraphReader, group_id: str) -> bool:
        return any(conn.group_counts(group_id).values())

    def catch_up_plan(self, group_id: str) -> tuple[str, int] | None:
        """How to bring a group up to its WAL: ("bulk", n) or ("tail", n) operations, or None."""
        bounds = self._wal.bounds(group_id)
        if bounds.max_seq is None:
            return None
        generation = self._wal.generation(group_id)
        with self._store().read_for_write() as conn:
            position = self.position(conn, group_id)
            has_data = self.group_has_data(conn, group_id)
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
            held = self.held_through(group_id)
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

    def held_through(self, group_id: str) -> int | None:
        with self._store().read_for_write() as conn:
            raw = conn.get_meta(position_key(group_id))
        held = json.loads(raw).get("held_through") if raw else None
        return held if isinstance(held, int) else None

    def catch_up(self, group_id: str, plan: tuple[str, int] | None = None) -> ReplayReport | None:
        """Apply what the group's WAL holds beyond its applied position (write lock held)."""
        plan = plan if plan is not None else self.catch_up_plan(group_id)
        if plan is None:
            return None
        generation = self._wal.generation(group_id)
        directory = self._wal.directory(group_id)
        with self._store().read_for_write() as conn:
            position = self.position(conn, group_id)
        prebuilt = self.prebuilt_search()
        if plan[0] == "bulk":
            report = self.replay(
                self._store(),
                directory,
                group_id,
                self.embedder,
                generation=generation,
                bulk_load=True,
                batch_size=self.settings.replay_batch_size,
                loaded=prebuilt,
            )
        else:
            assert position is not None and position[0] is not None
            report = self.replay(
                self._store(),
                directory,
                group_id,
                self.embedder,
                generation=generation,
                from_seq=position[0] + 1,
                batch_size=self.settings.replay_batch_size,
            )
        self.replayed(report, full=plan[0] == "bulk", prebuilt=prebuilt)
        self._note_names(prebuilt.name_rows() if plan[0] == "bulk" else None)
        self.emit_replay(report)
        return report

    def _note_names(self, rows: list[NameRow] | None) -> None:
        """(After a group's replay.) Keep a bulk replay's name index rows for `load_names`, with
        the database's stamp now; a replay that handed over none forgets them all."""
        if rows is None:
            self._replayed_names = None
            return
        kept = self._replayed_names[0] if self._replayed_names is not None else []
        kept.extend(rows)
        self._replayed_names = (kept, self._read(names_stamp))

    def replayed(
        self, report: ReplayReport, *, full: bool, prebuilt: PrebuiltSearch | None
    ) -> None:
        """What every replay of a group leaves behind, whichever mode replayed it (write lock
        held): the embedder stamp (`stamp_replayed`), the batches it could not apply
        (`WalProblems.record_losses`), the group's search partitions dropped, then the ones its
        bulk load built (`prebuilt`) served. The catch-up at open and a rebuild
        (lcg.admin.rebuild) go on from here: the names, the events, the cross-group hops."""
        group_id = report.group_id
        self.stamp_replayed(group_id, full=full)
        self.problems.record_losses(report, full=full)
        self._search.invalidate([group_id])
        if prebuilt is not None:
            prebuilt.install(group_id)

    def stamp_replayed(self, group_id: str, full: bool) -> None:
        """After a replay (write lock held): a group re-derived whole (`full`) holds only vectors
        of the embedder in use, so it is stamped with it; a tail leaves the stamp as it was."""
        if not full:
            return
        with self._store().read_for_write() as conn:
            if not stamp.restamp_wanted(conn, group_id, self.embedder.identity):
                return  # a bulk replay stamps the group in its own transaction
        with self._store().transaction() as tx:
            stamp.restamp_group(tx, group_id, self.embedder.identity)

    def emit_replay(self, report: ReplayReport) -> None:
        self.events.emit(
            "wal_replay_complete",
            **report.to_wire(
                self.settings.replay_failure_samples, self.settings.replay_fidelity_threshold
            ),
        )

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
                "knowledge_backfill_summary_embeddings re-embeds it with %s",
                found[0],
                model,
            )
        else:
            logger.warning(
                "this workspace was embedded with %s, which cannot be loaded here: search "
                "embeds with %s as it loads; knowledge_backfill_summary_embeddings makes it "
                "permanent",
                found[0],
                model,
            )

    def warm_search(self, groups: Sequence[str] | None = None) -> bool:
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

    def _names_saved(self) -> Path | None:
        """Where the name index is saved (lcg.engine.names): next to an embedded database only,
        as the search index."""
        if not self._saves_indexes:
            return None
        return self.settings.db_path.parent / "name-index"

    def load_names(self) -> None:
        """(Write lock held.) The name index from its saved copy when that matches the
        database, else from the rows of the bulk replays just done when they are every entity
        of the database (an open with no database: no read of 500k entities back), else from a
        scan of every entity."""
        saved = self._names_saved()
        replayed, self._replayed_names = self._replayed_names, None
        stamp = self._read(names_stamp) if saved is not None or replayed is not None else None
        if saved is not None and self._names.restore(saved, stamp or {}):
            return
        if replayed is not None and replayed[1] == stamp and len(replayed[0]) == stamp["entities"]:
            # Nothing changed since the bulk replays, and the database holds no other entity
            # than the ones they loaded: their rows are what the scan would read.
            self._names.load(replayed[0])
            return
        with no_gc():  # a row object per entity, none of them garbage (lcg.gcpause)
            self._names.load(self._read(lambda r: r.name_rows()))

    def save_indexes(self) -> None:
        """(Write lock held, at close.) Save the search and name indexes for the next open:
        derived data, so a failed save only means rebuilding it at the next open."""
        try:
            self._search.save()
        except Exception:
            logger.exception("search index: could not save it for the next open")
        try:
            saved = self._names_saved()
            if saved is not None:
                self._names.save(saved, self._read(names_stamp))
        except Exception:
            logger.exception("name index: could not save it for the next open")

    def reload_names(self) -> None:
        try:
            self._names.load(self._read(lambda r: r.name_rows()))
        except StorageError:
            logger.exception("name index reload failed; marking it untrusted")
            self._names.trusted = False

    def rewire_cross_group(self) -> None:
        """Restore the hops of cross-group facts into entities replayed after them (derived)."""
        with self._store().transaction() as tx:
            tx.rewire_hops()
