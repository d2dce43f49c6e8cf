"""What a replay of a group leaves behind, whichever pass replayed it: the catch-up at open
(lcg.engine.catchup), the check of applied batches (lcg.engine.applied) and a rebuild
(lcg.admin.rebuild, through lcg.engine.exclusive).

`Aftermath` owns the embedder stamp of a group re-derived whole, the record of the batches the
replay could not apply (`WalProblems.record_losses`), the projections' reload of the group (its
search partitions replaced by those its bulk load built; for a rebuild the name index too), the
hops of cross-group facts rewired, and the `wal_replay_complete` event. Every method that
writes expects the write lock held.
"""

from __future__ import annotations

from collections.abc import Callable

from lcg.config import Settings
from lcg.embedding import stamp
from lcg.embedding.base import Embedder
from lcg.engine.replay import ReplayReport
from lcg.engine.walproblems import WalProblems
from lcg.engine.warmup import PrebuiltSearch
from lcg.search.index import SearchIndex
from lcg.storage.backend import GraphBackend
from lcg.telemetry import EventSink
from lcg.wal.projection import Projection

__all__ = ["Aftermath"]


class Aftermath:
    """One engine's aftermath of a replay (its store, embedder, WAL problems and projections)."""

    def __init__(
        self,
        store: Callable[[], GraphBackend],
        settings: Settings,
        embedder: Embedder,
        events: EventSink,
        problems: WalProblems,
        search: SearchIndex,
        names: Projection,
    ) -> None:
        self._store = store
        self._settings = settings
        self._embedder = embedder
        self._events = events
        self._problems = problems
        self._search = search
        self._names = names

    def replayed(
        self, report: ReplayReport, *, full: bool, prebuilt: PrebuiltSearch | None
    ) -> None:
        """What every replay of a group leaves behind (write lock held): the embedder stamp
        (`_stamp`), the batches it could not apply, the group's search partitions reloaded,
        then the ones its bulk load built (`prebuilt`) served. The catch-up at open goes on
        from here (the name index loaded once every group is caught up, the events, the
        cross-group hops); a rebuild from `rebuilt`."""
        group_id = report.group_id
        self._stamp(group_id, full=full)
        self._problems.record_losses(report, full=full)
        self._search.reload([group_id])
        if prebuilt is not None:
            prebuilt.install(group_id)

    def rebuilt(self, report: ReplayReport, *, full: bool, prebuilt: PrebuiltSearch | None) -> None:
        """A rebuild's replay of a group (write lock held): `replayed`, then the name index
        reloaded and the cross-group hops rewired."""
        self.replayed(report, full=full, prebuilt=prebuilt)
        self._names.reload([report.group_id])
        self.rewire_cross_group()

    def _stamp(self, group_id: str, full: bool) -> None:
        """A group re-derived whole (`full`) holds only vectors of the embedder in use, so it
        is stamped with it; a tail leaves the stamp as it was."""
        if not full:
            return
        with self._store().read_for_write() as conn:
            if not stamp.restamp_wanted(conn, group_id, self._embedder.identity):
                return  # a bulk replay stamps the group in its own transaction
        with self._store().transaction() as tx:
            stamp.restamp_group(tx, group_id, self._embedder.identity)

    def emit_replay(self, report: ReplayReport) -> None:
        self._events.emit(
            "wal_replay_complete",
            **report.to_wire(
                self._settings.replay_failure_samples, self._settings.replay_fidelity_threshold
            ),
        )

    def rewire_cross_group(self) -> None:
        """Restore the hops of cross-group facts into entities replayed after them (derived)."""
        with self._store().transaction() as tx:
            tx.rewire_hops()
