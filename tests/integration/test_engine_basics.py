"""Direct writes and reads through the registry against a real Kuzu database."""

from __future__ import annotations

import pytest

from lcg import Engine
from lcg.service.registry import dispatch

pytestmark = pytest.mark.anyio


async def test_assert_entity_is_idempotent_by_name_and_case(engine: Engine) -> None:
    first = await dispatch(engine, "knowledge_assert_entity", {"name": "Neil Armstrong"})
    again = await dispatch(engine, "knowledge_assert_entity", {"name": "  neil armstrong "})
    assert first["created"] is True
    assert again == {"entity_uuid": first["entity_uuid"], "created": False, "embedding_warning": None}


async def test_assert_relationship_upserts_on_source_predicate_target(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Neil Armstrong"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    params = {"source_name": "Neil Armstrong", "target_name": "Apollo 11", "predicate": "COMMANDED"}
    created = await dispatch(engine, "knowledge_assert_relationship", params)
    updated = await dispatch(engine, "knowledge_assert_relationship",
                             {**params, "fact": "Armstrong commanded Apollo 11", "valid_at": "1969-07-16 13:32:00"})
    assert created["created"] is True and updated["created"] is False
    assert updated["edge_uuid"] == created["edge_uuid"]
    edges = await dispatch(engine, "knowledge_get_edges_by_uuids", {"uuids": [created["edge_uuid"]]})
    assert edges["count"] == 1
    edge = edges["edges"][0]
    assert edge["fact"] == "Armstrong commanded Apollo 11"
    assert edge["valid_at"] == "1969-07-16 13:32:00"
    assert edge["created_at"] == ""


async def test_group_ids_omitted_means_all_and_empty_means_none(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "A", "group_id": "g1"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "B", "group_id": "g2"})
    everything = await dispatch(engine, "knowledge_get_nodes_by_group", {})
    nothing = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": []})
    one = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": "g1"})
    collapsed = await dispatch(engine, "knowledge_list_entities", {"group_ids": []})
    assert everything["count"] == 2
    assert nothing == {"nodes": [], "count": 0}
    assert [n["name"] for n in one["nodes"]] == ["A"]
    assert collapsed["count"] == 2
