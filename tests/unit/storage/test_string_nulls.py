"""Kuzu 0.11.3 corrupts a STRING chunk when a NULL is written in place after a checkpointed
update raised the chunk's index minimum above 0 (storage/README.md, "String columns"). lcg
stays clear of it because Entity strings it updates are never NULL (a new entity's summary is
`""`) and `merged_into` is NULL in most rows; this pins that: merges and summary updates,
each checkpointed, then a new entity with the model's defaults, and every row read back."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from lcg.models import Entity
from lcg.storage import graph
from lcg.storage.store import Store

T0 = datetime(2024, 1, 1, tzinfo=UTC)


def _entity(i: int) -> Entity:
    return Entity(
        uuid=f"e{i:05d}", group_id="g", name=f"name {i}", summary=f"summary {i}", created_at=T0
    )


def test_a_new_entity_after_checkpointed_updates_keeps_every_row(tmp_path: Path) -> None:
    store = Store(tmp_path / "g.db")
    try:
        entities = {e.uuid: e for e in (_entity(i) for i in range(2000))}
        with store.transaction() as tx:
            graph.upsert_entities(tx, list(entities.values()), new=set(entities))
        store.checkpoint(force=True)
        for loser, winner in (("e00007", "e00008"), ("e00009", "e00010")):
            merged = replace(entities[loser], merged_into=winner, summary="merged")
            entities[loser] = merged
            with store.transaction() as tx:
                graph.upsert_entities(tx, [merged])
            # rewrites the node group's summary and merged_into chunks; the summary index
            # minimum rises by the dictionary size each time (every summary is non-NULL)
            store.checkpoint(force=True)
        fresh = Entity(uuid="e05000", group_id="g", name="fresh", created_at=T0)
        entities[fresh.uuid] = fresh
        with store.transaction() as tx:
            graph.upsert_entities(tx, [fresh], new={fresh.uuid})
        store.checkpoint(force=True)  # written in place into those chunks
        with store.read() as r:
            stored = graph.entities_by_uuids(r, entities)
        assert [u for u, e in entities.items() if stored.get(u) != e] == []
    finally:
        store.close()
