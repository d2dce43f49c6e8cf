"""Every method of the reference service's method index is registered with its scope and reachable
over the socket (docs/api.md §mcp-tools; each method has its section there).

The index (43 methods, with the MCP scope of the reference's quick matrix; `None` = not exposed
over MCP) is copied here from the reference's specification, outside this repository, because
tests do not read it. lcg's own additions are every
other registered name: they are walked over the socket too. Reachability is the point: an answer
that is an error about parameters is fine, "Method not found" is not.
"""

from __future__ import annotations

from typing import Any

from rpc_support import running_server, wait_settled

from lcg.config import Settings
from lcg.service.registry import REGISTRY
from lcg.service.rpc.client import RpcClient, RpcError

# fmt: off
API_INDEX: dict[str, str | None] = {
    "health_check": None,
    "knowledge_status": "read",
    "knowledge_close": "admin",
    "knowledge_process_chunk": "write",
    "knowledge_add_episode": "write",
    "knowledge_assert_entity": "write",
    "knowledge_assert_relationship": "write",
    "knowledge_find_entities": "read",
    "knowledge_find_relationships": "read",
    "knowledge_search_passages": "read",
    "knowledge_query_cypher": "cypher",
    "knowledge_get_episodes": "read",
    "knowledge_get_nodes_by_group": "read",
    "knowledge_get_edges_by_group": "read",
    "knowledge_get_edges_by_uuids": "read",
    "knowledge_list_entities": "read",
    "knowledge_list_relationships": "read",
    "knowledge_get_entity_neighbors": "read",
    "knowledge_get_entities_by_source": "read",
    "knowledge_delete_episode": "write",
    "knowledge_delete_by_source": "write",
    "knowledge_delete_chunk_episode": "write",
    "knowledge_delete_by_group": "admin",
    "knowledge_clear_all": "write",
    "knowledge_merge_entities": "write",
    "knowledge_validate_corrections": "read",
    "knowledge_apply_corrections": "write",
    "knowledge_reprocess_entity_types": "write",
    "knowledge_canonicalize_relations": "write",
    "knowledge_backfill_relation_types": "write",
    "knowledge_reprocess_relation_types": "write",
    "knowledge_add_cross_group_edge": "write",
    "knowledge_rebind_pointers": "admin",
    "knowledge_rebuild_from_wal": "admin",
    "knowledge_rebuild_status": "read",
    "knowledge_build_indices": "admin",
    "knowledge_dump_wal": "admin",
    "knowledge_prepare_checkpoint": "admin",
    "knowledge_wal_mark_create": "admin",
    "knowledge_wal_mark_list": "admin",
    "knowledge_wal_mark_delete": "admin",
    "knowledge_recover": "admin",
    "knowledge_recover_full": "admin",
}
# fmt: on

# Calls that would change the workspace under the walk get params that make them refuse.
_SAFE_PARAMS: dict[str, dict[str, Any]] = {
    "knowledge_clear_all": {"confirm": False},
    "knowledge_delete_by_group": {"group_ids": ["walk"], "dry_run": True},
    "knowledge_recover": {"strategy": "no_such_strategy"},
}


def test_the_index_has_43_methods() -> None:
    assert len(API_INDEX) == 43
    assert sum(1 for m in API_INDEX if m.startswith("knowledge_")) == 42


def test_every_index_method_is_registered_with_its_scope() -> None:
    missing = sorted(m for m in API_INDEX if m not in REGISTRY)
    assert missing == [], f"not registered: {missing}"
    wrong = {
        m: (REGISTRY[m].scope, scope)
        for m, scope in API_INDEX.items()
        if REGISTRY[m].scope != scope
    }
    assert wrong == {}, f"scope differs from the reference (registered, reference): {wrong}"


def test_every_method_is_reachable_over_the_socket(settings: Settings) -> None:
    names = [*sorted((set(API_INDEX) | set(REGISTRY)) - {"knowledge_close"}), "knowledge_close"]
    unreachable: dict[str, str] = {}
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with RpcClient(path, timeout=120) as client:
            for name in names:
                try:
                    client.call(name, _SAFE_PARAMS.get(name, {}))
                except RpcError as exc:
                    if exc.code == -32601 or "Method not found" in exc.message:
                        unreachable[name] = exc.message
    assert unreachable == {}, f"not reachable over the socket: {sorted(unreachable)}"
