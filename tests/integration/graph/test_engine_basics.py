"""Direct writes and reads through the registry against a real Kuzu database."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcg import Engine
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


async def test_assert_entity_is_idempotent_by_name_and_case(engine: Engine) -> None:
    first = await dispatch(engine, "knowledge_assert_entity", {"name": "Neil Armstrong"})
    again = await dispatch(engine, "knowledge_assert_entity", {"name": "  neil armstrong "})
    assert first["created"] is True
    assert again == {
        "entity_uuid": first["entity_uuid"],
        "created": False,
        "embedding_warning": None,
    }


async def test_assert_relationship_upserts_on_source_predicate_target(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Neil Armstrong"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    params = {"source_name": "Neil Armstrong", "target_name": "Apollo 11", "predicate": "COMMANDED"}
    created = await dispatch(engine, "knowledge_assert_relationship", params)
    updated = await dispatch(
        engine,
        "knowledge_assert_relationship",
        {**params, "fact": "Armstrong commanded Apollo 11", "valid_at": "1969-07-16 13:32:00"},
    )
    assert created["created"] is True and updated["created"] is False
    assert updated["edge_uuid"] == created["edge_uuid"]
    edges = await dispatch(
        engine, "knowledge_get_edges_by_uuids", {"uuids": [created["edge_uuid"]]}
    )
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


async def test_an_episode_commit_with_dangling_references_is_refused_and_logs_nothing(
    engine: Engine,
) -> None:
    import uuid

    from lcg import EpisodeCommit, Invalidation, InvalidRequestError
    from lcg.models import Entity, Episode, Fact
    from lcg.timeutil import now

    await dispatch(engine, "knowledge_assert_entity", {"name": "Anchor", "group_id": "g"})
    wal_before = sorted((p.name, p.read_bytes()) for p in engine.parts.wal.root.rglob("*.jsonl"))
    ep = Episode(uuid=str(uuid.uuid4()), group_id="g", name="e", content="text", created_at=now())
    a = Entity(uuid=str(uuid.uuid4()), group_id="g", name="A", created_at=now())
    ghost = str(uuid.uuid4())
    dangling = Fact(
        uuid=str(uuid.uuid4()),
        group_id="g",
        source_uuid=a.uuid,
        target_uuid=ghost,
        name="KNOWS",
        fact="A knows a ghost",
        created_at=now(),
    )
    cases = [
        (EpisodeCommit("g", ep, [a], [dangling], [], [a.uuid]), "facts"),
        (
            EpisodeCommit("g", ep, [a], [], [Invalidation(ghost, now(), now())], [a.uuid]),
            "invalidations",
        ),
        (EpisodeCommit("g", ep, [a], [], [], [ghost]), "facts"),
        (EpisodeCommit("other", ep, [a], [], [], []), "episode"),
        (EpisodeCommit("", ep, [], [], [], []), "group_id"),
    ]
    for commit, field in cases:
        with pytest.raises(InvalidRequestError) as info:
            await engine.commit_episode(commit)
        assert info.value.field == field
    assert (
        sorted((p.name, p.read_bytes()) for p in engine.parts.wal.root.rglob("*.jsonl"))
        == wal_before
    )
    status = await dispatch(engine, "knowledge_status", {})
    assert (status["entity_count"], status["episode_count"]) == (1, 0)


async def test_a_rotation_of_the_wal_file_is_reported(tmp_path: Path) -> None:
    from lcg import Settings, open_engine
    from lcg.telemetry import ListSink

    sink = ListSink()
    engine = open_engine(
        Settings.for_home(tmp_path / ".lcg", wal_max_events_per_file=2), events=sink
    )
    try:
        for name in ("A", "B", "C", "D", "E"):
            await dispatch(engine, "knowledge_assert_entity", {"name": name})
    finally:
        engine.close()
    rotated = sink.of_type("wal_rotated")
    files = sorted(p.name for p in (tmp_path / ".lcg" / "wal" / "liminis").glob("*.jsonl"))
    assert len(files) == 3 and len(rotated) == 2
    assert [e["group_id"] for e in rotated] == ["liminis", "liminis"]
    assert {Path(e["new_file"]).name for e in rotated} == set(files[1:])
