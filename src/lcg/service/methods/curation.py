"""Curation and cross-group methods (docs/api.md §curation, §curation): merge, corrections,
cross-group pointers."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BeforeValidator, Field

from lcg.curation import corrections, merge, pointers, portable
from lcg.curation.pointers import Endpoint
from lcg.engine import Engine
from lcg.models import DEFAULT_GROUP_ID
from lcg.service import paths
from lcg.service.declare import Context, Declarations
from lcg.service.params import (
    Empty,
    GroupOrDefault,
    GroupsOptional,
    Params,
    WriteGroup,
    required_text,
    string_list,
    timestamp,
)

_ENDPOINT_SHAPE = (
    "endpoint must have either 'uuid' alone, or both 'source_group_id' and 'endpoint_name' "
    "alone — not a mix, and not a partial foreign pair"
)


def _endpoint(value: Any) -> Endpoint:
    if not isinstance(value, dict):
        raise ValueError(_ENDPOINT_SHAPE)
    keys = {k for k, v in value.items() if v is not None}
    if keys == {"uuid"} and isinstance(value["uuid"], str):
        return Endpoint(uuid=value["uuid"])
    if (
        keys == {"source_group_id", "endpoint_name"}
        and isinstance(value["source_group_id"], str)
        and isinstance(value["endpoint_name"], str)
    ):
        return Endpoint(
            source_group_id=value["source_group_id"], endpoint_name=value["endpoint_name"]
        )
    raise ValueError(_ENDPOINT_SHAPE)


def _source_group(value: Any) -> str:
    if not isinstance(value, str):
        raise ValueError("source_group_id is required")
    return value


EndpointParam = Annotated[Endpoint, BeforeValidator(_endpoint)]


class MergeEntitiesParams(Params):
    canonical_uuid: str | None = None
    canonical_name: str | None = None
    alias_uuids: Annotated[list[str], string_list("alias_uuids")] = Field(default_factory=list)
    alias_names: Annotated[list[str], string_list("alias_names")] = Field(default_factory=list)
    merge_all_by_name: bool = False
    group_id: GroupOrDefault = DEFAULT_GROUP_ID
    dry_run: bool = False


class ApplyCorrectionsParams(Params):
    dry_run: bool = False


class CrossGroupEdgeParams(Params):
    name: str = ""
    # Absent is validated too, so it gets the shape message
    # (docs/api.md §knowledge_add_cross_group_edge).
    source: EndpointParam = Field(default=None, validate_default=True)
    target: EndpointParam = Field(default=None, validate_default=True)
    group_id: WriteGroup = DEFAULT_GROUP_ID
    fact: str = ""
    valid_at: Annotated[datetime, timestamp("valid_at")] | None = None
    relation_type: str | None = None


class RebindParams(Params):
    source_group_id: Annotated[str, BeforeValidator(_source_group)] = Field(
        default=None, validate_default=True
    )


class ExportParams(Params):
    """`knowledge_export_graph`: the file to write (inside the workspace or LCG_EXPORT_DIR,
    lcg.service.paths), some groups, and whether an existing file may be replaced."""

    path: Annotated[str, required_text("path")]
    group_ids: GroupsOptional = None
    overwrite: bool = False


class ImportParams(Params):
    """`knowledge_import_graph`: the portable file to read (inside the workspace or
    LCG_EXPORT_DIR, lcg.service.paths)."""

    path: Annotated[str, required_text("path")]


declare = Declarations()


@declare(
    "knowledge_merge_entities",
    "write",
    MergeEntitiesParams,
    "Merge alias entities into a canonical entity of one group: their facts move to the "
    "canonical (self-loops and duplicates are invalidated, facts of other groups are left "
    "alone) and each alias becomes a Merged tombstone forwarding to the canonical. Name the "
    "canonical by canonical_uuid or canonical_name, the aliases by alias_uuids, alias_names "
    "or merge_all_by_name; dry_run shows the plan. Failures come back as success: false.",
)
async def _merge(engine: Engine, a: MergeEntitiesParams, ctx: Context) -> dict[str, Any]:
    return await merge.merge_entities(
        engine,
        merge.MergeRequest(
            canonical_uuid=a.canonical_uuid,
            canonical_name=a.canonical_name,
            alias_uuids=tuple(a.alias_uuids),
            alias_names=tuple(a.alias_names),
            merge_all_by_name=a.merge_all_by_name,
            group_id=a.group_id,
            dry_run=a.dry_run,
        ),
    )


@declare(
    "knowledge_validate_corrections",
    "read",
    Empty,
    "Check the workspace corrections file ($LIMINIS_WORKSPACE_ROOT/.liminis/"
    "knowledge-corrections.yaml: same_as merges and retract invalidations) against the graph "
    "without applying anything.",
)
async def _validate(engine: Engine, a: Empty, ctx: Context) -> dict[str, Any]:
    return await corrections.validate_corrections(engine)


@declare(
    "knowledge_apply_corrections",
    "write",
    ApplyCorrectionsParams,
    "Apply the not-yet-applied entries of the workspace corrections file (same_as: merge the "
    "aliases into the canonical; retract: invalidate the edge) and stamp each applied entry "
    "with applied_at in the file. dry_run checks without writing.",
)
async def _apply(engine: Engine, a: ApplyCorrectionsParams, ctx: Context) -> dict[str, Any]:
    return await corrections.apply_corrections(engine, a.dry_run)


@declare(
    "knowledge_add_cross_group_edge",
    "write",
    CrossGroupEdgeParams,
    "Create a fact owned by group_id whose endpoints may live in other groups: each of source "
    "and target is {uuid} (an entity of group_id) or {source_group_id, endpoint_name} (looked "
    "up by name, case-insensitively, in that group). A name that matches nothing (unbound) or "
    "several entities (ambiguous) keeps the edge hidden from reads until "
    "knowledge_rebind_pointers binds it.",
    required=("name", "source", "target", "fact"),
)
async def _cross_edge(engine: Engine, a: CrossGroupEdgeParams, ctx: Context) -> dict[str, Any]:
    return await pointers.add_cross_group_edge(
        engine, a.name, a.source, a.target, a.group_id, a.fact, a.valid_at, a.relation_type
    )


@declare(
    "knowledge_rebind_pointers",
    "admin",
    RebindParams,
    "Re-resolve every cross-group pointer that names source_group_id (after that group was "
    "purged, rebuilt, renamed or merged). Pointers bound at or after the group's current WAL "
    "position are skipped as fresh.",
    required=("source_group_id",),
)
async def _rebind(engine: Engine, a: RebindParams, ctx: Context) -> dict[str, Any]:
    return await pointers.rebind(engine, a.source_group_id)


@declare(
    "knowledge_export_graph",
    "admin",
    ExportParams,
    "lcg addition: write the graph (or the given groups) to a portable JSONL file: a header "
    "with the schema version, then episodes, entities, facts and mentions (no embeddings). "
    "path is relative to the service's export directory (LCG_EXPORT_DIR, default "
    "<home>/exports) or absolute inside it or the workspace; an existing file is replaced only "
    "with overwrite: true.",
    long_running=True,
)
async def _export(engine: Engine, a: ExportParams, ctx: Context) -> dict[str, Any]:
    method = "knowledge_export_graph"
    target = paths.writable_path(engine.settings, a.path, method=method)
    return await portable.export_graph(
        engine, str(target), a.group_ids, ctx.progress, overwrite=a.overwrite
    )


@declare(
    "knowledge_import_graph",
    "admin",
    ImportParams,
    "lcg addition: import a portable JSONL file written by knowledge_export_graph (lcg "
    "export) through the write-ahead log. Rows already present unchanged are skipped, so "
    "importing a file twice changes nothing. path as for knowledge_export_graph: inside the "
    "export directory or the workspace.",
    long_running=True,
)
async def _import(engine: Engine, a: ImportParams, ctx: Context) -> dict[str, Any]:
    source = paths.readable_path(engine.settings, a.path, method="knowledge_import_graph")
    return await portable.import_graph(engine, str(source), ctx.progress)
