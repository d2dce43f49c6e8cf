"""The method registry: every method lcg serves, declared exactly once, and `dispatch`.

A declaration (`lcg.service.declare`) names the method, its MCP scope (None: not exposed over
MCP), its params model, its handler and a description written for an LLM reader. This module
declares the core methods and gathers its own and each area's declarations (`methods_*`) into
`REGISTRY`, in a fixed order. Transports (JSON-RPC, MCP, HTTP, the CLI) are derived from this
table; they parse, call `dispatch`, and map results and errors.
"""

from __future__ import annotations

from typing import Any

from lcg.admin import rebuild, recover, status, waladmin
from lcg.engine import Engine
from lcg.errors import InvalidRequestError, UnavailableError
from lcg.graph import deletes, reads
from lcg.service import (
    methods_curation,
    methods_embedding,
    methods_ingest,
    methods_search,
    methods_temporal,
    methods_typing,
    paths,
)
from lcg.service import params as p
from lcg.service import temporal_params as tp
from lcg.service import wal_params as wp
from lcg.service.declare import Context, Declarations, Method

__all__ = ["REGISTRY", "Context", "Method", "dispatch"]

declare = Declarations()


async def dispatch(
    engine: Engine, name: str, raw_params: Any, ctx: Context | None = None
) -> dict[str, Any]:
    """Validate `raw_params` for method `name` and run it.

    Raises:
        InvalidRequestError: unknown method or invalid params (nothing was changed).
        UnavailableError: the database is not open and the method needs it.
        LcgError: anything the method itself raises.
    """
    method = REGISTRY.get(name)
    if method is None:
        raise InvalidRequestError(f"Method not found: {name}")
    parsed = p.parse_params(method.params, raw_params)
    if engine.degraded_reason is not None and not method.degraded_ok:
        raise UnavailableError(engine.degraded_reason)
    return await method.handler(engine, parsed, ctx or Context())


# -- lifecycle and status -----------------------------------------------------------------------


@declare("health_check", None, p.Empty, "Liveness and readiness probe.", degraded_ok=True)
async def _health(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await status.health(engine)


@declare(
    "knowledge_status",
    "read",
    p.Empty,
    "Graph counts, per-group WAL positions, index state and the embedder in use. Call it to "
    "see whether the graph is populated and fully caught up with its write-ahead log.",
    degraded_ok=True,
)
async def _status(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await status.status(engine)


@declare(
    "knowledge_close",
    "admin",
    p.Empty,
    "Shut the service down gracefully: in-flight calls finish, the log is flushed.",
    degraded_ok=True,
)
async def _close(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    # The transport that received the call performs the shutdown after writing this answer.
    return {"status": "closed"}


# -- direct writes -----------------------------------------------------------------------------


@declare(
    "knowledge_assert_entity",
    "write",
    p.AssertEntityParams,
    "Create or update one entity by exact name (case-insensitive) or by entity_uuid within a "
    "group, without any LLM extraction. Repeating the call with the same name is idempotent.",
)
async def _assert_entity(engine: Engine, a: p.AssertEntityParams, ctx: Context) -> dict[str, Any]:
    return await engine.assert_entity(
        a.name, a.group_id, a.entity_uuid, a.labels, a.summary, a.attributes
    )


@declare(
    "knowledge_assert_relationship",
    "write",
    p.AssertRelationshipParams,
    "Create or update one directed fact (source --predicate--> target) between two existing "
    "entities of the same group, resolved by name. The (source, predicate, target) triple of a "
    "current fact is its identity: asserting it again updates the fact text and validity. "
    "lcg extension: supersedes (uuids of current facts this one replaces) ends those facts at "
    "this one's valid_at; without it, a relation type the ontology declares cardinality one, or "
    "one of lcg's single-valued families (LEADS, REPORTS_TO, WORKS_AT, WRITTEN_IN, STATUS, "
    "DEADLINE, ...), retires the contradicted current fact. Listed in edges_superseded. To add "
    "many facts at once, use knowledge_add_facts.",
)
async def _assert_relationship(
    engine: Engine, a: p.AssertRelationshipParams, ctx: Context
) -> dict[str, Any]:
    return await engine.assert_relationship(
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
    p.GetEpisodesParams,
    "The most recent episodes (ingested texts) of one group, newest first, with the uuids of "
    "the entities each one mentions.",
)
async def _get_episodes(engine: Engine, a: p.GetEpisodesParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_episodes(engine, a.group_id, a.last_n)


@declare(
    "knowledge_get_nodes_by_group",
    "read",
    p.GroupsParams,
    "Every entity of the given groups, unranked and unpaged (all groups when group_ids is "
    "omitted; none for []): a bulk dump that can be large. To look something up by name or "
    "topic use knowledge_find_entities; to browse the newest entities with the episodes that "
    "mention them, knowledge_list_entities.",
)
async def _nodes_by_group(engine: Engine, a: p.GroupsParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_nodes_by_group(engine, a.group_ids)


@declare(
    "knowledge_get_edges_by_group",
    "read",
    tp.EdgesByGroupParams,
    "Every fact (relationship) owned by the given groups, current and invalidated, unranked "
    "and unpaged: a bulk dump; with as_of / known_at / include_invalidated, only the facts "
    "visible at those instants. To search facts use knowledge_find_relationships; to browse "
    "the newest, knowledge_list_relationships; for one entity's facts, "
    "knowledge_get_entity_neighbors.",
)
async def _edges_by_group(engine: Engine, a: tp.EdgesByGroupParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_edges_by_group(engine, a.group_ids, a.optional_time_filter())


@declare(
    "knowledge_get_edges_by_uuids",
    "read",
    p.EdgesByUuidsParams,
    "Fetch specific facts by uuid (from an earlier answer); unknown uuids are left out. To "
    "find facts by content use knowledge_find_relationships.",
)
async def _edges_by_uuids(engine: Engine, a: p.EdgesByUuidsParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_edges_by_uuids(engine, a.uuids)


@declare(
    "knowledge_list_entities",
    "read",
    p.ListEntitiesParams,
    "Browse entities, newest uuid first, at most num_results, with the episodes that mention "
    "each one. To look something up by name or topic use knowledge_find_entities; for every "
    "entity of a group at once, knowledge_get_nodes_by_group.",
)
async def _list_entities(engine: Engine, a: p.ListEntitiesParams, ctx: Context) -> dict[str, Any]:
    return await reads.list_entities(engine, a.num_results, a.group_ids)


@declare(
    "knowledge_list_relationships",
    "read",
    tp.TemporalListRelationshipsParams,
    "Browse facts, at most num_results, with the episodes that mention either endpoint "
    "(optionally filtered by as_of / known_at / include_invalidated). To search facts by "
    "content use knowledge_find_relationships; for every fact of a group at once, "
    "knowledge_get_edges_by_group.",
)
async def _list_relationships(
    engine: Engine, a: tp.TemporalListRelationshipsParams, ctx: Context
) -> dict[str, Any]:
    return await reads.list_relationships(
        engine, a.num_results, a.group_ids, a.optional_time_filter()
    )


@declare(
    "knowledge_get_entity_neighbors",
    "read",
    tp.TemporalNeighborsParams,
    "The one-hop neighbourhood of an entity: its facts (outgoing first) and the entities at "
    "their other ends (optionally filtered by as_of / known_at / include_invalidated).",
)
async def _neighbors(engine: Engine, a: tp.TemporalNeighborsParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_entity_neighbors(
        engine, a.entity_uuid, a.num_results, a.group_ids, a.optional_time_filter()
    )


@declare(
    "knowledge_get_entities_by_source",
    "read",
    p.BySourceParams,
    "Entities mentioned by episodes whose source_description contains the given text.",
)
async def _by_source(engine: Engine, a: p.BySourceParams, ctx: Context) -> dict[str, Any]:
    return await reads.get_entities_by_source(engine, a.source, a.num_results, a.group_ids)


# -- deletes -------------------------------------------------------------------------------------


@declare(
    "knowledge_delete_episode",
    "write",
    p.DeleteEpisodeParams,
    "Delete one episode by uuid. Entities and facts extracted from it are kept.",
)
async def _delete_episode(engine: Engine, a: p.DeleteEpisodeParams, ctx: Context) -> dict[str, Any]:
    return await deletes.delete_episode(engine, a.episode_uuid)


@declare(
    "knowledge_delete_by_source",
    "write",
    p.DeleteBySourceParams,
    "Delete every episode ingested from a source file within the given groups.",
)
async def _delete_by_source(
    engine: Engine, a: p.DeleteBySourceParams, ctx: Context
) -> dict[str, Any]:
    return await deletes.delete_by_source(engine, a.source_file, a.group_ids)


@declare(
    "knowledge_delete_chunk_episode",
    "write",
    p.DeleteChunkParams,
    "Delete every episode whose name is the given chunk id within the given groups.",
)
async def _delete_chunk(engine: Engine, a: p.DeleteChunkParams, ctx: Context) -> dict[str, Any]:
    return await deletes.delete_chunk_episode(engine, a.chunk_id, a.group_ids)


@declare(
    "knowledge_delete_by_group",
    "admin",
    p.DeleteByGroupParams,
    "Destructive: purge all entities, facts and episodes of whole groups. Needs confirm: true "
    "(or dry_run: true to see the counts first). To remove one text use "
    "knowledge_delete_episode or knowledge_delete_by_source instead.",
    destructive=True,
)
async def _delete_by_group(
    engine: Engine, a: p.DeleteByGroupParams, ctx: Context
) -> dict[str, Any]:
    return await deletes.delete_by_group(engine, a.group_ids, a.dry_run, a.confirm)


@declare(
    "knowledge_clear_all",
    "write",
    p.ClearAllParams,
    "Destructive: delete the entire graph (every group) and start empty. Needs confirm: true. "
    "The write-ahead log is kept (the graph can be rebuilt from it) unless preserve_wal: "
    "false. Only when the user explicitly asks to wipe everything; to remove some data use "
    "knowledge_delete_episode, knowledge_delete_by_source or knowledge_delete_by_group.",
    destructive=True,
)
async def _clear_all(engine: Engine, a: p.ClearAllParams, ctx: Context) -> dict[str, Any]:
    return await engine.clear_all(a.confirm, a.preserve_wal)


# -- admin ---------------------------------------------------------------------------------------


@declare(
    "knowledge_query_cypher",
    "cypher",
    p.QueryCypherParams,
    "Run one Cypher statement against the graph (tables Episode, Entity, Fact; relationships "
    "MENTIONS and RELATES_TO). Every cell comes back as a string. Mutations are logged and "
    "replayed verbatim but bypass lcg's invariants; prefer the typed methods.",
)
async def _cypher(engine: Engine, a: p.QueryCypherParams, ctx: Context) -> dict[str, Any]:
    return await engine.query_cypher(a.query)


@declare(
    "knowledge_build_indices",
    "admin",
    p.Empty,
    "Drop and reload the in-process search index (text and vectors) of every group; writes wait "
    "meanwhile. Searches never need it first (the index loads itself). Safe to repeat.",
)
async def _build_indices(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await engine.build_indices()


@declare(
    "knowledge_rebuild_from_wal",
    "admin",
    p.RebuildParams,
    "Replay a group's write-ahead log into the graph: from_seq 0 re-derives the whole group "
    "(force_clear: true purges it first if it holds data), a later from_seq replays a tail; "
    "dry_run counts without writing. Without a progress token a real run starts a background "
    "job and returns its job_id at once: poll it with knowledge_rebuild_status.",
    long_running=True,
)
async def _rebuild(engine: Engine, a: p.RebuildParams, ctx: Context) -> dict[str, Any]:
    # A streaming call (progress wanted) and a dry run answer synchronously; any other call
    # starts a background job, polled with knowledge_rebuild_status (API.md §2.34 step 9).
    if ctx.progress is None and not a.dry_run:
        return await rebuild.start_rebuild(engine, a.group_id, a.from_seq, a.to_seq, a.force_clear)
    return await rebuild.rebuild_from_wal(
        engine, a.group_id, a.from_seq, a.to_seq, a.dry_run, a.force_clear, progress=ctx.progress
    )


@declare(
    "knowledge_rebuild_status",
    "read",
    p.RebuildStatusParams,
    "Poll a background WAL rebuild started by knowledge_rebuild_from_wal (without a progress "
    "token): its status (running, completed, failed or not_found), progress counters and, once "
    "completed, the replay statistics. Jobs are kept in memory only and are lost on restart.",
)
async def _rebuild_status(engine: Engine, a: p.RebuildStatusParams, ctx: Context) -> dict[str, Any]:
    return rebuild.rebuild_status(engine, str(a.job_id))


# -- WAL administration (lcg.admin.waladmin) -----------------------------------------------------


@declare(
    "knowledge_dump_wal",
    "admin",
    wp.DumpWalParams,
    "Write the current graph as a fresh, compacted write-ahead log (lcg's own line format) into "
    "target_dir (default .lcg/wal-compacted, which must not exist or be empty; relative to the "
    "export directory, and inside it or the workspace): one group's stream with group_id, else "
    "one stream directory per group. The live graph and WAL are not changed.",
)
async def _dump_wal(engine: Engine, a: wp.DumpWalParams, ctx: Context) -> dict[str, Any]:
    target = a.target_dir
    if target is not None:
        method, field = "knowledge_dump_wal", "target_dir"
        target = str(paths.writable_path(engine.settings, target, method=method, field=field))
    return await waladmin.dump_wal(engine, a.group_id, target)


@declare(
    "knowledge_prepare_checkpoint",
    "admin",
    p.Empty,
    "Before copying .lcg/ for a backup: end every open write-ahead-log file and fold the "
    "database journal into the database file. Unrelated to the knowledge_wal_mark_* methods.",
)
async def _prepare_checkpoint(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await waladmin.prepare_checkpoint(engine)


@declare(
    "knowledge_wal_mark_create",
    "admin",
    wp.MarkNameParams,
    "Record a named position ('known good here') in one group's write-ahead log. To return the "
    "group to it later: knowledge_rebuild_from_wal with from_seq 0, to_seq = the mark's seq and "
    "force_clear true (a null seq means the group was empty: use knowledge_delete_by_group).",
)
async def _mark_create(engine: Engine, a: wp.MarkNameParams, ctx: Context) -> dict[str, Any]:
    return await waladmin.mark_create(engine, a.name, a.group_id)


@declare(
    "knowledge_wal_mark_list",
    "admin",
    wp.MarkGroupParams,
    "List one group's named write-ahead-log positions, sorted by name, each with whether the "
    "log on disk can still reproduce it (reachable).",
    degraded_ok=True,
)
async def _mark_list(engine: Engine, a: wp.MarkGroupParams, ctx: Context) -> dict[str, Any]:
    return await waladmin.mark_list(engine, a.group_id)


@declare(
    "knowledge_wal_mark_delete",
    "admin",
    wp.MarkNameParams,
    "Delete a named write-ahead-log position, freeing its name for reuse. The log is unchanged.",
    degraded_ok=True,
)
async def _mark_delete(engine: Engine, a: wp.MarkNameParams, ctx: Context) -> dict[str, Any]:
    return await waladmin.mark_delete(engine, a.name, a.group_id)


# -- recovery (lcg.admin.recover) ----------------------------------------------------------------


@declare(
    "knowledge_recover",
    "admin",
    p.RecoverParams,
    "Recover an unavailable or damaged graph database with one strategy: "
    "rebuild_from_workspace_wal (move the database aside and re-derive it from the "
    "write-ahead log; the usual choice), drop_lbug_wal (set the database's own journal aside "
    "and reopen at its last checkpoint, then catch up from the log) or restore_from_backup "
    "(copy the newest *.pre-*-backup over the database, then catch up). Works on a healthy "
    "service too: the open database is replaced.",
    degraded_ok=True,
)
async def _recover(engine: Engine, a: p.RecoverParams, ctx: Context) -> dict[str, Any]:
    return await recover.recover(engine, a.strategy)


@declare(
    "knowledge_recover_full",
    "admin",
    p.Empty,
    "One-call recovery: a no-op when the database is open; otherwise reopen it at its last "
    "checkpoint and catch up from the write-ahead log, falling back to a full rebuild from "
    "the log.",
    degraded_ok=True,
)
async def _recover_full(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await recover.recover_full(engine)


# -- the table ----------------------------------------------------------------------------------


def _gather(*modules: Declarations) -> dict[str, Method]:
    table: dict[str, Method] = {}
    for declared in modules:
        for method in declared.methods:
            if method.name in table:
                raise RuntimeError(f"method {method.name} declared twice")
            table[method.name] = method
    return table


REGISTRY: dict[str, Method] = _gather(
    declare,
    methods_curation.declare,
    methods_embedding.declare,
    methods_ingest.declare,
    methods_search.declare,
    methods_temporal.declare,
    methods_typing.declare,
)
