"""What one commit carries: a `Batch` of one group's operations (with the vectors they need),
an ingested episode's `EpisodeCommit`, and the shape check an episode commit passes before
anything is embedded or locked."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lcg.embedding import stamp
from lcg.embedding.base import EmbedderIdentity
from lcg.errors import InvalidRequestError
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage.store import Conn
from lcg.wal.layout import encode_group
from lcg.wal.records import Op

__all__ = [
    "Batch",
    "EpisodeCommit",
    "Invalidation",
    "check_commit_shape",
    "first_vectors",
    "settle_stamp",
]


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


def check_commit_shape(commit: EpisodeCommit) -> None:
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


# The group's embedder stamp (lcg.embedding.stamp) is kept in each batch's transaction: it
# exists exactly while the group holds vectors, and names the embedder of its first ones.


def first_vectors(tx: Conn, batch: Batch) -> bool:
    """Whether the batch writes the first vectors of its group (its ops already applied)."""
    if any(op.name == "group.purge" for op in batch.ops):
        stamp.clear_stamp(tx, batch.group_id)
    return bool(batch.vectors) and stamp.is_unstamped_and_empty(tx, batch.group_id)


def settle_stamp(tx: Conn, batch: Batch, first: bool, identity: EmbedderIdentity) -> None:
    """Stamp the group with `identity` if the batch wrote its first vectors; clear the stamp
    if the batch may have removed its last ones."""
    if first:
        stamp.write_stamp(tx, batch.group_id, identity)
    elif not batch.vectors and (
        batch.stale or any(op.name == "episode.delete" for op in batch.ops)
    ):
        stamp.clear_if_empty(tx, batch.group_id)  # the last vectors may have gone
