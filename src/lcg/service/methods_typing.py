"""Typing maintenance methods (API.md §2.28-2.31): reprocess entity types, canonicalize / backfill / reprocess relation types.

Thin: the passes live in `lcg.ontology.maintenance`. The two LLM passes get the configured
extraction model lazily, so an unconfigured one is reported the way API.md says (a
`success: false` result) and only when there is something to classify.
"""

from __future__ import annotations

from typing import Any

from lcg.engine import Engine
from lcg.extraction.select import llm_client
from lcg.ontology import maintenance
from lcg.service import typing_params as tp
from lcg.service.declare import Context, Declarations

declare = Declarations()


@declare(
    "knowledge_reprocess_entity_types",
    "write",
    tp.ReprocessTypesParams,
    "Re-classify the entity types of one group with the extraction LLM (e.g. after an ontology "
    "change) and re-stamp ancestor labels of the type hierarchy. scope: untyped (labels exactly "
    "['Entity']), off_ontology (also entities with a label the ontology does not declare) or "
    "all. dry_run returns the plan without writing.",
    long_running=True,
)
async def _reprocess_entity_types(
    engine: Engine, a: tp.ReprocessTypesParams, ctx: Context
) -> dict[str, Any]:
    return await maintenance.reprocess_entity_types(
        engine, a.group_id, a.scope, a.dry_run, lambda: llm_client(engine), ctx.progress
    )


@declare(
    "knowledge_canonicalize_relations",
    "write",
    tp.CanonicalizeRelationsParams,
    "Map every edge of one group onto the ontology's declared relation types: by name, alias "
    "or keyword of its predicate or current relation_type, else by embedding similarity of its "
    "fact to the types' descriptions (>= embedding_threshold); unmatched edges become "
    "UNCLASSIFIED. Needs an ontology with relation_types. Idempotent; dry_run only reports.",
    long_running=True,
)
async def _canonicalize_relations(
    engine: Engine, a: tp.CanonicalizeRelationsParams, ctx: Context
) -> dict[str, Any]:
    return await maintenance.canonicalize_relations(
        engine, a.group_id, a.dry_run, a.embedding_threshold, ctx.progress
    )


@declare(
    "knowledge_backfill_relation_types",
    "write",
    tp.GroupDryRunParams,
    "fill empty relation_type values of one group with a pseudo-type derived from the edge "
    "name or the first words of its fact.",
    long_running=True,
    replaced_by="knowledge_canonicalize_relations",
)
async def _backfill_relation_types(
    engine: Engine, a: tp.GroupDryRunParams, ctx: Context
) -> dict[str, Any]:
    return await maintenance.backfill_relation_types(engine, a.group_id, a.dry_run, ctx.progress)


@declare(
    "knowledge_reprocess_relation_types",
    "write",
    tp.ReprocessTypesParams,
    "Classify the facts of one group into the ontology's relation types with the extraction "
    "LLM, abstaining to UNCLASSIFIED. scope: untyped (no relation_type), off_ontology (also "
    "types the ontology does not declare) or all. dry_run returns the plan and a breakdown.",
    long_running=True,
)
async def _reprocess_relation_types(
    engine: Engine, a: tp.ReprocessTypesParams, ctx: Context
) -> dict[str, Any]:
    return await maintenance.reprocess_relation_types(
        engine, a.group_id, a.scope, a.dry_run, lambda: llm_client(engine), ctx.progress
    )
