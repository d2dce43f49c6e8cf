"""Keeping the name index (`lcg.engine.names.NameIndex`) in step with the store: the projection
of the WAL that `Engine.names` resolves over (`lcg.wal.projection.SavedProjection`).

`NameKeeper` owns its load at open (from the copy saved beside an embedded database, else from
the rows of the bulk replays just done, else from a scan of every entity), each committed batch
applied in place (`apply`), the reload from a scan when it is out of date (`reload`: raw Cypher,
a replay, a batch this version cannot read) and the save at close. Every method expects the
write lock held.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from lcg.engine.names import NameIndex, NameRow, names_stamp
from lcg.errors import StorageError
from lcg.gcpause import no_gc
from lcg.models import EmbeddingRow
from lcg.storage.backend import GraphBackend, GraphReader
from lcg.wal.changes import (
    Change,
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
)

__all__ = ["NameKeeper"]

logger = logging.getLogger(__name__)


class NameKeeper:
    """One engine's name index, kept in step with its store."""

    def __init__(
        self, store: Callable[[], GraphBackend], names: NameIndex, saved: Path | None
    ) -> None:
        self._store = store
        self._names = names
        # Where the index is saved: next to an embedded database only, as the search index.
        self._saved = saved
        # The name index rows of the bulk replays since the last `load`, and the database's
        # `names_stamp` after the last of them (`note_replayed`).
        self._replayed: tuple[list[NameRow], dict[str, Any]] | None = None

    def _read(self, fn: Callable[[GraphReader], Any]) -> Any:
        with self._store().read() as conn:
            return fn(conn)

    def _scan(self) -> None:
        """The index loaded from a scan of every entity of the store."""
        self._names.load(self._read(lambda r: r.name_rows()))

    def apply(self, group: str, changes: Sequence[Change], vectors: Sequence[EmbeddingRow]) -> None:
        """Bring the index up to a commit of `changes` to `group` (raw Cypher: a reload)."""
        names = self._names
        for change in changes:
            match change:
                case EntityUpsert(e):
                    names.put(group, e.name, e.uuid, e.created_at, "Merged" in e.labels)
                case GroupPurge():
                    names.drop_group(group)
                case CypherExec():
                    self.reload()
                case (
                    FactUpsert() | EpisodeAdd() | FactInvalidate() | EpisodeDelete() | MentionsAdd()
                ):
                    pass

    def reload(self, groups: Sequence[str] | None = None) -> None:
        """The whole index read again from the store, whichever `groups` changed (one scan of
        every entity); a failed read leaves it untrusted (name lookups then ask the store)."""
        try:
            self._scan()
        except StorageError:
            logger.exception("name index reload failed; marking it untrusted")
            self._names.trusted = False

    def note_replayed(self, rows: list[NameRow] | None) -> None:
        """(After a group's replay.) Keep a bulk replay's name index rows for `load`, with the
        database's stamp now; a replay that handed over none forgets them all."""
        if rows is None:
            self._replayed = None
            return
        kept = self._replayed[0] if self._replayed is not None else []
        kept.extend(rows)
        self._replayed = (kept, self._read(names_stamp))

    def load(self) -> None:
        """(At open.) The index from its saved copy when that matches the database, else from
        the rows of the bulk replays just done when they are every entity of the database (an
        open with no database: no read of 500k entities back), else from a scan of every
        entity."""
        saved = self._saved
        replayed, self._replayed = self._replayed, None
        stamp = self._read(names_stamp) if saved is not None or replayed is not None else None
        if saved is not None and self._names.restore(saved, stamp or {}):
            return
        if replayed is not None and replayed[1] == stamp and len(replayed[0]) == stamp["entities"]:
            # Nothing changed since the bulk replays, and the database holds no other entity
            # than the ones they loaded: their rows are what the scan would read.
            self._names.load(replayed[0])
            return
        with no_gc():  # a row object per entity, none of them garbage (lcg.gcpause)
            self._scan()

    def save(self) -> None:
        """(At close.) Save the index for the next open, beside an embedded database."""
        if self._saved is not None:
            self._names.save(self._saved, self._read(names_stamp))
