"""What an in-memory projection of the WAL is: something that follows each committed batch of
typed changes (`lcg.wal.changes`) in place, and is re-derived from the store when what it holds
of a group no longer matches it. Three implement it: the name index
(`lcg.engine.namekeeper.NameKeeper`), the search index (`lcg.search.index.SearchIndex`) and the
ingest pipeline's group index (`lcg.ingest.index.GroupIndex`); the first two are also saved for
the next open (`SavedProjection`).

Who drives them: the kernel's commit path and the server-mode follower give every committed
batch to the engine's projections (`apply`), and a replay or a batch they cannot read has them
reload the group (`reload`); the ingest pipeline gives its group index the batches of other
processes' commits (`lcg.ingest.catchup`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from lcg.models import EmbeddingRow
from lcg.wal.changes import Change

__all__ = ["Projection", "SavedProjection"]


class Projection(Protocol):
    """An in-memory projection that follows the WAL."""

    def apply(self, group: str, changes: Sequence[Change], vectors: Sequence[EmbeddingRow]) -> None:
        """Take a committed batch of `changes` to `group` in place (`vectors`: the batch's
        embedding rows). A change it cannot take in place makes it reload what it holds of the
        group (or of every group) instead, as `reload` does."""

    def reload(self, groups: Sequence[str] | None = None) -> None:
        """What it holds of `groups` (None: every group) no longer matches the store: re-derive
        it from the store, now or on its next use."""


class SavedProjection(Projection, Protocol):
    """A projection saved beside the database for the next open to read back."""

    def save(self) -> object:
        """(At close.) Save it; a failure only means re-deriving it at the next open."""
