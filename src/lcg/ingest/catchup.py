"""Bringing a group's resolution index (`GroupIndex`) up to other processes' commits (server
mode): instead of reloading the whole group each time another `lcg serve` wrote to
it, give the index the batches of its stream since the index's position (`GroupIndex.apply`,
the index being one of the projections of the WAL: lcg.wal.projection).

Only what ingestion itself writes is applied in place: new or updated entities under their
name, facts, supersessions, episodes and mentions. Anything else (a merge, a rename, a delete,
a purge, a raw statement) makes the caller reload the group, as before.
"""

from __future__ import annotations

from lcg.embedding.vectors import embed_plan, plan_for_changes
from lcg.engine import Engine
from lcg.errors import WalOpError
from lcg.ingest.index import GroupIndex
from lcg.wal.changes import decode_all
from lcg.wal.records import Op

__all__ = ["catch_up_index"]

# The vectors the index keeps: entity names and fact sentences (lcg.embedding.vectors' kinds).
_KINDS = ("entity_name", "fact")


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
    try:
        changes = decode_all((Op(r.op, r.data) for r in records), index.group_id)
    except WalOpError:
        return False
    plan = plan_for_changes(changes)
    plan.wanted = [item for item in plan.wanted if item[0] in _KINDS]
    index.apply(index.group_id, changes, embed_plan(plan, engine.parts.embedder))
    if index.position is None:  # a change it does not take in place: reload the group
        return False
    index.position = position
    return True
