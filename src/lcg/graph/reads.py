"""Graph reads: episodes, entities, facts and neighbourhoods as wire records (docs/api.md §graph).

Each is one snapshot read through the kernel's `Engine.read`; `time` (a `TimeFilter`) picks the
facts a read sees on both time axes, and None keeps the reference's rule (every edge,
invalidated or not).
"""

from __future__ import annotations

from typing import Any

from lcg.engine import Engine
from lcg.errors import InvalidRequestError, NotFoundError
from lcg.models import DEFAULT_GROUP_ID, Entity, Fact, entity_to_wire, episode_to_wire, fact_to_wire
from lcg.search.factrows import FactRows
from lcg.storage.backend import GraphReader
from lcg.temporal import columns, provenance
from lcg.timefilter import TimeFilter
from lcg.timeutil import now


async def one_group(engine: Engine, group_id: str | None) -> str:
    """The group a one-group read works on: `group_id` when given, else the workspace's only
    group (the default group when it has none), so that a read never answers empty merely
    because the caller did not name the group (docs/api.md §parameters).

    Raises:
        InvalidRequestError: none was given and the workspace has several, named in the message.
    """
    if group_id is not None:
        return group_id
    groups = sorted(await engine.read(lambda conn: conn.group_ids()))
    if len(groups) <= 1:
        return groups[0] if groups else DEFAULT_GROUP_ID
    raise InvalidRequestError(
        f"group_id is required: this workspace has {len(groups)} groups "
        f"({', '.join(groups)}); name one",
        field="group_id",
    )


async def group_of_name(engine: Engine, name: str) -> str:
    """The group where an entity is named `name`, when no group was given: the only group
    holding that name (or the workspace's only group).

    Raises:
        InvalidRequestError: several groups hold the name (they are named in the message).
        NotFoundError: none does.
    """
    groups = sorted(await engine.read(lambda conn: conn.group_ids()))
    if len(groups) <= 1:
        return groups[0] if groups else DEFAULT_GROUP_ID
    holding = [g for g in groups if await engine.entity_by_name(g, name) is not None]
    if len(holding) == 1:
        return holding[0]
    if not holding:
        raise NotFoundError(
            "entity", name, f"'{name}' is not an entity of any group ({', '.join(groups)})"
        )
    raise InvalidRequestError(
        f"group_id is required: '{name}' is an entity of {len(holding)} groups "
        f"({', '.join(holding)}); name one",
        field="group_id",
    )


async def get_episodes(engine: Engine, group_id: str, last_n: int) -> dict[str, Any]:
    def read(conn: GraphReader) -> dict[str, Any]:
        episodes = conn.episodes_recent(group_id, last_n) if last_n else []
        mentions = conn.episode_mentions([e.uuid for e in episodes]) if episodes else {}
        out = [episode_to_wire(e, mentions.get(e.uuid, [])) for e in episodes]
        return {"episodes": out, "count": len(out)}

    return await engine.read(read)


async def get_nodes_by_group(engine: Engine, group_ids: list[str] | None) -> dict[str, Any]:
    def read(conn: GraphReader) -> dict[str, Any]:
        nodes = (
            []
            if group_ids == []
            else [entity_to_wire(e) for e in conn.entities_in_groups(group_ids)]
        )
        return {"nodes": nodes, "count": len(nodes)}

    return await engine.read(read)


async def get_edges_by_group(
    engine: Engine, group_ids: list[str] | None, time: TimeFilter | None = None
) -> dict[str, Any]:
    """docs/api.md §knowledge_get_edges_by_group; `time` None is the reference's rule: every edge,
    invalidated or not."""

    def read(conn: GraphReader) -> dict[str, Any]:
        if group_ids == []:
            facts = []
        elif time is None:
            facts = conn.facts_with_hops(group_ids)
        else:
            facts = conn.facts_at(group_ids, time, now())
        episodes = provenance.stamps_of(engine.parts.search, conn, facts)
        as_of = time.as_of if time is not None else None
        edges = [provenance.cite(fact_to_wire(f), f, episodes, as_of=as_of) for f in facts]
        return {"edges": edges, "count": len(edges)}

    return await engine.read(read)


async def get_edges_by_uuids(engine: Engine, uuids: list[str]) -> dict[str, Any]:
    def read(conn: GraphReader) -> dict[str, Any]:
        facts = conn.facts_with_hops(uuids=uuids) if uuids else []
        episodes = provenance.stamps_of(engine.parts.search, conn, facts)
        edges = [provenance.cite(fact_to_wire(f), f, episodes) for f in facts]
        return {"edges": edges, "count": len(edges)}

    return await engine.read(read)


def _entities_with_provenance(
    conn: GraphReader, entities: list[Entity], groups: list[str] | None
) -> list[dict[str, Any]]:
    prov = conn.provenance([e.uuid for e in entities], groups) if entities else {}
    return [
        entity_to_wire(
            e, [p[0] for p in prov.get(e.uuid, [])], [p[1] for p in prov.get(e.uuid, [])]
        )
        for e in entities
    ]


def _facts_with_provenance(
    engine: Engine,
    conn: GraphReader,
    facts: list[Fact],
    held: FactRows | None,
    time: TimeFilter | None = None,
) -> list[dict[str, Any]]:
    """Wire records of `facts` with their endpoints' provenance (from the rows `held` in
    memory where there are some, lcg.search.factrows), then their own episodes
    (lcg.temporal.provenance); at a past `time.as_of`, none written later."""
    ends = [u for f in facts for u in (f.source_uuid, f.target_uuid)]
    if not facts:
        prov = {}
    elif held is not None:
        prov = held.endpoint_provenance(conn, ends)
    else:
        prov = conn.endpoint_provenance(ends)
    as_of = time.as_of if time is not None else None
    # At a past instant the endpoints' episodes are dated too, to leave the later ones out.
    dated = (
        {
            p[0]: f.group_id
            for f in facts
            for u in (f.source_uuid, f.target_uuid)
            for p in prov.get(u, [])
        }
        if as_of is not None
        else None
    )
    episodes = provenance.stamps_of(engine.parts.search, conn, facts, dated)
    out = []
    for f in facts:
        merged = list(dict.fromkeys(prov.get(f.source_uuid, []) + prov.get(f.target_uuid, [])))
        record = fact_to_wire(f, [p[0] for p in merged], [p[1] for p in merged])
        out.append(provenance.cite(record, f, episodes, endpoints=True, as_of=as_of))
    return out


async def list_entities(
    engine: Engine, num_results: int, group_ids: list[str] | None
) -> dict[str, Any]:
    def read(conn: GraphReader) -> dict[str, Any]:
        entities = conn.entities_in_groups(group_ids, limit=num_results)
        nodes = _entities_with_provenance(conn, entities, group_ids)
        return {"nodes": nodes, "count": len(nodes)}

    return await engine.read(read)


async def list_relationships(
    engine: Engine, num_results: int, group_ids: list[str] | None, time: TimeFilter | None = None
) -> dict[str, Any]:
    views = None if time is None else await columns.fact_views(engine.parts.search, group_ids)
    held = await columns.held_rows(engine.parts.search)

    def read(conn: GraphReader) -> dict[str, Any]:
        facts = (
            conn.facts_with_hops(group_ids, limit=num_results)
            if time is None or views is None
            else columns.visible_newest(views, conn, time, now(), num_results, held)
        )
        out = _facts_with_provenance(engine, conn, facts, held, time)
        return {"facts": out, "count": len(out)}

    return await engine.read(read)


async def get_entity_neighbors(
    engine: Engine,
    entity_uuid: str,
    num_results: int,
    group_ids: list[str] | None,
    time: TimeFilter | None = None,
) -> dict[str, Any]:
    held = await columns.held_rows(engine.parts.search)

    def read(conn: GraphReader) -> dict[str, Any]:
        facts = (
            conn.neighbor_facts(entity_uuid, group_ids, num_results)
            if time is None
            else conn.neighbor_facts_at(entity_uuid, group_ids, num_results, time, now())
        )
        others = list(
            dict.fromkeys(
                f.target_uuid if f.source_uuid == entity_uuid else f.source_uuid for f in facts
            )
        )
        found = conn.entities_by_uuids(others)
        nodes = _entities_with_provenance(conn, [found[u] for u in others if u in found], None)
        edges = _facts_with_provenance(engine, conn, facts, held, time)
        return {
            "center_uuid": entity_uuid,
            "nodes": nodes,
            "edges": edges,
            "count": len(nodes),
            "node_count": len(nodes),
            "edge_count": len(edges),
        }

    return await engine.read(read)


async def get_entities_by_source(
    engine: Engine, source: str, num_results: int, group_ids: list[str] | None
) -> dict[str, Any]:
    def read(conn: GraphReader) -> dict[str, Any]:
        entities = conn.entities_by_source(source, group_ids, num_results)
        nodes = _entities_with_provenance(conn, entities, group_ids)
        return {"source": source, "nodes": nodes, "count": len(nodes)}

    return await engine.read(read)
