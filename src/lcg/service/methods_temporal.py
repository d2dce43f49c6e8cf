"""Temporal and context methods: knowledge_get_changes, knowledge_get_entity_timeline,
knowledge_get_context (docs/temporal.md). All are MCP `read` tools."""

from __future__ import annotations

from typing import Any

from lcg.engine import Engine
from lcg.service import temporal_params as tp
from lcg.service.declare import Context, Declarations
from lcg.temporal import context, timeline

declare = Declarations()


@declare(
    "knowledge_get_changes",
    "read",
    tp.ChangesParams,
    "What changed in a time window [since, until): facts that became valid (started), stopped "
    "being valid (ended), were learned or were retired, each entry tagged with its kind, in time "
    "order. Filter by group_ids and by entity_uuid (facts touching that entity).",
)
async def _changes(engine: Engine, a: tp.ChangesParams, ctx: Context) -> dict[str, Any]:
    return await timeline.fact_changes(
        engine, a.since, a.until, a.group_ids, a.entity_uuid, a.num_results
    )


@declare(
    "knowledge_get_entity_timeline",
    "read",
    tp.TimelineParams,
    "Every fact about one entity (by entity_uuid, or by name within group_id), current and "
    "superseded, ordered by when it became true, each with its status and the facts it "
    "superseded / was superseded by.",
)
async def _timeline(engine: Engine, a: tp.TimelineParams, ctx: Context) -> dict[str, Any]:
    return await timeline.entity_timeline(engine, a.entity_uuid, a.name, a.group_id)


@declare(
    "knowledge_get_context",
    "read",
    tp.ContextParams,
    "Graph context for a question, ready to paste into a prompt: entities and facts found by "
    "hybrid search, expanded `hops` steps through the graph, packed into a cited text block of "
    "at most token_budget tokens (estimated as UTF-8 bytes / 4). Currently valid facts come "
    "first; superseded ones are marked with their validity window. Reports what it omitted.",
)
async def _context(engine: Engine, a: tp.ContextParams, ctx: Context) -> dict[str, Any]:
    return await context.get_context(
        engine,
        a.query,
        group_ids=a.group_ids,
        token_budget=a.token_budget,
        hops=a.hops,
        as_of=a.as_of,
        num_seeds=a.num_seeds,
    )
