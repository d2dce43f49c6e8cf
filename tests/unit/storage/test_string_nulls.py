"""Kuzu 0.11.3 corrupts a STRING chunk when a NULL is written in place after a checkpointed
update raised the chunk's index minimum above 0 (bench/results/kuzu-0.11.3.md, "String columns"). lcg
stays clear of it because Entity strings it updates are never NULL (a new entity's summary is
`""`) and `merged_into` is NULL in most rows; this pins that: merges and summary updates,
each checkpointed, then a new entity with the model's defaults, and every row read back."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

from lcg.models import Entity, Fact
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


def test_an_untyped_fact_after_a_checkpointed_retype_keeps_every_fact_type(tmp_path: Path) -> None:
    """Facts all typed (20 types), one retyped and checkpointed twice (ontology maintenance
    does this), then a fact with no type: every fact reads back with its own type, the new
    one with none. Writing the missing type as NULL corrupted the column (1,934 of 2,001 types
    read back wrong), so it is stored as "" and read back as None."""
    store = Store(tmp_path / "g.db")
    try:
        ends = [Entity(uuid=u, group_id="g", name=u, created_at=T0) for u in ("e-a", "e-b")]
        facts = {
            f"f{i:05d}": Fact(
                f"f{i:05d}",
                "g",
                "e-a",
                "e-b",
                "REL",
                f"fact {i}",
                relation_type=f"TYPE_{i % 20}",
                created_at=T0,
            )
            for i in range(2000)
        }
        with store.transaction() as tx:
            graph.upsert_entities(tx, ends, new={e.uuid for e in ends})
            graph.upsert_facts(tx, list(facts.values()), new=set(facts))
        store.checkpoint(force=True)
        for uuid in ("f00007", "f00009"):
            facts[uuid] = replace(facts[uuid], relation_type="RETYPED")
            with store.transaction() as tx:
                graph.upsert_facts(tx, [facts[uuid]])
            store.checkpoint(force=True)
        untyped = Fact("f09999", "g", "e-a", "e-b", "REL", "untyped", created_at=T0)
        facts[untyped.uuid] = untyped
        with store.transaction() as tx:
            graph.upsert_facts(tx, [untyped], new={untyped.uuid})
        store.checkpoint(force=True)
        with store.read() as r:
            stored = graph.facts_by_uuids(r, facts)
        assert stored["f09999"].relation_type is None
        wrong = [u for u, f in facts.items() if stored[u].relation_type != f.relation_type]
        assert wrong == []
    finally:
        store.close()
