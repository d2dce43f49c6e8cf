"""WAL administration end to end: marks, bounded restore, prepare_checkpoint and dump_wal.

Every call goes through the registry (`dispatch`), as a transport would make it.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lcg import (
    Engine,
    Entity,
    Episode,
    EpisodeCommit,
    Fact,
    InvalidRequestError,
    LcgError,
    Settings,
    UnavailableError,
    open_engine,
)
from lcg.engine import Batch, Invalidation
from lcg.engine.recovery import degraded_engine
from lcg.service.registry import REGISTRY, Context, dispatch
from lcg.timeutil import now
from lcg.wal.layout import GENERATION_FILE, group_dir, ordered_files, read_generation
from lcg.wal.marks import CheckpointExistsError, CheckpointNameError, CheckpointNotFoundError
from lcg.wal.records import Op

pytestmark = pytest.mark.anyio

GROUPS = ("liminis", "team/ops")
EP1 = "22222222-2222-4222-8222-222222222222"
EP2 = "22222222-2222-4222-8222-333333333333"
COLLINS = "11111111-1111-4111-8111-111111111111"
OLD_FACT = "55555555-5555-4555-8555-555555555555"
NEW_FACT = "55555555-5555-4555-8555-666666666666"

SNAPSHOT = {
    "entities": "MATCH (e:Entity) WHERE e.group_id = $g RETURN e.uuid, e.group_id, e.name, "
    "e.labels, e.summary, e.attributes, e.created_at, e.merged_into ORDER BY e.uuid",
    "facts": "MATCH (f:Fact) WHERE f.group_id = $g RETURN f.uuid, f.group_id, f.source_uuid, "
    "f.target_uuid, f.name, f.fact, f.relation_type, f.attributes, f.episodes, f.valid_at, "
    "f.invalid_at, f.created_at, f.expired_at ORDER BY f.uuid",
    "episodes": "MATCH (ep:Episode) WHERE ep.group_id = $g RETURN ep.uuid, ep.group_id, ep.name, "
    "ep.content, ep.source, ep.source_description, ep.source_file, ep.chunk_id, ep.created_at, "
    "ep.valid_at ORDER BY ep.uuid",
    "mentions": "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) WHERE ep.group_id = $g "
    "RETURN ep.uuid, e.uuid ORDER BY ep.uuid, e.uuid",
    "hops": "MATCH (a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity) "
    "WHERE f.group_id = $g RETURN a.uuid, f.uuid, b.uuid ORDER BY f.uuid",
}


def snapshot(engine: Engine, group: str) -> dict[str, list[list[Any]]]:
    with engine.reader() as conn:
        return {name: conn.rows(query, {"g": group}) for name, query in SNAPSHOT.items()}


async def populate(engine: Engine) -> None:
    await dispatch(
        engine,
        "knowledge_assert_entity",
        {
            "name": "Neil Armstrong",
            "labels": ["Person"],
            "summary": "First person on the Moon",
            "attributes": {"role": "commander", "nested": {"a": 1}},
        },
    )
    apollo = await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    await dispatch(
        engine,
        "knowledge_assert_relationship",
        {
            "source_name": "Neil Armstrong",
            "target_name": "Apollo 11",
            "predicate": "COMMANDED",
            "valid_at": "1969-07-16T13:32:00Z",
            "relation_type": "COMMANDS",
        },
    )
    stamp = now()
    await engine.commit_episode(
        EpisodeCommit(
            group_id="liminis",
            episode=Episode(
                EP1,
                "liminis",
                "chunk-1",
                "Michael Collins flew the command module.",
                source_description="notes/moon.md:1",
                source_file="notes/moon.md",
                chunk_id="chunk-1",
                created_at=stamp,
                valid_at=stamp,
            ),
            entities=[Entity(COLLINS, "liminis", "Michael Collins", created_at=stamp)],
            facts=[
                Fact(
                    OLD_FACT,
                    "liminis",
                    COLLINS,
                    apollo["entity_uuid"],
                    "FLEW",
                    "Collins flew Apollo 11",
                    episodes=(EP1,),
                    valid_at=stamp - timedelta(days=3),
                    created_at=stamp,
                )
            ],
            mentions=[COLLINS, apollo["entity_uuid"]],
        )
    )
    later = now()
    await engine.commit_episode(
        EpisodeCommit(
            group_id="liminis",
            episode=Episode(EP2, "liminis", "chunk-2", "Collins piloted it.", created_at=later),
            facts=[
                Fact(
                    NEW_FACT,
                    "liminis",
                    COLLINS,
                    apollo["entity_uuid"],
                    "PILOTED",
                    "Collins piloted Apollo 11's command module",
                    episodes=(EP2,),
                    created_at=later,
                )
            ],
            invalidations=[Invalidation(OLD_FACT, later, later)],
            mentions=[COLLINS],
        )
    )
    await dispatch(engine, "knowledge_assert_entity", {"name": "Ops Lead", "group_id": "team/ops"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Ops Desk", "group_id": "team/ops"})
    await dispatch(
        engine,
        "knowledge_assert_relationship",
        {
            "source_name": "Ops Lead",
            "target_name": "Ops Desk",
            "predicate": "STAFFS",
            "group_id": "team/ops",
        },
    )
    await dispatch(
        engine,
        "knowledge_query_cypher",
        {"query": "MATCH (e:Entity {name: 'Apollo 11'}) SET e.summary = 'Lunar landing'"},
    )


def other_settings(tmp_path: Path, name: str) -> Settings:
    return Settings.for_home(tmp_path / name / ".lcg", kuzu_buffer_pool_mb=128)


@pytest.fixture
def second_home(tmp_path: Path) -> Iterator[Settings]:
    yield other_settings(tmp_path, "second")


async def rebuild_sync(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    """A rebuild answered synchronously (a progress sink selects the streaming form)."""
    frames: list[dict[str, Any]] = []
    return await dispatch(
        engine, "knowledge_rebuild_from_wal", params, Context(progress=frames.append)
    )


# -- registry declarations ---------------------------------------------------------------------


def test_declarations_scopes_and_degraded_exemptions() -> None:
    expected = {
        "knowledge_dump_wal": False,
        "knowledge_prepare_checkpoint": False,
        "knowledge_wal_mark_create": False,
        "knowledge_wal_mark_list": True,
        "knowledge_wal_mark_delete": True,
    }
    for name, exempt in expected.items():
        assert REGISTRY[name].scope == "admin"
        assert REGISTRY[name].degraded_ok is exempt, name


async def test_degraded_engine_lists_and_deletes_marks_but_refuses_the_rest(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "A"})
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "keep"})
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "drop"})
    finally:
        engine.close()
    degraded = degraded_engine(settings, "lbug_wal_corrupt")  # as when the database won't open
    try:
        listed = await dispatch(degraded, "knowledge_wal_mark_list", {})
        assert [c["name"] for c in listed["checkpoints"]] == ["drop", "keep"]
        assert await dispatch(degraded, "knowledge_wal_mark_delete", {"name": "drop"}) == {
            "success": True,
            "name": "drop",
            "group_id": "liminis",
        }
        for method, params in [
            ("knowledge_wal_mark_create", {"name": "new"}),
            ("knowledge_prepare_checkpoint", {}),
            ("knowledge_dump_wal", {}),
        ]:
            with pytest.raises(UnavailableError) as info:
                await dispatch(degraded, method, params)
            assert info.value.reason == "lbug_wal_corrupt"
    finally:
        degraded.close()
    engine = open_engine(settings)
    try:
        listed = await dispatch(engine, "knowledge_wal_mark_list", {"group_id": ""})
        assert [c["name"] for c in listed["checkpoints"]] == ["keep"]
    finally:
        engine.close()


# -- marks -------------------------------------------------------------------------------------


async def test_mark_create_list_delete_recreate(engine: Engine) -> None:
    await populate(engine)
    status = await dispatch(engine, "knowledge_status", {})
    applied = status["wal"]["applied_seq"]
    generation = status["wal"]["generation"]
    made = await dispatch(engine, "knowledge_wal_mark_create", {"name": "v1", "group_id": ""})
    assert made == {
        "success": True,
        "name": "v1",
        "group_id": "liminis",
        "seq": applied,
        "generation": generation,
    }
    with pytest.raises(CheckpointExistsError) as dup:
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "v1"})
    assert dup.value.wire_message() == 'checkpoint "v1" already exists'

    # An empty group is marked with seq null ("nothing applied"); its directory is created.
    empty = await dispatch(engine, "knowledge_wal_mark_create", {"name": "v1", "group_id": "new"})
    assert empty["seq"] is None and empty["generation"] is not None
    assert (group_dir(engine.settings.wal_dir, "new") / ".checkpoints" / "v1").is_dir()

    await dispatch(engine, "knowledge_assert_entity", {"name": "Later"})
    listed = await dispatch(engine, "knowledge_wal_mark_list", {})
    assert listed["group_id"] == "liminis" and "count" not in listed
    (entry,) = listed["checkpoints"]
    assert entry == {
        "name": "v1",
        "seq": applied,
        "reachable": True,
        "wal_min_seq": 0,
        "wal_max_seq": applied + 1,
        "generation": generation,
    }
    await dispatch(engine, "knowledge_wal_mark_delete", {"name": "v1"})
    assert (await dispatch(engine, "knowledge_wal_mark_list", {}))["checkpoints"] == []
    with pytest.raises(CheckpointNotFoundError):
        await dispatch(engine, "knowledge_wal_mark_delete", {"name": "v1"})
    again = await dispatch(engine, "knowledge_wal_mark_create", {"name": "v1"})
    assert again["seq"] == applied + 1
    mark_dir = group_dir(engine.settings.wal_dir, "liminis") / ".checkpoints" / "v1"
    assert sorted(p.name for p in mark_dir.iterdir()) == [
        "g1.create.json",
        "g1.delete.json",
        "g2.create.json",
    ]
    # Marks of one group are invisible from another.
    other = await dispatch(engine, "knowledge_wal_mark_list", {"group_id": "team/ops"})
    assert other == {"group_id": "team/ops", "checkpoints": []}


@pytest.mark.parametrize(
    ("params", "error", "text"),
    [
        ({}, InvalidRequestError, "name is required and must be a non-empty string"),
        ({"name": ""}, InvalidRequestError, "name is required and must be a non-empty string"),
        ({"name": 5}, InvalidRequestError, "name is required and must be a non-empty string"),
        (
            {"name": "bad name"},
            CheckpointNameError,
            'invalid checkpoint name "bad name": must be 1-200 chars of [A-Za-z0-9_-]',
        ),
        ({"name": "ok", "group_id": 3}, InvalidRequestError, "group_id must be a string"),
        ({"name": "ok", "group_id": "/" * 67}, InvalidRequestError, "invalid group_id"),
    ],
)
async def test_mark_create_refusals(
    engine: Engine, params: dict[str, Any], error: type[LcgError], text: str
) -> None:
    with pytest.raises(error) as info:
        await dispatch(engine, "knowledge_wal_mark_create", params)
    assert text in info.value.message
    assert not list(engine.settings.wal_dir.rglob(".checkpoints"))


async def test_bounded_restore_reproduces_the_graph_at_the_mark(engine: Engine) -> None:
    await populate(engine)
    at_mark = {g: snapshot(engine, g) for g in GROUPS}
    mark = await dispatch(engine, "knowledge_wal_mark_create", {"name": "before-cleanup"})

    # Destructive changes after the mark: episodes deleted, an entity renamed, one added.
    await dispatch(engine, "knowledge_delete_episode", {"episode_uuid": EP1})
    await dispatch(engine, "knowledge_delete_episode", {"episode_uuid": EP2})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Buzz", "entity_uuid": COLLINS})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Stray"})
    assert snapshot(engine, "liminis") != at_mark["liminis"]

    (entry,) = (await dispatch(engine, "knowledge_wal_mark_list", {}))["checkpoints"]
    assert entry["reachable"] is True
    result = await rebuild_sync(engine, {"from_seq": 0, "to_seq": mark["seq"], "force_clear": True})
    assert result["last_committed_seq"] == mark["seq"]
    assert result["failed_lines"] == 0
    assert {g: snapshot(engine, g) for g in GROUPS} == at_mark
    # The graph is usable afterwards: names resolve to the restored rows.
    restored = await engine.entity_by_name("liminis", "Michael Collins")
    assert restored is not None and restored.uuid == COLLINS


async def test_mark_becomes_unreachable_when_the_stream_is_replaced(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "A"})
    await dispatch(engine, "knowledge_wal_mark_create", {"name": "m"})
    directory = group_dir(engine.settings.wal_dir, "liminis")
    (directory / GENERATION_FILE).write_text(json.dumps({"generation": "republished"}))
    (entry,) = (await dispatch(engine, "knowledge_wal_mark_list", {}))["checkpoints"]
    assert entry["reachable"] is False
    assert entry["generation"] != "republished"
    # The applied position belongs to the old stream: a new mark would name the wrong lines.
    with pytest.raises(InvalidRequestError, match="another WAL stream generation"):
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "m2"})
    await rebuild_sync(engine, {"force_clear": True})
    made = await dispatch(engine, "knowledge_wal_mark_create", {"name": "m2"})
    assert made["generation"] == "republished" and made["seq"] == 0


# -- prepare_checkpoint --------------------------------------------------------------------------


async def test_prepare_checkpoint_ends_open_files(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "A"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "B", "group_id": "other"})
    result = await dispatch(engine, "knowledge_prepare_checkpoint", {})
    assert result == {
        "success": True,
        "files_flushed": 2,
        "files_total": 2,
        "database_checkpointed": True,
    }
    again = await dispatch(engine, "knowledge_prepare_checkpoint", {})
    assert again["files_flushed"] == 0 and again["files_total"] == 2
    await dispatch(engine, "knowledge_assert_entity", {"name": "C"})
    # The next write of a group starts a new file.
    assert len(ordered_files(group_dir(engine.settings.wal_dir, "liminis"))) == 2


# -- dump_wal ------------------------------------------------------------------------------------


async def test_dump_of_one_group_replays_to_the_same_rows(
    engine: Engine, second_home: Settings, tmp_path: Path
) -> None:
    await populate(engine)
    # History the dump compacts away: an overwritten entity and a deleted episode.
    await dispatch(engine, "knowledge_assert_entity", {"name": "Temp"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Temp", "summary": "changed"})
    expected = snapshot(engine, "liminis")
    live_wal = {p: p.read_bytes() for p in engine.settings.wal_dir.rglob("*.jsonl")}

    target = engine.settings.exports / "dump-liminis"
    result = await dispatch(
        engine, "knowledge_dump_wal", {"group_id": "liminis", "target_dir": str(target)}
    )
    counts = {k: len(v) for k, v in expected.items()}
    assert result["success"] is True and result["target_dir"] == str(target)
    assert result["nodes_dumped"] == counts["entities"] + counts["facts"] + counts["episodes"]
    assert result["edges_dumped"] == 2 * counts["hops"] + counts["mentions"]
    assert result["files_written"] == len(list(target.glob("*.jsonl"))) == 1
    assert read_generation(target) not in (
        None,
        read_generation(group_dir(engine.settings.wal_dir, "liminis")),
    )
    assert not (target / ".checkpoints").exists()
    lines = [json.loads(x) for f in ordered_files(target) for x in f.read_text().splitlines()]
    assert [r["seq"] for r in lines] == list(range(len(lines)))
    assert {r["op"] for r in lines} == {
        "entity.upsert",
        "fact.upsert",
        "episode.add",
        "mentions.add",
    }
    assert {p: p.read_bytes() for p in engine.settings.wal_dir.rglob("*.jsonl")} == live_wal

    with pytest.raises(InvalidRequestError) as info:
        await dispatch(
            engine, "knowledge_dump_wal", {"group_id": "liminis", "target_dir": str(target)}
        )
    assert "already exists and is not empty" in info.value.message

    inside = engine.settings.wal_dir / "elsewhere"
    with pytest.raises(InvalidRequestError, match="overlaps the live WAL directory"):
        await dispatch(
            engine, "knowledge_dump_wal", {"group_id": "liminis", "target_dir": str(inside)}
        )
    assert not inside.exists()

    shutil.copytree(target, second_home.wal_dir / "liminis")
    other = open_engine(second_home)
    try:
        assert snapshot(other, "liminis") == expected
        assert snapshot(other, "team/ops") == {k: [] for k in SNAPSHOT}
    finally:
        other.close()


async def test_dump_of_all_groups_is_a_wal_root(
    engine: Engine, second_home: Settings, tmp_path: Path
) -> None:
    await populate(engine)
    expected = {g: snapshot(engine, g) for g in GROUPS}
    result = await dispatch(engine, "knowledge_dump_wal", {})
    target = engine.settings.db_path.parent.parent / "wal-compacted"
    assert result["target_dir"] == str(target)
    assert sorted(result["groups"]) == sorted(GROUPS)
    assert sorted(p.name for p in target.iterdir()) == ["liminis", "team%2Fops"]
    assert result["files_written"] == 2
    shutil.copytree(target, second_home.wal_dir)
    other = open_engine(second_home)
    try:
        assert {g: snapshot(other, g) for g in GROUPS} == expected
    finally:
        other.close()


async def test_dump_pages_and_rotates(engine: Engine, tmp_path: Path) -> None:
    # 1200 entities: three pages, each page one batch (one fsync), batches never split.
    ops = [
        Op("entity.upsert", {"uuid": f"00000000-0000-4000-8000-{i:012d}", "name": f"E{i}"})
        for i in range(1200)
    ]
    await engine.write(lambda conn: (None, [Batch("bulk", ops)]))
    target = engine.settings.exports / "bulk-dump"
    result = await dispatch(
        engine, "knowledge_dump_wal", {"group_id": "bulk", "target_dir": str(target)}
    )
    assert result["nodes_dumped"] == 1200 and result["lines_written"] == 1200
    lines = [json.loads(x) for f in ordered_files(target) for x in f.read_text().splitlines()]
    batch_starts = [r["seq"] for r in lines if r.get("more") == 499]
    assert batch_starts == [0, 500]
    assert lines[-1]["seq"] == 1199 and "more" not in lines[-1]
