"""Invariants every graph lcg derives must hold, whatever its WAL held: no fact hangs from an
entity that is not there, and every mention and hop ends at a row of the graph; and a graph's
every row and edge as one comparable snapshot (`snapshot`, `assert_same`)."""

from __future__ import annotations

from typing import Any

from lcg import Engine

# fmt: off
ENTITY_COLS = (
    "uuid", "group_id", "name", "labels", "summary", "attributes", "created_at", "merged_into",
)
FACT_COLS = (
    "uuid", "group_id", "source_uuid", "target_uuid", "name", "fact", "relation_type",
    "attributes", "episodes", "valid_at", "invalid_at", "created_at", "expired_at",
)
EPISODE_COLS = (
    "uuid", "group_id", "name", "content", "source",
    "source_description", "source_file", "chunk_id", "created_at", "valid_at",
)
# fmt: on


def snapshot(engine: Engine) -> dict[str, list[Any]]:
    """Every row and edge of the graph, in a canonical order, with raw stored values."""

    def cols(alias: str, names: tuple[str, ...]) -> str:
        return ", ".join(f"{alias}.{c}" for c in names)

    def by_uuid(rows: list[list[Any]]) -> list[tuple[Any, ...]]:
        return [tuple(r) for r in sorted(rows, key=lambda r: r[0])]

    with engine.reader() as conn:
        return {
            "episodes": by_uuid(conn.rows(f"MATCH (ep:Episode) RETURN {cols('ep', EPISODE_COLS)}")),
            "entities": by_uuid(conn.rows(f"MATCH (e:Entity) RETURN {cols('e', ENTITY_COLS)}")),
            "facts": by_uuid(conn.rows(f"MATCH (f:Fact) RETURN {cols('f', FACT_COLS)}")),
            "mentions": sorted(
                map(
                    tuple,
                    conn.rows("MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN ep.uuid, e.uuid"),
                )
            ),
            "hops_in": sorted(
                map(
                    tuple,
                    conn.rows("MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN a.uuid, f.uuid"),
                )
            ),
            "hops_out": sorted(
                map(
                    tuple,
                    conn.rows("MATCH (f:Fact)-[:RELATES_TO]->(b:Entity) RETURN f.uuid, b.uuid"),
                )
            ),
            "embeddings": by_uuid(
                conn.rows(
                    "MATCH (v:Embedding) RETURN v.key, v.owner, v.kind, v.group_id, v.text_hash"
                )
            ),
            "meta": sorted(map(tuple, conn.rows("MATCH (m:Meta) RETURN m.key, m.value"))),
        }


def assert_same(expected: dict[str, list[Any]], actual: dict[str, list[Any]], how: str) -> None:
    for key in expected:
        assert actual[key] == expected[key], f"{how}: {key} differ"


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
