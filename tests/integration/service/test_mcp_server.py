"""MCP behaviour through the SDK's in-memory client against a real engine (docs/api.md §mcp-tools and §mcp-attached).

The client runs in `legacy` mode: JSON-RPC framing with real progress tokens, as on stdio.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError

from lcg import Engine
from lcg.service import params as p
from lcg.service.mcp import LocalBackend, build_server, parse_scopes, tool_table
from lcg.service.registry import REGISTRY, Context, Method, dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

# docs/api.md §mcp-tools: registry scope and schema `required` of every tool of the reference.
REFERENCE: dict[str, tuple[str, tuple[str, ...]]] = {
    "knowledge_status": ("read", ()),
    "knowledge_find_entities": ("read", ("query",)),
    "knowledge_find_relationships": ("read", ("query",)),
    "knowledge_get_episodes": ("read", ()),
    "knowledge_get_nodes_by_group": ("read", ()),
    "knowledge_get_edges_by_group": ("read", ()),
    "knowledge_get_edges_by_uuids": ("read", ("uuids",)),
    "knowledge_search_passages": ("read", ("query",)),
    "knowledge_list_entities": ("read", ()),
    "knowledge_list_relationships": ("read", ()),
    "knowledge_get_entity_neighbors": ("read", ("entity_uuid",)),
    "knowledge_get_entities_by_source": ("read", ("source",)),
    "knowledge_rebuild_status": ("read", ("job_id",)),
    "knowledge_validate_corrections": ("read", ()),
    "knowledge_process_chunk": ("write", ("chunk_text", "chunk_id", "source_file")),
    "knowledge_add_episode": ("write", ("name", "episode_body")),
    "knowledge_delete_episode": ("write", ("episode_uuid",)),
    "knowledge_delete_by_source": ("write", ("source_file", "group_ids")),
    "knowledge_delete_chunk_episode": ("write", ("chunk_id", "group_ids")),
    "knowledge_clear_all": ("write", ("confirm",)),
    "knowledge_apply_corrections": ("write", ()),
    "knowledge_merge_entities": ("write", ()),
    "knowledge_reprocess_entity_types": ("write", ()),
    "knowledge_canonicalize_relations": ("write", ("group_id",)),
    "knowledge_backfill_relation_types": ("write", ("group_id",)),
    "knowledge_reprocess_relation_types": ("write", ()),
    "knowledge_add_cross_group_edge": ("write", ("name", "source", "target", "fact")),
    "knowledge_assert_entity": ("write", ("name",)),
    "knowledge_assert_relationship": ("write", ("source_name", "target_name", "predicate")),
    "knowledge_query_cypher": ("cypher", ("query",)),
    "knowledge_dump_wal": ("admin", ()),
    "knowledge_prepare_checkpoint": ("admin", ()),
    "knowledge_wal_mark_create": ("admin", ("name",)),
    "knowledge_wal_mark_list": ("admin", ()),
    "knowledge_wal_mark_delete": ("admin", ("name",)),
    "knowledge_rebuild_from_wal": ("admin", ()),
    "knowledge_recover": ("admin", ("strategy",)),
    "knowledge_recover_full": ("admin", ()),
    "knowledge_close": ("admin", ()),
    "knowledge_build_indices": ("admin", ()),
    "knowledge_rebind_pointers": ("admin", ("source_group_id",)),
    "knowledge_delete_by_group": ("admin", ("group_ids",)),
    # lcg's own tools (not in the reference): temporal reads and context (docs/temporal.md)
    "knowledge_get_changes": ("read", ("since",)),
    "knowledge_get_entity_timeline": ("read", ()),
    "knowledge_get_context": ("read", ("query",)),
    # lcg's own: re-embedding after an embedder change (docs/embeddings.md)
    "knowledge_backfill_summary_embeddings": ("write", ()),
    # lcg's own: the portable graph file of `lcg export` / `lcg import` (README, curation)
    "knowledge_export_graph": ("admin", ("path",)),
    "knowledge_import_graph": ("admin", ("path",)),
    # lcg's own: caller-written episodes (README, knowledge_add_facts)
    "knowledge_add_facts": ("write", ("reference_time",)),
    # lcg's own: the code graph (docs/code-graph.md)
    "knowledge_code_ingest": ("admin", ("path",)),
    "knowledge_code_where": ("read", ("name",)),
    "knowledge_code_calls": ("read", ("name",)),
    "knowledge_code_changes": ("read", ("since",)),
}


def client_for(engine: Engine, scope: str = "all", *, reference: bool = True) -> Client:
    """An in-memory client; `reference` groups the tools as the reference does (this file checks
    the reference's tool surface), else as lcg's own `lcg mcp` does."""
    scopes = parse_scopes(scope)
    tools = tool_table(scopes, reference_scopes=reference)
    return Client(build_server(LocalBackend(engine), tools, scopes=scopes), mode="legacy")


def test_every_registered_tool_has_the_reference_scope() -> None:
    exposed = {m.name: m.scope for m in REGISTRY.values() if m.scope is not None}
    assert exposed, "the registry exposes no tools"
    assert {name: REFERENCE[name][0] for name in exposed} == exposed
    assert REGISTRY["health_check"].scope is None


@pytest.mark.parametrize("scope", ["read", "write", "cypher", "admin", "all", "read, cypher,,read"])
async def test_tools_list_shows_exactly_the_tools_of_the_active_scopes(
    engine: Engine, scope: str
) -> None:
    scopes = parse_scopes(scope)
    async with client_for(engine, scope) as client:
        tools = (await client.list_tools()).tools
    names = [t.name for t in tools]
    expected = [m.name for m in REGISTRY.values() if m.scope in scopes]
    if "admin" in scopes and "knowledge_close" not in expected:
        expected.append("knowledge_close")
    assert names == expected
    assert "health_check" not in names
    for tool in tools:
        assert REFERENCE[tool.name][0] in scopes
        assert tool.input_schema["type"] == "object"
        assert tuple(tool.input_schema.get("required", ())) == REFERENCE[tool.name][1], tool.name
        assert set(tool.input_schema.get("required", ())) <= set(tool.input_schema["properties"])
        assert tool.description


@pytest.mark.parametrize("scope", ["read,write", "write", "all", "admin"])
async def test_lcg_own_grouping_puts_destructive_tools_behind_admin(
    engine: Engine, scope: str
) -> None:
    scopes = parse_scopes(scope)
    async with client_for(engine, scope, reference=False) as client:
        names = [t.name for t in (await client.list_tools()).tools]
    destructive = {m.name for m in REGISTRY.values() if m.destructive}
    assert {"knowledge_clear_all", "knowledge_delete_by_group"} <= destructive
    if "admin" in scopes:
        assert destructive <= set(names)
    else:
        assert not destructive & set(names), names
    # Everything else is exposed as the reference exposes it.
    expected = [
        m.name
        for m in REGISTRY.values()
        if (("admin" if m.destructive else m.scope) in scopes) and m.scope is not None
    ]
    if "admin" in scopes and "knowledge_close" not in expected:
        expected.append("knowledge_close")
    assert names == expected


async def test_a_hidden_destructive_tool_cannot_be_called(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    async with client_for(engine, "read,write", reference=False) as client:
        with pytest.raises(MCPError) as info:
            await client.call_tool("knowledge_clear_all", {"confirm": True})
    assert info.value.code == -32601
    assert (await engine.entity_by_name("liminis", "Apollo 11")) is not None


def test_near_duplicate_reads_say_when_to_use_which() -> None:
    # An agent sees three ways to get entities and three to get facts: each description names
    # the alternatives, so the choice is made from the descriptions alone.
    families = [
        ("knowledge_find_entities", "knowledge_list_entities", "knowledge_get_nodes_by_group"),
        (
            "knowledge_find_relationships",
            "knowledge_list_relationships",
            "knowledge_get_edges_by_group",
        ),
    ]
    for family in families:
        for name in family:
            others = [o for o in family if o != name]
            description = REGISTRY[name].description
            assert all(o in description for o in others), (name, description)
    for name in ("knowledge_clear_all", "knowledge_delete_by_group"):
        assert REGISTRY[name].description.startswith("Destructive:"), name


def test_deprecated_tools_say_so_and_name_an_existing_replacement() -> None:
    deprecated = [m for m in REGISTRY.values() if m.replaced_by is not None]
    assert [m.name for m in deprecated] == ["knowledge_backfill_relation_types"]
    for method in deprecated:
        assert method.replaced_by in REGISTRY
        assert method.description.startswith(f"Deprecated (use {method.replaced_by} instead):")
    for method in REGISTRY.values():
        if "deprecated" in method.description.lower():
            assert method.replaced_by is not None, method.name


async def test_schemas_are_tidy_for_an_llm_reader(engine: Engine) -> None:
    async with client_for(engine) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    entity = tools["knowledge_assert_entity"].input_schema
    assert "title" not in json.dumps(entity)
    assert entity["properties"]["labels"] == {"type": "array", "items": {"type": "string"}}
    assert entity["properties"]["group_id"]["default"] == "liminis"
    listing = tools["knowledge_list_entities"].input_schema["properties"]
    assert listing["num_results"]["minimum"] == 1 and listing["num_results"]["default"] == 500
    assert (
        tools["knowledge_delete_by_group"].input_schema["properties"]["group_ids"]["minItems"] == 1
    )


async def test_calls_return_the_result_as_structured_content_and_json_text(engine: Engine) -> None:
    async with client_for(engine) as client:
        created = await client.call_tool(
            "knowledge_assert_entity", {"name": "Ada Lovelace", "summary": "Mathematician"}
        )
        assert not created.is_error
        assert isinstance(created.structured_content, dict)
        assert json.loads(created.content[0].text) == created.structured_content  # type: ignore[union-attr]
        listed = await client.call_tool("knowledge_list_entities", {})
    assert not listed.is_error
    assert isinstance(listed.structured_content, dict)
    assert "Ada Lovelace" in json.dumps(listed.structured_content)


async def test_an_lcg_error_is_a_tool_error_with_the_wire_code_message_and_data(
    engine: Engine,
) -> None:
    async with client_for(engine) as client:
        result = await client.call_tool("knowledge_assert_entity", {"name": "X", "group_id": ""})
    assert result.is_error
    payload = result.structured_content
    assert isinstance(payload, dict)
    assert payload["code"] == -32000
    assert payload["message"].startswith("IPC error: group_id must be non-empty")
    assert payload["data"] == {"field": "group_id"}
    assert json.loads(result.content[0].text) == payload  # type: ignore[union-attr]


async def test_a_missing_or_null_required_argument_fails_before_the_handler(engine: Engine) -> None:
    async with client_for(engine) as client:
        missing = await client.call_tool("knowledge_delete_by_source", {"source_file": None})
        unnamed = await client.call_tool("knowledge_assert_entity", {"name": None, "summary": "s"})
        listed = await client.call_tool("knowledge_list_entities", {})
    assert missing.is_error
    assert missing.structured_content == {
        "code": -32602,
        "message": "Missing required argument(s) for 'knowledge_delete_by_source': source_file, group_ids",
    }
    assert unnamed.is_error
    assert unnamed.structured_content is not None and unnamed.structured_content["code"] == -32602
    assert listed.structured_content == {"nodes": [], "count": 0}


@pytest.mark.parametrize(
    ("scope", "tool"),
    [
        ("read", "knowledge_query_cypher"),
        ("all", "health_check"),
        ("all", "knowledge_no_such_tool"),
    ],
)
async def test_an_unknown_or_hidden_tool_is_a_protocol_error(
    engine: Engine, scope: str, tool: str
) -> None:
    async with client_for(engine, scope) as client:
        with pytest.raises(MCPError) as caught:
            await client.call_tool(tool, {"query": "RETURN 1"})
    assert caught.value.code == -32601
    assert caught.value.message == f"Unknown tool: '{tool}'"


async def test_knowledge_close_answers_and_asks_the_standalone_server_to_stop(
    engine: Engine,
) -> None:
    backend = LocalBackend(engine)
    server = build_server(backend, tool_table(parse_scopes("admin")))
    async with Client(server, mode="legacy") as client:
        result = await client.call_tool("knowledge_close", {})
    assert result.structured_content == {"status": "closed"}
    assert backend.closed.is_set()


@pytest.fixture
def slow_method(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """A long-running test method that reports progress from a worker thread, like the engine."""
    threads: list[int] = []

    async def handler(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            threads.append(threading.get_ident())
            for i in range(5):
                if ctx.progress is not None:
                    ctx.progress(
                        {"type": "progress", "message": f"step {i + 1}", "processed": i + 1}
                    )
            return {"success": True, "steps": 5}

        return await anyio.to_thread.run_sync(work)

    monkeypatch.setitem(
        REGISTRY,
        "knowledge_test_slow",
        Method("knowledge_test_slow", "admin", p.Empty, handler, "Test only.", long_running=True),
    )
    return threads


async def test_progress_frames_from_worker_threads_become_progress_notifications(
    engine: Engine, slow_method: list[int]
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with client_for(engine, "admin") as client:
        with anyio.fail_after(5):
            result = await client.call_tool(
                "knowledge_test_slow", {}, progress_callback=on_progress
            )
            quiet = await client.call_tool("knowledge_test_slow", {})
    assert result.structured_content == {"success": True, "steps": 5}
    assert quiet.structured_content == {"success": True, "steps": 5}
    assert seen == [(float(i), None, f"step {i}") for i in range(1, 6)]
    assert threading.get_ident() not in slow_method  # the frames really came from another thread


async def test_rebuild_from_wal_runs_through_mcp_with_a_progress_token(engine: Engine) -> None:
    async with client_for(engine) as client:
        await client.call_tool("knowledge_assert_entity", {"name": "Grace Hopper"})

        async def ignore(progress: float, total: float | None, message: str | None) -> None:
            return None

        with anyio.fail_after(10):
            result = await client.call_tool(
                "knowledge_rebuild_from_wal", {"force_clear": True}, progress_callback=ignore
            )
    assert not result.is_error, result.structured_content
    assert result.structured_content is not None and result.structured_content["success"] is True
