"""Hybrid search methods: knowledge_find_entities, knowledge_find_relationships, knowledge_search_passages (API.md §2.8-2.10).

Served by the in-process index of lcg.search (BM25 + exact vectors, fused by reciprocal rank);
Kuzu holds no full-text index. The index loads lazily if it is not loaded yet, so
`knowledge_build_indices` (which reloads it eagerly) is never needed before a search. Results
come in rank order (the reference's order is unspecified) with the reference's record shapes.
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from lcg.engine import Engine
from lcg.models import entity_to_wire, fact_to_wire
from lcg.search.hybrid import episode_hits, search_entities, search_facts
from lcg.service.declare import Context, Declarations
from lcg.service.search_params import (
    FindEntitiesParams,
    FindRelationshipsParams,
    SearchPassagesParams,
)
from lcg.timeutil import to_read_format

declare = Declarations()


@declare(
    "knowledge_find_entities",
    "read",
    FindEntitiesParams,
    "Search entities (people, places, things, ideas) by name and summary: full-text and "
    "embedding matches fused by rank. The first choice when you have a name or a topic: it "
    "finds the uuid of something before you ask about its relationships "
    "(knowledge_get_entity_neighbors). knowledge_list_entities only browses the newest "
    "entities; knowledge_get_nodes_by_group dumps whole groups.",
)
async def _find_entities(engine: Engine, a: FindEntitiesParams, ctx: Context) -> dict[str, Any]:
    found = await search_entities(
        engine,
        a.query,
        group_ids=a.group_ids,
        limit=a.num_results,
        labels=a.labels,
        center_node_uuid=a.center_node_uuid,
        strategy=a.strategy,
    )
    nodes = [entity_to_wire(e) for e, _ in found]
    return {"nodes": nodes, "count": len(nodes)}


@declare(
    "knowledge_find_relationships",
    "read",
    FindRelationshipsParams,
    "Search facts (relationships between entities) by their sentence and predicate: full-text "
    "and embedding matches fused by rank. Returns current facts unless as_of / known_at / "
    "include_invalidated ask for other instants. The first choice for a question about "
    "facts; knowledge_list_relationships only browses the newest, knowledge_get_edges_by_group "
    "dumps whole groups.",
)
async def _find_relationships(
    engine: Engine, a: FindRelationshipsParams, ctx: Context
) -> dict[str, Any]:
    found = await search_facts(
        engine,
        a.query,
        group_ids=a.group_ids,
        limit=a.num_results,
        time=a.time_filter(),
        relation_types=a.relation_types,
        predicates=a.predicates,
        center_node_uuid=a.center_node_uuid,
        strategy=a.strategy,
    )
    facts = [fact_to_wire(f) for f, _ in found]
    return {"facts": facts, "count": len(facts)}


@declare(
    "knowledge_search_passages",
    "read",
    SearchPassagesParams,
    "Search the text of ingested episodes (passages) by embedding similarity; each passage "
    "carries its cosine score. With the default hash embedder similarity is lexical.",
)
async def _search_passages(engine: Engine, a: SearchPassagesParams, ctx: Context) -> dict[str, Any]:
    found = await anyio.to_thread.run_sync(
        # The client's min_score is this method's vector floor (API.md §2.10), in place of
        # the embedder's: a passage below it is dropped anyway.
        lambda: episode_hits(
            engine, a.query, a.group_ids, 3 * a.num_results, a.strategy, floor=a.min_score
        )
    )
    passages = [
        {
            "uuid": ep.uuid,
            "name": ep.name,
            "content": ep.content,
            "source_description": ep.source_description,
            "group_id": ep.group_id,
            "created_at": to_read_format(ep.created_at) or "",
            "valid_at": to_read_format(ep.valid_at),
            "score": hit.cosine,
        }
        for ep, hit in found
        if hit.cosine >= a.min_score
    ][: a.num_results]
    return {"passages": passages, "count": len(passages)}
