"""The search index's load ahead of the first search, and the model it answers with.

`SearchWarmup` owns settling the search index's embedder (the model that made the workspace's
vectors, while a re-embed has not restamped them: lcg.admin.reembed) and loading the partitions
of some or every group at open and after a rebuild (`warm`: a failure only defers the load to
the next search). `PrebuiltSearch` is the `loaded` step of a bulk replay
(lcg.engine.replay.Loaded): the group's partitions built from the rows the replay folded,
installed once the replay's aftermath (lcg.engine.aftermath) dropped the old ones.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence

from lcg.config import Settings
from lcg.embedding import stamp
from lcg.embedding.base import Embedder
from lcg.embedding.select import embedder_for_stamp
from lcg.engine.names import NameRow, name_rows_of
from lcg.search.floor import vector_floor
from lcg.search.index import SearchIndex
from lcg.search.partition import Partition
from lcg.storage.backend import GraphBackend
from lcg.wal.fold import FoldedGroup

__all__ = ["PrebuiltSearch", "SearchWarmup"]

logger = logging.getLogger(__name__)


class PrebuiltSearch:
    """A group's search partitions built from the rows of its bulk replay (`loaded` of
    lcg.engine.replay, `SearchIndex.build_from_rows`), installed by `install` once the replay's
    aftermath (which drops the group's partitions) is done: no read of the rows back from the
    database, no second pass over the embedding cache by text. Also the group's name index
    rows (`name_rows_of`), which `NameKeeper.load` (lcg.engine.namekeeper) may use instead of
    a scan."""

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


class SearchWarmup:
    """One engine's search index, loaded ahead of its searches with the right model."""

    def __init__(
        self,
        store: Callable[[], GraphBackend],
        settings: Settings,
        embedder: Embedder,
        search: SearchIndex,
    ) -> None:
        self._store = store
        self._settings = settings
        self._embedder = embedder
        self._search = search

    def settle_embedder(self) -> None:
        """Answer searches with the model that made the workspace's vectors: while groups are
        stamped by one other model that loads offline, with that one (until a re-embed,
        lcg.admin.reembed, restamps them); otherwise with the embedder in use."""
        with self._store().read() as conn:
            found = stamp.foreign_stamp(conn, self._embedder.identity)
        current = self._search.embedder.identity
        if found == (current.model, current.dim):
            return
        wanted = embedder_for_stamp(self._settings, *found) if found is not None else None
        target = wanted or self._embedder
        if current == target.identity:
            return
        floor = vector_floor(target.identity, self._settings.search_vector_floor)
        self._search.swap_embedder(target, floor)
        model = self._embedder.identity.model
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

    def warm(self, groups: Sequence[str] | None = None) -> bool:
        """Load the search index of `groups` (None: all) now rather than on the first search;
        whether it loaded (a failure only defers the load to the next search)."""
        try:
            self.settle_embedder()
            self._search.warm(groups)
        except Exception:  # derived data: a failed load must not fail the open or the rebuild
            logger.exception("search index load failed; it is retried on the next search")
            self._search.reload(groups)
            return False
        return True
