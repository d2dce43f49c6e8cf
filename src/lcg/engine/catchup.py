"""Startup catch-up from the WAL: how to bring each group up to its WAL (a bulk replay of a group
the database lacks, a tail beyond its applied position, or nothing: a position unknown, a
bounded restore's lines held back) and the replay that does it (`Replay`, the step `open_engine`
was given). What the replay leaves behind is lcg.engine.aftermath's; the name index rows and
search partitions a bulk replay hands over go to lcg.engine.namekeeper and
lcg.engine.warmup.PrebuiltSearch. The WAL problems kept for `knowledge_status` are
`lcg.engine.walproblems`'s.

The kernel runs it at open (`open_engine`, `Engine.reopen`), after a failed commit and for an
imported WAL (lcg.engine.modes); the check of applied batches (lcg.engine.applied) replays
through it. Every method that writes expects the write lock held.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from lcg.config import Settings
from lcg.embedding.base import Embedder
from lcg.engine.aftermath import Aftermath
from lcg.engine.namekeeper import NameKeeper
from lcg.engine.replay import Loaded, ReplayReport, applied_position, position_key
from lcg.engine.warmup import PrebuiltSearch
from lcg.search.index import SearchIndex
from lcg.storage.backend import GraphBackend, GraphReader
from lcg.wal.writer import Wal

__all__ = ["CatchUp", "Replay", "group_has_data"]

logger = logging.getLogger(__name__)


def group_has_data(conn: GraphReader, group_id: str) -> bool:
    """Whether the group holds any row."""
    return any(conn.group_counts(group_id).values())


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


class CatchUp:
    """One engine's catch-up from the WAL (its store, WAL and replay step)."""

    def __init__(
        self,
        store: Callable[[], GraphBackend],
        wal: Wal,
        settings: Settings,
        embedder: Embedder,
        replay: Replay,
        aftermath: Aftermath,
        names: NameKeeper,
        search: SearchIndex,
    ) -> None:
        self._store = store
        self._wal = wal
        self._settings = settings
        self._embedder = embedder
        self.replay = replay
        self._aftermath = aftermath
        self._names = names
        self._search = search  # what a bulk replay builds partitions of (`prebuilt_search`)

    def prebuilt_search(self) -> PrebuiltSearch:
        """The `loaded` step of a bulk replay that builds the group's search partitions."""
        return PrebuiltSearch(self._search)

    def catch_up_plan(self, group_id: str) -> tuple[str, int] | None:
        """How to bring a group up to its WAL: ("bulk", n) or ("tail", n) operations, or None."""
        bounds = self._wal.bounds(group_id)
        if bounds.max_seq is None:
            return None
        generation = self._wal.generation(group_id)
        with self._store().read_for_write() as conn:
            position = applied_position(conn, group_id)
            has_data = group_has_data(conn, group_id)
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

    def _replay(
        self,
        group_id: str,
        generation: str | None,
        *,
        from_seq: int = 0,
        to_seq: int | None = None,
        loaded: PrebuiltSearch | None = None,
    ) -> ReplayReport:
        """The replay step over the group's WAL files (a bulk load when `loaded` is given)."""
        return self.replay(
            self._store(),
            self._wal.directory(group_id),
            group_id,
            self._embedder,
            generation=generation,
            from_seq=from_seq,
            to_seq=to_seq,
            bulk_load=loaded is not None,
            batch_size=self._settings.replay_batch_size,
            loaded=loaded,
        )

    def catch_up(self, group_id: str, plan: tuple[str, int] | None = None) -> ReplayReport | None:
        """Apply what the group's WAL holds beyond its applied position (write lock held)."""
        plan = plan if plan is not None else self.catch_up_plan(group_id)
        if plan is None:
            return None
        generation = self._wal.generation(group_id)
        if plan[0] == "bulk":
            prebuilt = self.prebuilt_search()
            report = self._replay(group_id, generation, loaded=prebuilt)
            self._aftermath.replayed(report, full=True, prebuilt=prebuilt)
            self._names.note_replayed(prebuilt.name_rows())
        else:
            with self._store().read_for_write() as conn:
                position = applied_position(conn, group_id)
            assert position is not None and position[0] is not None
            report = self._replay(group_id, generation, from_seq=position[0] + 1)
            self._aftermath.replayed(report, full=False, prebuilt=None)
            self._names.note_replayed(None)
        self._aftermath.emit_replay(report)
        return report

    def replay_range(
        self, group_id: str, generation: str | None, from_seq: int, to_seq: int
    ) -> ReplayReport:
        """Replay seqs `from_seq`..`to_seq` of the group's WAL again, in place, with the
        aftermath of a tail (write lock held; lcg.engine.applied)."""
        report = self._replay(group_id, generation, from_seq=from_seq, to_seq=to_seq)
        self._aftermath.replayed(report, full=False, prebuilt=None)
        self._aftermath.emit_replay(report)
        return report
