"""Every operation the engine's writers log decodes to its typed change (lcg.wal.changes), and
encoding that change gives back the very operation the WAL holds: a real WAL, written through
the methods (assertions, an ingested episode, a supersession, a merge, a raw statement, a
delete, a purge), read back line by line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lcg import Engine
from lcg.ingest.pipeline import EpisodeInput, pipeline_for
from lcg.service.registry import dispatch
from lcg.wal.changes import decode, encode
from lcg.wal.layout import group_dir, list_groups
from lcg.wal.reader import iter_records
from lcg.wal.records import OPS, Op

pytestmark = pytest.mark.anyio

SETTINGS_OVERRIDES = {"extractor": "heuristic"}
GROUP = "g"


async def _write_every_operation(engine: Engine) -> None:
    armstrong = await dispatch(
        engine,
        "knowledge_assert_entity",
        {
            "name": "Neil Armstrong",
            "labels": ["Person"],
            "summary": "First person on the Moon",
            "attributes": {"role": "commander", "missions": [8, 11]},
            "group_id": GROUP,
        },
    )
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11", "group_id": GROUP})
    first = await dispatch(
        engine,
        "knowledge_assert_relationship",
        {
            "source_name": "Neil Armstrong",
            "target_name": "Apollo 11",
            "predicate": "COMMANDED",
            "valid_at": "1969-07-16T13:32:00Z",
            "attributes": {"seat": "left"},
            "group_id": GROUP,
        },
    )
    await dispatch(
        engine,
        "knowledge_assert_relationship",
        {
            "source_name": "Neil Armstrong",
            "target_name": "Apollo 11",
            "predicate": "FLEW",
            "fact": "Neil Armstrong flew on Apollo 11",
            "supersedes": [first["edge_uuid"]],
            "group_id": GROUP,
        },
    )
    pipeline = pipeline_for(engine)
    await pipeline.ingest(
        EpisodeInput(
            GROUP,
            "landing",
            "Neil Armstrong commanded Apollo 11. Apollo 11 landed on the Moon in July 1969.",
            datetime(1969, 7, 20, tzinfo=UTC),
        )
    )
    twin = await dispatch(
        engine, "knowledge_assert_entity", {"name": "Neil A. Armstrong", "group_id": GROUP}
    )
    await dispatch(
        engine,
        "knowledge_merge_entities",
        {
            "canonical_uuid": armstrong["entity_uuid"],
            "alias_uuids": [twin["entity_uuid"]],
            "group_id": GROUP,
        },
    )
    await dispatch(
        engine,
        "knowledge_query_cypher",
        {"query": "MATCH (e:Entity {name: 'Apollo 11'}) SET e.summary = 'Lunar landing'"},
    )
    episodes = await dispatch(engine, "knowledge_get_episodes", {"group_id": GROUP})
    await dispatch(
        engine, "knowledge_delete_episode", {"episode_uuid": episodes["episodes"][0]["uuid"]}
    )
    await dispatch(engine, "knowledge_delete_by_group", {"group_ids": [GROUP], "confirm": True})


async def test_every_logged_operation_decodes_and_encodes_back_to_itself(engine: Engine) -> None:
    await _write_every_operation(engine)
    root = engine.parts.wal.root
    seen: set[str] = set()
    for group in list_groups(root):
        for record in iter_records(group_dir(root, group)):
            op = Op(record.op, record.data)
            assert encode(decode(op, group)) == op, record
            seen.add(record.op)
    assert seen == OPS
