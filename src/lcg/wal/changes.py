"""The WAL's operations as typed values: one frozen class per operation name (`Change`).

`decode` turns an `Op` (a name and its JSON data, as `lcg.wal.records` reads and writes it)
into its change once, checking the data's shape in one place; `encode` is its inverse, so
`encode(decode(op, g)) == op` for every operation lcg writes. Consumers (the store backends,
the in-memory indexes) `match` on the classes instead of comparing names. `runs` cuts a commit's
changes into the runs a store applies together: consecutive changes of one class, except
those that stand alone (`MentionsAdd`, `GroupPurge`, `CypherExec`).

A change of a row carries the row (`lcg.models`), so it needs the group the stream belongs to
(`decode`'s `group_id`; the WAL never stores it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lcg.errors import WalOpError
from lcg.models import Entity, Episode, Fact
from lcg.timeutil import from_wal, to_wal
from lcg.wal.records import (
    OPS,
    Op,
    data_to_entity,
    data_to_episode,
    data_to_fact,
    entity_op,
    episode_op,
    fact_op,
)

__all__ = [
    "Change",
    "CypherExec",
    "EntityUpsert",
    "EpisodeAdd",
    "EpisodeDelete",
    "FactInvalidate",
    "FactUpsert",
    "GroupPurge",
    "MentionsAdd",
    "decode",
    "decode_all",
    "encode",
    "runs",
]


@dataclass(frozen=True, slots=True)
class EntityUpsert:
    """`entity.upsert`: a whole Entity row (create or replace)."""

    entity: Entity


@dataclass(frozen=True, slots=True)
class FactUpsert:
    """`fact.upsert`: a whole Fact row (create or replace; its hops follow source/target)."""

    fact: Fact


@dataclass(frozen=True, slots=True)
class EpisodeAdd:
    """`episode.add`: a whole Episode row."""

    episode: Episode


@dataclass(frozen=True, slots=True)
class FactInvalidate:
    """`fact.invalidate`: a fact's supersession; the row is kept."""

    uuid: str
    invalid_at: datetime | None
    expired_at: datetime | None


@dataclass(frozen=True, slots=True)
class EpisodeDelete:
    """`episode.delete`: the episode and its MENTIONS edges."""

    uuid: str


@dataclass(frozen=True, slots=True)
class MentionsAdd:
    """`mentions.add`: MENTIONS edges from an episode to entities (in the order given)."""

    episode: str
    entities: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GroupPurge:
    """`group.purge`: every episode, entity and fact of the stream's group."""


@dataclass(frozen=True, slots=True)
class CypherExec:
    """`cypher.exec`: a raw Cypher mutation, replayed verbatim."""

    query: str


Change = (
    EntityUpsert
    | FactUpsert
    | EpisodeAdd
    | FactInvalidate
    | EpisodeDelete
    | MentionsAdd
    | GroupPurge
    | CypherExec
)

# Changes a store applies one at a time (`runs`): never batched with their neighbours.
_ALONE = (MentionsAdd, GroupPurge, CypherExec)


def _key(data: dict[str, Any], key: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key} must be a non-empty string")
    return value


def _mentions(data: dict[str, Any], group_id: str) -> MentionsAdd:
    ents = data.get("entities")
    if not isinstance(ents, list) or not all(isinstance(u, str) for u in ents):
        raise ValueError("entities must be a list of strings")
    return MentionsAdd(_key(data, "episode"), tuple(ents))


def _cypher(data: dict[str, Any], group_id: str) -> CypherExec:
    query = data.get("query")
    if not isinstance(query, str):
        raise ValueError("query must be a string")
    return CypherExec(query)


_DECODERS: dict[str, Callable[[dict[str, Any], str], Change]] = {
    "entity.upsert": lambda d, g: EntityUpsert(data_to_entity(d, g)),
    "fact.upsert": lambda d, g: FactUpsert(data_to_fact(d, g)),
    "episode.add": lambda d, g: EpisodeAdd(data_to_episode(d, g)),
    "fact.invalidate": lambda d, g: FactInvalidate(
        _key(d, "uuid"), from_wal(d.get("invalid_at")), from_wal(d.get("expired_at"))
    ),
    "episode.delete": lambda d, g: EpisodeDelete(_key(d, "uuid")),
    "mentions.add": _mentions,
    "group.purge": lambda d, g: GroupPurge(),
    "cypher.exec": _cypher,
}
assert frozenset(_DECODERS) == OPS, "every WAL operation has its decoder"


def decode(op: Op, group_id: str) -> Change:
    """The change `op` (of the stream of `group_id`) says.

    Raises:
        WalOpError: the name is not a WAL operation, or its data lacks a field the operation
            needs or has one of the wrong type.
    """
    decoder = _DECODERS.get(op.name)
    if decoder is None:
        raise WalOpError(f"unknown WAL operation {op.name!r}")
    if not isinstance(op.data, dict):
        raise WalOpError(f"{op.name}: its data must be an object")
    try:
        return decoder(op.data, group_id)
    except (ValueError, TypeError) as exc:
        raise WalOpError(f"{op.name}: {exc}") from exc


def decode_all(ops: Iterable[Op], group_id: str) -> list[Change]:
    """`decode` of each operation, in order (raises on the first malformed one)."""
    return [decode(op, group_id) for op in ops]


def encode(change: Change) -> Op:
    """The operation a WAL line stores for `change` (the group is the stream's, not stored)."""
    match change:
        case EntityUpsert(entity):
            return entity_op(entity)
        case FactUpsert(fact):
            return fact_op(fact)
        case EpisodeAdd(episode):
            return episode_op(episode)
        case FactInvalidate(uuid, invalid_at, expired_at):
            return Op(
                "fact.invalidate",
                {"uuid": uuid, "invalid_at": to_wal(invalid_at), "expired_at": to_wal(expired_at)},
            )
        case EpisodeDelete(uuid):
            return Op("episode.delete", {"uuid": uuid})
        case MentionsAdd(episode, entities):
            return Op("mentions.add", {"episode": episode, "entities": list(entities)})
        case GroupPurge():
            return Op("group.purge", {})
        case CypherExec(query):
            return Op("cypher.exec", {"query": query})


def runs(changes: Sequence[Change]) -> Iterator[Sequence[Change]]:
    """The changes in order, cut into runs a store applies together: consecutive changes of
    one class, each `MentionsAdd`, `GroupPurge` and `CypherExec` alone."""
    i = 0
    while i < len(changes):
        kind = type(changes[i])
        j = i + 1
        if not isinstance(changes[i], _ALONE):
            while j < len(changes) and type(changes[j]) is kind:
                j += 1
        yield changes[i:j]
        i = j
