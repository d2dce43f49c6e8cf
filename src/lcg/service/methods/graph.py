"""Graph methods: direct writes, reads and deletes (docs/api.md §graph; lcg.graph, the kernel)."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import (
    Field,
    field_validator,
)

from lcg.admin import clear
from lcg.engine import Engine
from lcg.graph import deletes, reads, writes
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.declare import Context, Declarations
from lcg.service.params import (
    Attributes,
    CollapsingGroupsParams,
    GroupsOptional,
    GroupsRequired,
    Params,
    ReadGroup,
    TimeFields,
    WriteGroup,
    count_field,
    required_text,
    string_list,
    timestamp,
)


class AssertEntityParams(Params):
    name: Annotated[str, required_text("name")]
    entity_uuid: Annotated[str, required_text("entity_uuid")] | None = None
    group_id: WriteGroup = DEFAULT_GROUP_ID
    labels: Annotated[list[str], string_list("labels")] | None = None
    summary: str = ""
    attributes: Attributes = Field(default_factory=dict)


class AssertRelationshipParams(Params):
    source_name: Annotated[str, required_text("source_name")]
    target_name: Annotated[str, required_text("target_name")]
    predicate: Annotated[str, required_text("predicate")]
    group_id: WriteGroup = DEFAULT_GROUP_ID
    fact: str | None = None
    attributes: Attributes = Field(default_factory=dict)
    valid_at: Annotated[datetime, timestamp("valid_at")] | None = None
    relation_type: str | None = None
    # lcg extension: uuids of current facts this one replaces.
    supersedes: list[str] = Field(default_factory=list)

    @field_validator("supersedes", mode="before")
    @classmethod
    def _check_supersedes(cls, value: Any) -> list[str]:
        if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
            raise ValueError("supersedes must be an array of fact uuid strings")
        return list(dict.fromkeys(x.strip() for x in value))


class GetEpisodesParams(Params):
    group_id: ReadGroup = DEFAULT_GROUP_ID
    last_n: Annotated[int, count_field("last_n")] = 50


class GroupsParams(Params):
    """`group_ids` variant A: omitted means all groups, `[]` means none."""

    group_ids: GroupsOptional = None


class EdgesByUuidsParams(Params):
    uuids: Annotated[list[str], string_list("uuids")] = Field(default_factory=list)


class ListEntitiesParams(CollapsingGroupsParams):
    num_results: Annotated[int, count_field("num_results", positive=True)] = 500


class ListRelationshipsParams(CollapsingGroupsParams):
    num_results: Annotated[int, count_field("num_results", positive=True)] = 1000


class NeighborsParams(CollapsingGroupsParams):
    entity_uuid: Annotated[str, required_text("entity_uuid")]
    num_results: Annotated[int, count_field("num_results")] = 50


class BySourceParams(CollapsingGroupsParams):
    source: Annotated[str, required_text("source")]
    num_results: Annotated[int, count_field("num_results")] = 100


class DeleteEpisodeParams(Params):
    episode_uuid: Annotated[str, required_text("episode_uuid")]


class DeleteBySourceParams(Params):
    source_file: Annotated[str, required_text("source_file")]
    group_ids: GroupsRequired


class DeleteChunkParams(Params):
    chunk_id: Annotated[str, required_text("chunk_id")]
    group_ids: GroupsRequired


class DeleteByGroupParams(Params):
    group_ids: GroupsRequired
    dry_run: bool = False
    confirm: bool = False


class ClearAllParams(Params):
    confirm: bool = False
    # lcg keeps the WAL unless told otherwise; the reference defaults to false (docs/api.md
    # §knowledge_clear_all).
    preserve_wal: bool = True


# The reference's fields first (pydantic orders fields from the last base to the first).
class EdgesByGroupParams(TimeFields, GroupsParams):
    """knowledge_get_edges_by_group: `group_ids` variant A plus the time parameters."""


class TemporalListRelationshipsParams(TimeFields, ListRelationshipsParams):
    """knowledge_list_relationships plus the time parameters."""


class TemporalNeighborsParams(TimeFields, NeighborsParams):
    """knowledge_get_entity_neighbors plus the time parameters."""


declare = Declarations()


# -- direct writes -----------------------------------------------------------------------------


@declare(
    "knowledge_assert_entity",
    "write",
    AssertEntityParams,
    "Create or update one entity by exact name (case-insensitive) or by entity_uuid within a "
    "group, without any LLM extraction. Repeating the call with the same name is idempotent.",
    required=("name",),
)
async def _assert_entity(engine: Engine, a: AssertEntityParams, ctx: Context) -> dict[str, Any]:
    return await writes.assert_entity(
        engine, a.name, a.group_id, a.entity_uuid, a.labels, a.summary, a.attributes
    )


@declare(
    "knowledge_assert_relationship",
    "write",
    AssertRelationshipParams,
    "Create or update one directed fact (source --predicate--> target) between two existing "
    "entities of the same group, resolved by name. The (source, predicate, target) triple of a "
    "current fact is its identity: asserting it again updates the fact text and validity. "
    "lcg extension: supersedes (uuids of current facts this one replaces) ends those facts at "
    "this one's valid_at; without it, a relation type the ontology declares cardinality one, or "
    "one of lcg's single-valued families (LEADS, REPORTS_TO, WORKS_AT, WRITTEN_IN, STATUS, "
    "DEADLINE, ...), retires the contradicted current fact. Listed in edges_superseded. To add "
    "many facts at once, use knowledge_add_facts.",
    required=("source_name", "target_name", "predicate"),
)
async def _assert_relationship(
    engine: Engine, a: AssertRelationshipParams, ctx: Context
) -> dict[str, Any]:
    return await writes.assert_relationship(
        engine,
        a.source_name,
        a.target_name,
        a.predicate,
        a.group_id,
        a.fact,
        a.attributes,
        a.valid_at,
        a.relation_type,
        a.supersedes,
    )


# -- reads ---------------------------------------------------------------------------------------


@declare(
    "knowledge_get_episodes",
    "read",
    GetEpisodesParams,
    "The most recent episodes (ingested texts) of one group, newest first, with the uuids of "
    "the entities each one mentions.",
)
async def _get_episodes(engine: Engine, a: GetEpisodesParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_episodes(engine, a.group_id, a.last_n)


@declare(
    "knowledge_get_nodes_by_group",
    "read",
    GroupsParams,
    "Every entity of the given groups, unranked and unpaged (all groups when group_ids is "
    "omitted; none for []): a bulk dump that can be large. To look something up by name or "
    "topic use knowledge_find_entities; to browse the newest entities with the episodes that "
    "mention them, knowledge_list_entities.",
)
async def _nodes_by_group(engine: Engine, a: GroupsParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_nodes_by_group(engine, a.group_ids)


@declare(
    "knowledge_get_edges_by_group",
    "read",
    EdgesByGroupParams,
    "Every fact (relationship) owned by the given groups, current and invalidated, unranked "
    "and unpaged: a bulk dump; with as_of / known_at / include_invalidated, only the facts "
    "visible at those instants. To search facts use knowledge_find_relationships; to browse "
    "the newest, knowledge_list_relationships; for one entity's facts, "
    "knowledge_get_entity_neighbors.",
)
async def _edges_by_group(engine: Engine, a: EdgesByGroupParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_edges_by_group(engine, a.group_ids, a.optional_time_filter())


@declare(
    "knowledge_get_edges_by_uuids",
    "read",
    EdgesByUuidsParams,
    "Fetch specific facts by uuid (from an earlier answer); unknown uuids are left out. To "
    "find facts by content use knowledge_find_relationships.",
    required=("uuids",),
)
async def _edges_by_uuids(engine: Engine, a: EdgesByUuidsParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_edges_by_uuids(engine, a.uuids)


@declare(
    "knowledge_list_entities",
    "read",
    ListEntitiesParams,
    "Browse entities, newest uuid first, at most num_results, with the episodes that mention "
    "each one. To look something up by name or topic use knowledge_find_entities; for every "
    "entity of a group at once, knowledge_get_nodes_by_group.",
)
async def _list_entities(engine: Engine, a: ListEntitiesParams, ctx: Context) -> dict[str, Any]:
    return await reads.list_entities(engine, a.num_results, a.group_ids)


@declare(
    "knowledge_list_relationships",
    "read",
    TemporalListRelationshipsParams,
    "Browse facts, at most num_results, with the episodes that mention either endpoint "
    "(optionally filtered by as_of / known_at / include_invalidated). To search facts by "
    "content use knowledge_find_relationships; for every fact of a group at once, "
    "knowledge_get_edges_by_group.",
)
async def _list_relationships(
    engine: Engine, a: TemporalListRelationshipsParams, ctx: Context
) -> dict[str, Any]:
    return await reads.list_relationships(
        engine, a.num_results, a.group_ids, a.optional_time_filter()
    )


@declare(
    "knowledge_get_entity_neighbors",
    "read",
    TemporalNeighborsParams,
    "The one-hop neighbourhood of an entity: its facts (outgoing first) and the entities at "
    "their other ends (optionally filtered by as_of / known_at / include_invalidated).",
    required=("entity_uuid",),
)
async def _neighbors(engine: Engine, a: TemporalNeighborsParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_entity_neighbors(
        engine, a.entity_uuid, a.num_results, a.group_ids, a.optional_time_filter()
    )


@declare(
    "knowledge_get_entities_by_source",
    "read",
    BySourceParams,
    "Entities mentioned by episodes whose source_description contains the given text.",
    required=("source",),
)
async def _by_source(engine: Engine, a: BySourceParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_entities_by_source(engine, a.source, a.num_results, a.group_ids)


# -- deletes -------------------------------------------------------------------------------------


@declare(
    "knowledge_delete_episode",
    "write",
    DeleteEpisodeParams,
    "Delete one episode by uuid. Entities and facts extracted from it are kept.",
    required=("episode_uuid",),
)
async def _delete_episode(engine: Engine, a: DeleteEpisodeParams, ctx: Context) -> dict[str, Any]:
    return await deletes.delete_episode(engine, a.episode_uuid)


@declare(
    "knowledge_delete_by_source",
    "write",
    DeleteBySourceParams,
    "Delete every episode ingested from a source file within the given groups.",
    required=("source_file", "group_ids"),
)
async def _delete_by_source(
    engine: Engine, a: DeleteBySourceParams, ctx: Context
) -> dict[str, Any]:
    return await deletes.delete_by_source(engine, a.source_file, a.group_ids)


@declare(
    "knowledge_delete_chunk_episode",
    "write",
    DeleteChunkParams,
    "Delete every episode whose name is the given chunk id within the given groups.",
    required=("chunk_id", "group_ids"),
)
async def _delete_chunk(engine: Engine, a: DeleteChunkParams, ctx: Context) -> dict[str, Any]:
    return await deletes.delete_chunk_episode(engine, a.chunk_id, a.group_ids)


@declare(
    "knowledge_delete_by_group",
    "admin",
    DeleteByGroupParams,
    "Destructive: purge all entities, facts and episodes of whole groups. Needs confirm: true "
    "(or dry_run: true to see the counts first). To remove one text use "
    "knowledge_delete_episode or knowledge_delete_by_source instead.",
    destructive=True,
    required=("group_ids",),
)
async def _delete_by_group(engine: Engine, a: DeleteByGroupParams, ctx: Context) -> dict[str, Any]:
    return await deletes.delete_by_group(engine, a.group_ids, a.dry_run, a.confirm)


@declare(
    "knowledge_clear_all",
    "write",
    ClearAllParams,
    "Destructive: delete the entire graph (every group) and start empty. Needs confirm: true. "
    "The write-ahead log is kept (the graph can be rebuilt from it) unless preserve_wal: "
    "false. Only when the user explicitly asks to wipe everything; to remove some data use "
    "knowledge_delete_episode, knowledge_delete_by_source or knowledge_delete_by_group.",
    destructive=True,
    required=("confirm",),
)
async def _clear_all(engine: Engine, a: ClearAllParams, ctx: Context) -> dict[str, Any]:
    return await clear.clear_all(engine, a.confirm, a.preserve_wal)
