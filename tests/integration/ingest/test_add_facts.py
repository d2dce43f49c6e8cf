"""knowledge_add_facts end to end over the socket with no model configured (the changelog of
changelog_support; test_mcp_add_facts.py runs it over MCP), and the ontology's and the history
rules of supersession."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.to_thread
import pytest
from changelog_support import check_changelog, fact
from rpc_support import running_server, wait_settled

from lcg import Engine
from lcg.config import Settings
from lcg.service.registry import dispatch
from lcg.service.rpc.client import RpcClient

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


async def test_the_changelog_over_the_socket(settings: Settings) -> None:
    assert settings.extractor != "heuristic"  # no extractor matters: none is called
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with RpcClient(path) as client:

            async def call(method: str, params: dict[str, Any]) -> dict[str, Any]:
                out = await anyio.to_thread.run_sync(client.call, method, params)
                assert isinstance(out, dict)
                return out

            await check_changelog(call)


async def test_the_ontology_decides_for_a_type_it_declares(engine: Engine) -> None:
    """A declared type with the default cardinality supersedes nothing, built-in family or not;
    `cardinality: one` supersedes on the source side even for a type no family knows."""
    path = engine.settings.home / "ontology.yaml"
    path.write_text(
        "mode: open\nentity_types: []\nrelation_types:\n"
        "  - name: LEADS\n  - name: USES_QUEUE\n    cardinality: one\n"
    )
    first = await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-01-01",
            "entities": [{"name": "Ana"}, {"name": "Bo"}, {"name": "Atlas"}, {"name": "Kafka"}],
            "facts": [
                fact("Ana", "LEADS", "Atlas", "Ana leads Atlas."),
                fact("Atlas", "USES_QUEUE", "Kafka", "Atlas uses Kafka as its queue."),
            ],
        },
    )
    assert first["edges_superseded"] == []
    second = await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-02-01",
            "entities": [{"name": "RabbitMQ"}],
            "facts": [
                fact("Bo", "LEADS", "Atlas", "Bo leads Atlas."),
                fact("Atlas", "USES_QUEUE", "RabbitMQ", "Atlas uses RabbitMQ as its queue."),
            ],
        },
    )
    assert [(s["fact"], s["reason"]) for s in second["edges_superseded"]] == [
        ("Atlas uses Kafka as its queue.", "ontology")
    ]


async def test_a_later_fact_stated_earlier_becomes_history_not_a_supersession(
    engine: Engine,
) -> None:
    """Told in March that Bo led Atlas from January, after learning Ana leads it since February:
    the January fact is stored already ended at February, and Ana's stays current."""
    await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-02-01",
            "entities": [{"name": "Ana"}, {"name": "Atlas"}],
            "facts": [fact("Ana", "LEADS", "Atlas", "Ana leads Atlas.")],
        },
    )
    late = await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-03-01",
            "entities": [{"name": "Bo"}],
            "facts": [fact("Bo", "LEADS", "Atlas", "Bo led Atlas.", valid_at="2025-01-01")],
        },
    )
    assert late["edges_superseded"] == []
    edges = await dispatch(engine, "knowledge_get_edges_by_group", {})
    ends = {e["fact"]: e["invalid_at"] for e in edges["edges"]}
    assert ends == {"Ana leads Atlas.": None, "Bo led Atlas.": "2025-02-01 00:00:00"}


async def test_endpoints_may_be_uuids_of_the_group_and_entities_resolve_like_extracted_ones(
    engine: Engine,
) -> None:
    made = await dispatch(engine, "knowledge_assert_entity", {"name": "Neil Armstrong"})
    result = await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "1969-07-16T13:32:00Z",
            "entities": [{"name": "neil armstrong"}, {"name": "Apollo 11", "labels": ["Mission"]}],
            "facts": [
                fact(
                    made["entity_uuid"], "COMMANDED", "Apollo 11", "Armstrong commanded Apollo 11."
                )
            ],
        },
    )
    assert (result["entities_created"], result["entities_merged"]) == (1, 1)
    edges = await dispatch(engine, "knowledge_get_edges_by_uuids", {"uuids": result["fact_uuids"]})
    assert [(e["source_node_uuid"], e["name"], e["valid_at"]) for e in edges["edges"]] == [
        (made["entity_uuid"], "COMMANDED", "1969-07-16 13:32:00")
    ]
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {})
    labels = {n["name"]: n["labels"] for n in nodes["nodes"]}
    assert labels == {"Neil Armstrong": ["Entity"], "Apollo 11": ["Entity", "Mission"]}


async def test_facts_of_one_call_supersede_each_other_by_their_dates(engine: Engine) -> None:
    """A whole history in one call: the earlier lead is stored ended where the later one starts
    (learned together, so never retired), and reported; same-date facts are left alone."""
    result = await dispatch(
        engine,
        "knowledge_add_facts",
        {
            "reference_time": "2025-06-01",
            "entities": [{"name": "Ana"}, {"name": "Bo"}, {"name": "Atlas"}],
            "facts": [
                fact("Bo", "LEADS", "Atlas", "Bo leads Atlas.", valid_at="2025-04-01"),
                fact("Ana", "LEADS", "Atlas", "Ana leads Atlas.", valid_at="2025-01-01"),
            ],
        },
    )
    bo, ana = result["fact_uuids"]
    assert [
        (s["uuid"], s["reason"], s["invalid_at"], s["superseded_by"], s["same_episode"])
        for s in result["edges_superseded"]
    ] == [(ana, "builtin", "2025-04-01 00:00:00", bo, True)]
    edges = await dispatch(engine, "knowledge_get_edges_by_group", {})
    assert {e["fact"]: e["invalid_at"] for e in edges["edges"]} == {
        "Bo leads Atlas.": None,
        "Ana leads Atlas.": "2025-04-01 00:00:00",
    }
    then = await dispatch(engine, "knowledge_get_edges_by_group", {"as_of": "2025-02-01T00:00:00Z"})
    assert [e["fact"] for e in then["edges"]] == ["Ana leads Atlas."]
