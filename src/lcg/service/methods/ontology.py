"""Typing maintenance methods (docs/api.md §ontology): reprocess entity types, canonicalize /
backfill / reprocess relation types.

Thin: the passes live in `lcg.curation.retyping`. The two LLM passes get the configured
extraction model lazily, so an unconfigured one is reported the way docs/api.md §error-styles says
(a `success: false` result) and only when there is something to classify.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.curation import retyping
from lcg.curation.retyping import SCOPES
from lcg.engine import Engine
from lcg.extraction.select import llm_client
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.declare import Context, Declarations
from lcg.service.params import Params, WriteGroup, write_group


def _required_group(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError("group_id is required and must be a non-empty string")
    return write_group(value)


def _threshold(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError("embedding_threshold must be a number")
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"embedding_threshold must be between 0 and 1, got {value}")
    return float(value)


def _no_default(schema: dict[str, Any]) -> None:
    schema.pop("default", None)


RequiredGroup = Annotated[str, BeforeValidator(_required_group)]


class ReprocessTypesParams(Params):
    """`knowledge_reprocess_entity_types` / `knowledge_reprocess_relation_types`."""

    group_id: WriteGroup = DEFAULT_GROUP_ID
    # Advertised as an enum (docs/api.md §mcp-tools) but any string is accepted: see the module
    # docstring.
    scope: str = Field(
        default="untyped",
        description="Which rows to classify: untyped, off_ontology or all.",
        json_schema_extra={"enum": list(SCOPES)},
    )
    dry_run: bool = False


class GroupDryRunParams(Params):
    """`knowledge_backfill_relation_types`: a required group, and dry_run."""

    # Validated even when absent, so a missing group_id gets the same message as "". The schema
    # shows no default: there is none (never "all groups", never "liminis";
    # docs/api.md §knowledge_canonicalize_relations).
    group_id: RequiredGroup = Field(
        default=None,
        validate_default=True,
        description="The one group to process (required; no default).",
        json_schema_extra=_no_default,
    )
    dry_run: bool = False


class CanonicalizeRelationsParams(GroupDryRunParams):
    """`knowledge_canonicalize_relations`: plus the embedding fallback's cosine threshold."""

    embedding_threshold: Annotated[float, BeforeValidator(_threshold)] = Field(
        default=0.7, description="Cosine similarity (0-1) for the embedding fallback."
    )


declare = Declarations()


@declare(
    "knowledge_reprocess_entity_types",
    "write",
    ReprocessTypesParams,
    "Re-classify the entity types of one group with the extraction LLM (e.g. after an ontology "
    "change) and re-stamp ancestor labels of the type hierarchy. scope: untyped (labels exactly "
    "['Entity']), off_ontology (also entities with a label the ontology does not declare) or "
    "all. dry_run returns the plan without writing.",
    long_running=True,
)
async def _reprocess_entity_types(
    engine: Engine, a: ReprocessTypesParams, ctx: Context
) -> dict[str, Any]:
    return await retyping.reprocess_entity_types(
        engine, a.group_id, a.scope, a.dry_run, lambda: llm_client(engine), ctx.progress
    )


@declare(
    "knowledge_canonicalize_relations",
    "write",
    CanonicalizeRelationsParams,
    "Map every edge of one group onto the ontology's declared relation types: by name, alias "
    "or keyword of its predicate or current relation_type, else by embedding similarity of its "
    "fact to the types' descriptions (>= embedding_threshold); unmatched edges become "
    "UNCLASSIFIED. Needs an ontology with relation_types. Idempotent; dry_run only reports.",
    long_running=True,
    required=("group_id",),
)
async def _canonicalize_relations(
    engine: Engine, a: CanonicalizeRelationsParams, ctx: Context
) -> dict[str, Any]:
    return await retyping.canonicalize_relations(
        engine, a.group_id, a.dry_run, a.embedding_threshold, ctx.progress
    )


@declare(
    "knowledge_backfill_relation_types",
    "write",
    GroupDryRunParams,
    "fill empty relation_type values of one group with a pseudo-type derived from the edge "
    "name or the first words of its fact.",
    long_running=True,
    replaced_by="knowledge_canonicalize_relations",
    required=("group_id",),
)
async def _backfill_relation_types(
    engine: Engine, a: GroupDryRunParams, ctx: Context
) -> dict[str, Any]:
    return await retyping.backfill_relation_types(engine, a.group_id, a.dry_run, ctx.progress)


@declare(
    "knowledge_reprocess_relation_types",
    "write",
    ReprocessTypesParams,
    "Classify the facts of one group into the ontology's relation types with the extraction "
    "LLM, abstaining to UNCLASSIFIED. scope: untyped (no relation_type), off_ontology (also "
    "types the ontology does not declare) or all. dry_run returns the plan and a breakdown.",
    long_running=True,
)
async def _reprocess_relation_types(
    engine: Engine, a: ReprocessTypesParams, ctx: Context
) -> dict[str, Any]:
    return await retyping.reprocess_relation_types(
        engine, a.group_id, a.scope, a.dry_run, lambda: llm_client(engine), ctx.progress
    )
