"""What one commit carries: a `Batch` of one group's operations (with the vectors they need),
an ingested episode's `EpisodeCommit`, the shape check an episode commit passes before
anything is embedded or locked, the reference check it passes under the lock, and the WAL
operations of one episode or of several consecutive episodes of a group (`episode_ops`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import InitVar, dataclass, field
from datetime import datetime
from typing import Any

from lcg.embedding import stamp
from lcg.embedding.base import EmbedderIdentity
from lcg.engine.replay import position_key
from lcg.errors import InvalidRequestError
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage.backend import Commit, GraphBackend, GraphReader, GraphWriter
from lcg.timeutil import now, to_wal
from lcg.wal.changes import Change, EpisodeDelete, GroupPurge, decode_all
from lcg.wal.layout import encode_group
from lcg.wal.reader import parse_line
from lcg.wal.records import Op, encode_batch, entity_op, episode_op, fact_op

__all__ = [
    "Batch",
    "EpisodeCommit",
    "Invalidation",
    "check_commit_references",
    "check_commit_shape",
    "episode_ops",
    "first_vectors",
    "settle_stamp",
    "stamp_meta",
    "store_commit",
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
    # Uuids of the episode, entities and facts above that the caller minted while planning (so
    # no stored row has them): they are created without being looked up first. A stored uuid
    # given here makes the commit fail on the primary key, writing nothing.
    new: frozenset[str] = frozenset()


@dataclass
class Batch:
    """Operations of one group, plus the vectors they need (computed before the lock).

    `apply`, when given, applies the operations in the commit's transaction instead of
    `GraphWriter.apply_ops` (a raw statement whose rows its caller keeps: lcg.admin.cypher).
    `new`: uuids of rows the operations create that the caller minted (`EpisodeCommit.new`).
    `changes`: the operations decoded once (`lcg.wal.changes`), for the stamp checks below and
    the in-memory projections once the batch is durable; `decoded` hands over a decoding the
    caller already made.

    Raises:
        WalOpError: an operation does not decode (nothing is committed).
    """

    group_id: str
    ops: list[Op]
    vectors: list[EmbeddingRow] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    apply: Callable[[GraphWriter], object] | None = None
    new: frozenset[str] = frozenset()
    decoded: InitVar[list[Change] | None] = None
    changes: list[Change] = field(init=False, repr=False, compare=False)

    def __post_init__(self, decoded: list[Change] | None) -> None:
        self.changes = decoded if decoded is not None else decode_all(self.ops, self.group_id)


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


def _invalidate_op(inv: Invalidation) -> Op:
    return Op(
        "fact.invalidate",
        {
            "uuid": inv.fact_uuid,
            "invalid_at": to_wal(inv.invalid_at),
            "expired_at": to_wal(inv.expired_at),
        },
    )


def _mentions_op(commit: EpisodeCommit) -> Op:
    return Op(
        "mentions.add",
        {"episode": commit.episode.uuid, "entities": list(dict.fromkeys(commit.mentions))},
    )


def episode_ops(commits: Sequence[EpisodeCommit]) -> list[Op]:
    """The WAL operations of consecutive episodes of one group, committed as one batch.

    One episode: its entities, facts, supersessions, the episode and its mentions, in that
    order. Several (a code history, oldest first): the same final graph as committing them one
    after the other, in fewer operations. Each entity is written once, in its last version
    (entities are not versioned: a later upsert replaces an earlier one); a fact that a later
    episode of the batch ends is written already ended (its `invalid_at`/`expired_at` from that
    supersession); the supersessions of facts already stored follow in order, then every
    episode (each with its own reference time) and each episode's mentions.

    Raises:
        InvalidRequestError: no episode, or episodes of several groups (see also
            check_commit_shape).
    """
    if not commits:
        raise InvalidRequestError("no episode to commit", field="episode")
    group = commits[0].group_id
    for commit in commits:
        if commit.group_id != group:
            raise InvalidRequestError(
                f"episodes of groups '{group}' and '{commit.group_id}' in one commit",
                field="group_id",
            )
        check_commit_shape(commit)
    entities: dict[str, Entity] = {}
    facts: dict[str, Fact] = {}
    stored_ends: list[Invalidation] = []
    for commit in commits:
        for entity in commit.entities:
            entities[entity.uuid] = entity  # the last version, where it was first written
        for inv in commit.invalidations:
            created = facts.get(inv.fact_uuid)
            if created is None:
                stored_ends.append(inv)
            else:
                facts[inv.fact_uuid] = dataclasses.replace(
                    created, invalid_at=inv.invalid_at, expired_at=inv.expired_at
                )
        for fact in commit.facts:
            facts[fact.uuid] = fact
    ops = [entity_op(e) for e in entities.values()]
    ops += [fact_op(f) for f in facts.values()]
    ops += [_invalidate_op(inv) for inv in stored_ends]
    ops += [episode_op(c.episode) for c in commits]
    ops += [_mentions_op(c) for c in commits if c.mentions]
    return ops


def check_commit_references(conn: GraphReader, commits: Sequence[EpisodeCommit]) -> None:
    """Fact endpoints, mentions and superseded facts of the episodes must exist in the group,
    stored or written by the episodes themselves (the write lock held).

    Raises:
        InvalidRequestError: naming the missing rows.
    """
    group = commits[0].group_id
    own = {e.uuid for c in commits for e in c.entities}
    wanted = {u for c in commits for f in c.facts for u in (f.source_uuid, f.target_uuid)}
    wanted |= {u for c in commits for u in c.mentions}
    stored = conn.entities_by_uuids(wanted - own) if wanted - own else {}
    missing = sorted(u for u in wanted - own if u not in stored or stored[u].group_id != group)
    if missing:
        raise InvalidRequestError(
            f"entities {missing} do not exist in group '{group}'", field="facts"
        )
    created: set[str] = set()
    targets: list[str] = []
    for commit in commits:
        targets += [inv.fact_uuid for inv in commit.invalidations if inv.fact_uuid not in created]
        created |= {f.uuid for f in commit.facts}
    facts = conn.facts_by_uuids(targets) if targets else {}
    gone = sorted(u for u in targets if u not in facts or facts[u].group_id != group)
    if gone:
        raise InvalidRequestError(
            f"superseded facts {gone} do not exist in group '{group}'", field="invalidations"
        )


# The group's embedder stamp (lcg.embedding.stamp) is kept in each batch's transaction: it
# exists exactly while the group holds vectors, and names the embedder of its first ones.


def first_vectors(tx: GraphWriter, batch: Batch) -> bool:
    """Whether the batch writes the first vectors of its group (its ops already applied).

    A group the store has no applied position for has never had a commit: it holds no
    vectors, and asking the store (a scan of the Embedding table for the group, ~0.4 s CPU
    at 1M facts) is skipped, which a new group's first episode otherwise paid."""
    if any(isinstance(c, GroupPurge) for c in batch.changes):
        stamp.clear_stamp(tx, batch.group_id)
    if not batch.vectors:
        return False
    if tx.get_meta(position_key(batch.group_id)) is None:
        return tx.get_meta(stamp.stamp_key(batch.group_id), batch.group_id) is None
    return stamp.is_unstamped_and_empty(tx, batch.group_id)


def settle_stamp(tx: GraphWriter, batch: Batch, first: bool, identity: EmbedderIdentity) -> None:
    """Stamp the group with `identity` if the batch wrote its first vectors; clear the stamp
    if the batch may have removed its last ones."""
    if first:
        stamp.write_stamp(tx, batch.group_id, identity)
    elif not batch.vectors and (
        batch.stale or any(isinstance(c, EpisodeDelete) for c in batch.changes)
    ):
        stamp.clear_if_empty(tx, batch.group_id)  # the last vectors may have gone


def stamp_meta(r: GraphReader, batch: Batch, identity: EmbedderIdentity) -> dict[str, str | None]:
    """`first_vectors` and `settle_stamp` for a store that applies a commit whole (one
    `GraphBackend.commit`, which reads cannot see into): the group's stamp entry the batch sets
    or clears, decided from the state before it."""
    key = stamp.stamp_key(batch.group_id)
    purged = any(isinstance(c, GroupPurge) for c in batch.changes)
    stamped = not purged and r.get_meta(key, batch.group_id) is not None
    if batch.vectors:
        if stamped:
            return {}
        empty = purged or not r.embedding_hashes(batch.group_id, limit=1)
        return {key: stamp.encode_stamp(identity)} if empty else {}
    gone = set(batch.stale) | {
        f"episode:{c.uuid}" for c in batch.changes if isinstance(c, EpisodeDelete)
    }
    if purged:
        return {key: None}
    if stamped and gone:
        left = r.embedding_hashes(batch.group_id, limit=len(gone) + 1)
        if set(left) <= gone:  # every vector the group still holds goes with this batch
            return {key: None}
    return {}


def store_commit(
    db: GraphBackend,
    batch: Batch,
    identity: EmbedderIdentity,
    logged: Sequence[bytes] | None = None,
    at: int | None = None,
) -> tuple[int, int]:
    """Commit one batch to a store that keeps the WAL itself (server mode, docs/design.md): its
    lines go to the store with the graph change in one `GraphBackend.commit`, at position `at`
    (the one the batch was planned against: `lcg.engine.follow`), else at the group's position
    as the store has it now (write lock held). `logged`: the batch's WAL lines, verbatim (`lcg
    wal import`), whose first seq must be that position. Returns the batch's (first, last) seq.

    Raises:
        InvalidRequestError: the batch applies itself (a raw Cypher mutation), or `logged`
            does not continue the group's stream.
        GroupMovedError: another process committed to the group first (nothing applied).
        StorageError: the store refused the commit.
    """
    if batch.apply is not None:
        raise InvalidRequestError(
            f"raw Cypher mutations are logged as Kuzu statements and run on the embedded "
            f"store only, not on LCG_STORAGE={db.backend}",
            field="query",
        )
    with db.read_for_write() as r:
        first = (r.position(batch.group_id) or 0) if at is None else at
        meta = stamp_meta(r, batch, identity)
    last = first + len(batch.ops) - 1
    lines = encode_batch(first, to_wal(now()) or "", batch.ops)
    if logged is not None:
        if len(logged) != len(batch.ops):
            raise ValueError("logged lines: one per operation of the batch")
        given = parse_line(logged[0])
        if given is None or given.seq != first:
            raise InvalidRequestError(
                f"group {batch.group_id!r}: the imported WAL continues at seq "
                f"{None if given is None else given.seq}, the store holds {first} lines",
                field="directory",
            )
        lines = list(logged)
    c = Commit(batch.group_id, batch.ops, first, last, lines, batch.vectors, batch.stale, meta)
    db.commit([c])
    return first, last
