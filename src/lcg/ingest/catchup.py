"""Bringing a group's resolution index (`GroupIndex`) up to other processes' commits (server
mode): instead of reloading the whole group each time another `lcg serve` wrote to
it, apply the entity and fact operations of its stream since the index's position.

Only what ingestion itself writes is applied in place: new or updated entities under their
name, facts, supersessions, episodes and mentions. Anything else (a merge, a rename, a delete,
a purge, a raw statement) makes the caller reload the group, as before.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from lcg.embedding.base import Embedder
from lcg.engine import Engine
from lcg.errors import WalOpError
from lcg.ingest.index import GroupIndex
from lcg.wal.changes import (
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
    decode_all,
)
from lcg.wal.records import Op, WalRecord

__all__ = ["catch_up_index"]


def catch_up_index(engine: Engine, index: GroupIndex) -> bool:
    """(Worker thread, no lock held.) Apply the group's stream from `index.position` up to the
    position the engine reflects; False when the index must be reloaded instead (an embedded
    store, an operation not applied in place, a gap)."""
    if index.position is None:
        return False
    since = index.position[1]
    with engine.writer() as w:
        position = w.position(index.group_id)
        records = w.stream(index.group_id, since)
    if records is None or position[0] is not None:
        return False
    records = [r for r in records if r.seq < position[1]]
    if not records or records[0].seq != since or records[-1].seq != position[1] - 1:
        return False
    if not _apply(index, records, engine.parts.embedder):
        return False
    index.position = position
    return True


def _apply(index: GroupIndex, records: Sequence[WalRecord], embedder: Embedder) -> bool:
    try:
        changes = decode_all((Op(r.op, r.data) for r in records), index.group_id)
    except WalOpError:
        return False
    for change in changes:
        match change:
            case EntityUpsert(entity):
                known = index.entities.get(entity.uuid)
                if "Merged" in entity.labels or (known is not None and known.name != entity.name):
                    return False
            case FactUpsert() | FactInvalidate() | EpisodeAdd() | MentionsAdd():
                pass
            case EpisodeDelete() | GroupPurge() | CypherExec():
                return False
    entities = [
        c.entity
        for c in changes
        if isinstance(c, EntityUpsert) and c.entity.uuid not in index.entities
    ]
    facts = [c.fact for c in changes if isinstance(c, FactUpsert)]
    texts = [e.name for e in entities] + [f.fact or f.name for f in facts]
    vectors = embedder.embed(texts) if texts else None
    vec = (
        {id(row): vectors[i] for i, row in enumerate([*entities, *facts])}
        if vectors is not None
        else {}
    )
    for change in changes:
        match change:
            case EntityUpsert(entity):
                index.put_entity(entity, vec.get(id(entity)))
            case FactUpsert(fact):
                index.put_fact(fact, vec.get(id(fact)))
            case FactInvalidate(uuid, invalid_at, expired_at):
                held = index.facts.get(uuid)
                if held is not None:
                    index.put_fact(
                        dataclasses.replace(held, invalid_at=invalid_at, expired_at=expired_at),
                        None,
                    )
    return True
