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
from lcg.ingest.index import GroupIndex
from lcg.models import Entity, Fact
from lcg.timeutil import from_wal
from lcg.wal.records import WalRecord, data_to_entity, data_to_fact

__all__ = ["catch_up_index"]

_IGNORED = ("episode.add", "mentions.add")


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
    group = index.group_id
    changes: list[Entity | Fact | tuple[str, str | None, str | None]] = []
    for r in records:
        if r.op == "entity.upsert":
            entity = data_to_entity(r.data, group)
            known = index.entities.get(entity.uuid)
            if "Merged" in entity.labels or (known is not None and known.name != entity.name):
                return False
            changes.append(entity)
        elif r.op == "fact.upsert":
            changes.append(data_to_fact(r.data, group))
        elif r.op == "fact.invalidate":
            changes.append(
                (str(r.data["uuid"]), r.data.get("invalid_at"), r.data.get("expired_at"))
            )
        elif r.op not in _IGNORED:
            return False
    entities = [c for c in changes if isinstance(c, Entity) and c.uuid not in index.entities]
    facts = [c for c in changes if isinstance(c, Fact)]
    texts = [e.name for e in entities] + [f.fact or f.name for f in facts]
    vectors = embedder.embed(texts) if texts else None
    vec = (
        {id(c): vectors[i] for i, c in enumerate([*entities, *facts])}
        if vectors is not None
        else {}
    )
    for change in changes:
        if isinstance(change, Entity):
            index.put_entity(change, vec.get(id(change)))
        elif isinstance(change, Fact):
            index.put_fact(change, vec.get(id(change)))
        else:
            uuid, invalid_at, expired_at = change
            fact = index.facts.get(uuid)
            if fact is not None:
                index.put_fact(
                    dataclasses.replace(
                        fact, invalid_at=from_wal(invalid_at), expired_at=from_wal(expired_at)
                    ),
                    None,
                )
    return True
