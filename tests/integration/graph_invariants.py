"""Invariants every graph lcg derives must hold, whatever its WAL held: no fact hangs from an
entity that is not there, and every mention and hop ends at a row of the graph."""

from __future__ import annotations

from lcg import Engine


def assert_no_dangling_rows(engine: Engine, how: str) -> None:
    """Every fact's source and target entity exist and its two hops point at them; every
    episode's mentions name entities of its group."""
    with engine.reader() as conn:
        entities = {row[0] for row in conn.rows("MATCH (e:Entity) RETURN e.uuid")}
        facts = conn.rows("MATCH (f:Fact) RETURN f.uuid, f.source_uuid, f.target_uuid")
        hops_in = {
            tuple(r)
            for r in conn.rows("MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN a.uuid, f.uuid")
        }
        hops_out = {
            tuple(r)
            for r in conn.rows("MATCH (f:Fact)-[:RELATES_TO]->(b:Entity) RETURN f.uuid, b.uuid")
        }
        mentions = conn.rows(
            "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN ep.uuid, ep.group_id, e.group_id"
        )
    for fact, source, target in facts:
        assert source in entities, f"{how}: fact {fact} hangs from a missing entity {source}"
        assert target in entities, f"{how}: fact {fact} points at a missing entity {target}"
        assert (source, fact) in hops_in, f"{how}: fact {fact} lacks its hop from {source}"
        assert (fact, target) in hops_out, f"{how}: fact {fact} lacks its hop to {target}"
    for episode, episode_group, entity_group in mentions:
        assert episode_group == entity_group, f"{how}: episode {episode} mentions another group"
