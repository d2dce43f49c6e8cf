"""Publishing a group's WAL stream from one workspace and consuming it in another.

A publisher workspace P writes group "shared"; its stream directory (`<wal>/shared/`, dot-files
included) is copied into a consumer workspace C, which never writes the group itself
(docs/api.md §knowledge_rebuild_from_wal, §status-wal and §wal-generation):

- hydration: opening C on a copied stream replays it, and C's rows equal P's;
- an externally appended stream is caught up at C's next open, and while C is open it shows as
  `wal_ahead` until an incremental `knowledge_rebuild_from_wal` from `applied_seq + 1`; a copy
  caught in the middle of a batch applies only whole batches;
- a generation reset (P's stream deleted and re-created from seq 0) is not auto-replayed by C's
  startup while C holds data; the rebuild detects it (dry run too) and re-derives the group;
- a stream copied without its `.wal-generation.json` is refused by the rebuild once C recorded
  a position for the group (absent, unparseable or blank file alike), until the full directory
  is republished or the file is created by hand; a recorded null generation followed by a known
  one counts as a reset.

Two homes under tmp_path, each opened with `open_engine`; never two engines on one home.
"""

from __future__ import annotations

import json
import logging
import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from rebuild_jobs import rebuild_and_wait
from search_support import indexed

from lcg import (
    Engine,
    Entity,
    Episode,
    EpisodeCommit,
    Fact,
    Settings,
    WalGenerationError,
    open_engine,
)
from lcg.service.registry import Context, dispatch
from lcg.telemetry import ListSink
from lcg.timeutil import now
from lcg.wal.layout import GENERATION_FILE, group_dir, ordered_files
from lcg.wal.reader import parse_line

pytestmark = pytest.mark.anyio

GROUP = "shared"

# The columns test_rebuild_equivalence snapshots.
# fmt: off
ENTITY_COLS = (
    "uuid", "group_id", "name", "labels", "summary", "attributes", "created_at", "merged_into",
)
FACT_COLS = (
    "uuid", "group_id", "source_uuid", "target_uuid", "name", "fact", "relation_type",
    "attributes", "episodes", "valid_at", "invalid_at", "created_at", "expired_at",
)
EPISODE_COLS = (
    "uuid", "group_id", "name", "content", "source",
    "source_description", "source_file", "chunk_id", "created_at", "valid_at",
)
# fmt: on


def _settings(tmp_path: Path, name: str) -> Settings:
    return Settings.for_home(tmp_path / name / ".lcg", kuzu_buffer_pool_mb=64)


def _stream(settings: Settings) -> Path:
    return group_dir(settings.wal_dir, GROUP)


def _publish(publisher: Settings, consumer: Settings, *, replace: bool = False) -> None:
    """Copy P's stream directory (dot-files included) into C's WAL root.

    `replace` deletes C's copy first (a re-published stream); otherwise files are added or
    overwritten in place, as an rsync of an append-only stream would.
    """
    target = _stream(consumer)
    if replace:
        shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(_stream(publisher), target, dirs_exist_ok=True)


def _generation(settings: Settings) -> str:
    value = json.loads((_stream(settings) / GENERATION_FILE).read_text(encoding="utf-8"))
    generation = value["generation"]
    assert isinstance(generation, str) and generation
    return generation


async def _write(engine: Engine, tag: str, people: int) -> None:
    """Entities and a fact through the registry, then an episode with mentions and a fact."""
    names = [f"{tag} person {i}" for i in range(people)]
    for name in names:
        await dispatch(
            engine,
            "knowledge_assert_entity",
            {"name": name, "group_id": GROUP, "summary": f"{tag} summary", "labels": ["Person"]},
        )
    await dispatch(
        engine,
        "knowledge_assert_relationship",
        {
            "source_name": names[0],
            "target_name": names[-1],
            "predicate": "KNOWS",
            "group_id": GROUP,
            "fact": f"{names[0]} knows {names[-1]}",
            "valid_at": "2024-06-11 10:00:00",
        },
    )
    known = await engine.entity_by_name(GROUP, names[0])
    assert known is not None
    episode = Episode(
        uuid=str(uuid.uuid4()),
        group_id=GROUP,
        name=f"{tag} notes",
        content=f"{tag} meeting notes",
        source_description="notes",
        source_file=f"{tag}.md",
        chunk_id=f"{tag}-chunk",
        created_at=now(),
        valid_at=now(),
    )
    place = Entity(
        uuid=str(uuid.uuid4()),
        group_id=GROUP,
        name=f"{tag} place",
        labels=("Place",),
        summary=f"where {tag} met",
        created_at=now(),
    )
    fact = Fact(
        uuid=str(uuid.uuid4()),
        group_id=GROUP,
        source_uuid=known.uuid,
        target_uuid=place.uuid,
        name="VISITED",
        fact=f"{names[0]} visited {tag} place",
        episodes=(episode.uuid,),
        valid_at=now(),
        created_at=now(),
    )
    await engine.commit_episode(
        EpisodeCommit(
            GROUP, episode, entities=[place], facts=[fact], mentions=[known.uuid, place.uuid]
        )
    )


async def _publisher_writes(settings: Settings, tag: str, people: int) -> None:
    engine = open_engine(settings)
    try:
        await _write(engine, tag, people)
    finally:
        engine.close()


def _snapshot(engine: Engine) -> dict[str, list[Any]]:
    """Every row and edge of the graph, as test_rebuild_equivalence snapshots them."""

    def cols(alias: str, names: tuple[str, ...]) -> str:
        return ", ".join(f"{alias}.{c}" for c in names)

    def rows(query: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(r) for r in conn.rows(query))

    with engine.reader() as conn:
        return {
            "episodes": rows(f"MATCH (ep:Episode) RETURN {cols('ep', EPISODE_COLS)}"),
            "entities": rows(f"MATCH (e:Entity) RETURN {cols('e', ENTITY_COLS)}"),
            "facts": rows(f"MATCH (f:Fact) RETURN {cols('f', FACT_COLS)}"),
            "mentions": rows("MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN ep.uuid, e.uuid"),
            "hops_in": rows("MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN a.uuid, f.uuid"),
            "hops_out": rows("MATCH (f:Fact)-[:RELATES_TO]->(b:Entity) RETURN f.uuid, b.uuid"),
            "embeddings": rows(
                "MATCH (v:Embedding) RETURN v.key, v.owner, v.kind, v.group_id, v.text_hash"
            ),
        }


def _publisher_snapshot(settings: Settings) -> dict[str, list[Any]]:
    engine = open_engine(settings)
    try:
        return _snapshot(engine)
    finally:
        engine.close()


def _assert_same(expected: dict[str, list[Any]], actual: dict[str, list[Any]]) -> None:
    assert expected["entities"], "the publisher wrote nothing"
    for key in expected:
        assert actual[key] == expected[key], f"{key} differ"


async def _wal_group(engine: Engine) -> dict[str, Any]:
    status = await dispatch(engine, "knowledge_status", {})
    state: dict[str, Any] = status["wal_groups"][GROUP]
    return state


def _fulltext(engine: Engine, word: str) -> set[str]:
    """Names of the entities whose search-index text (name + summary) holds `word`."""
    hits = indexed(engine, "Entity", word)
    with engine.reader() as conn:
        return {e.name for e in conn.entities_by_uuids(hits).values()}


async def _names(engine: Engine) -> set[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
    return {n["name"] for n in nodes["nodes"]}


async def _sync_rebuild(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    """The streaming (synchronous) form of knowledge_rebuild_from_wal."""
    frames: list[dict[str, Any]] = []
    result = await dispatch(
        engine,
        "knowledge_rebuild_from_wal",
        {"group_id": GROUP, **params},
        Context(progress=frames.append),
    )
    assert frames, "a streaming rebuild emits progress frames"
    return result


async def _hydrated_consumer(tmp_path: Path) -> tuple[Settings, Settings, str]:
    """P writes "alpha" data; C is opened once on a copy of P's stream (and closed)."""
    p, c = _settings(tmp_path, "publisher"), _settings(tmp_path, "consumer")
    await _publisher_writes(p, "alpha", 3)
    _publish(p, c)
    engine = open_engine(c)
    try:
        state = await _wal_group(engine)
        assert state["hydration_status"] == "hydrated", state
    finally:
        engine.close()
    return p, c, _generation(p)


# -- 1. hydration -------------------------------------------------------------------------------


async def test_a_copied_stream_hydrates_the_consumer_at_open(tmp_path: Path) -> None:
    p, c = _settings(tmp_path, "publisher"), _settings(tmp_path, "consumer")
    await _publisher_writes(p, "alpha", 3)
    expected = _publisher_snapshot(p)
    generation = _generation(p)
    _publish(p, c)
    assert (_stream(c) / GENERATION_FILE).is_file()

    events = ListSink()
    engine = open_engine(c, events=events)
    try:
        replays = events.of_type("wal_replay_complete")
        assert [r["group_id"] for r in replays] == [GROUP]
        assert replays[0]["failed_lines"] == replays[0]["unparseable_lines"] == 0
        state = await _wal_group(engine)
        assert state["max_seq"] is not None and state["max_seq"] > 0
        assert state == {
            "applied_seq": state["max_seq"],
            "max_seq": state["max_seq"],
            "generation": generation,
            "generation_status": "known",
            "hydration_status": "hydrated",
        }
        _assert_same(expected, _snapshot(engine))
        # The consumer's generation is the publisher's: it minted none of its own.
        assert _generation(c) == generation
    finally:
        engine.close()

    # A second open has nothing to catch up.
    events = ListSink()
    engine = open_engine(c, events=events)
    try:
        assert events.of_type("wal_replay_complete") == []
        _assert_same(expected, _snapshot(engine))
    finally:
        engine.close()


# -- 2. an externally appended stream -----------------------------------------------------------


async def test_an_appended_stream_is_caught_up_at_open_and_rebuilt_while_open(
    tmp_path: Path,
) -> None:
    p, c, generation = await _hydrated_consumer(tmp_path)

    # Appended while C is closed: C's next open tail-replays the new lines.
    await _publisher_writes(p, "beta", 2)
    _publish(p, c)
    events = ListSink()
    engine = open_engine(c, events=events)
    try:
        replays = events.of_type("wal_replay_complete")
        assert [(r["group_id"], r["replay_mode"]) for r in replays] == [(GROUP, "incremental")]
        state = await _wal_group(engine)
        assert state["applied_seq"] == state["max_seq"]
        assert state["hydration_status"] == "hydrated"
        assert state["generation"] == generation
        _assert_same(_publisher_snapshot(p), _snapshot(engine))

        # Appended while C is open: copied into C's live directory, noticed by status. P stays
        # open too, so its second write grows the file the first one created (a copied file
        # that grew, not only new files).
        before = state
        publisher = open_engine(p)
        try:
            await _write(publisher, "gamma", 2)
            _publish(p, c)
            state = await _wal_group(engine)
            assert state["applied_seq"] == before["applied_seq"]
            assert state["max_seq"] > before["max_seq"]
            assert state["hydration_status"] == "wal_ahead"
            files = sorted(path.name for path in _stream(c).glob("*.jsonl"))
            await _write(publisher, "delta", 2)
            _publish(p, c)
            assert sorted(path.name for path in _stream(c).glob("*.jsonl")) == files
            grown = await _wal_group(engine)
            assert grown["max_seq"] > state["max_seq"]
            assert grown["hydration_status"] == "wal_ahead"
            state = grown
            expected = _snapshot(publisher)
        finally:
            publisher.close()
        assert state["generation"] == generation
        assert "gamma person 0" not in await _names(engine)
        assert await engine.entity_by_name(GROUP, "delta person 1") is None

        # A dry run from applied_seq + 1 counts exactly the new lines.
        tail = {"from_seq": state["applied_seq"] + 1}
        preview = await dispatch(
            engine, "knowledge_rebuild_from_wal", {"group_id": GROUP, "dry_run": True, **tail}
        )
        assert preview["reset_detected"] is False
        assert preview["mutations_replayed"] == state["max_seq"] - state["applied_seq"]

        result = await _sync_rebuild(engine, tail)
        assert result["success"] is True
        assert result["reset_detected"] is False
        assert result["previous_generation"] == result["generation"] == generation
        assert result["from_seq"] == state["applied_seq"] + 1
        assert result["failed_lines"] == result["unparseable_lines"] == 0
        assert result["mutations_replayed"] == state["max_seq"] - state["applied_seq"]
        assert result["last_committed_seq"] == state["max_seq"]
        after = await _wal_group(engine)
        assert after["applied_seq"] == after["max_seq"] == state["max_seq"]
        assert after["hydration_status"] == "hydrated"
        _assert_same(expected, _snapshot(engine))
        # The name index and the full-text indexes know the replayed rows.
        found = await engine.entity_by_name(GROUP, "delta person 1")
        assert found is not None and found.group_id == GROUP
        assert result["indices_built"] is True
        assert _fulltext(engine, "delta") == {"delta person 0", "delta person 1", "delta place"}
    finally:
        engine.close()

    # Nothing is replayed twice at the next open.
    events = ListSink()
    engine = open_engine(c, events=events)
    try:
        assert events.of_type("wal_replay_complete") == []
        _assert_same(expected, _snapshot(engine))
    finally:
        engine.close()


async def test_a_copy_cut_inside_a_batch_applies_only_whole_batches(tmp_path: Path) -> None:
    """A consumer that reads while a copy is in flight sees a batch by halves: it is held back."""
    p, c, _ = await _hydrated_consumer(tmp_path)
    engine = open_engine(c)
    try:
        applied = (await _wal_group(engine))["applied_seq"]
        await _publisher_writes(p, "beta", 2)  # its last batch is the episode, several lines
        _publish(p, c)
        newest = ordered_files(_stream(c))[-1]
        lines = newest.read_bytes().splitlines(keepends=True)
        records = [parse_line(line) for line in lines]
        last = records[-1]
        assert last is not None and last.more == 0
        start = len(lines) - 1
        while (rec := records[start - 1]) is not None and rec.more:
            start -= 1
        cut_at = records[start]
        assert cut_at is not None and cut_at.more >= 2, records  # a batch of 3+ lines
        newest.write_bytes(b"".join(lines[: start + 1]))  # the last batch's first line only

        state = await _wal_group(engine)
        assert state["max_seq"] == cut_at.seq
        assert state["hydration_status"] == "wal_ahead"
        result = await _sync_rebuild(engine, {"from_seq": applied + 1})
        assert result["last_committed_seq"] == cut_at.seq - 1
        assert result["incomplete_batch_lines"] == 1
        assert result["failed_lines"] == 0
        assert "beta place" not in await _names(engine)  # the episode batch is not applied
        state = await _wal_group(engine)
        assert state["applied_seq"] == cut_at.seq - 1
        assert state["hydration_status"] == "wal_ahead"

        _publish(p, c)  # the copy completes
        result = await _sync_rebuild(engine, {"from_seq": state["applied_seq"] + 1})
        assert result["incomplete_batch_lines"] == 0
        assert (await _wal_group(engine))["hydration_status"] == "hydrated"
        _assert_same(_publisher_snapshot(p), _snapshot(engine))
    finally:
        engine.close()


# -- 3. generation reset ------------------------------------------------------------------------


async def _reset_publisher(p: Settings) -> dict[str, list[Any]]:
    """P's workspace is deleted and its stream re-created from seq 0 with other, smaller data."""
    shutil.rmtree(p.home)
    await _publisher_writes(p, "omega", 1)
    return _publisher_snapshot(p)


async def test_a_reset_stream_is_not_auto_replayed_over_data_and_the_rebuild_rederives_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p, c, old_generation = await _hydrated_consumer(tmp_path)
    engine = open_engine(c)
    try:
        old_rows = _snapshot(engine)
        old_state = await _wal_group(engine)
    finally:
        engine.close()

    expected = await _reset_publisher(p)
    new_generation = _generation(p)
    assert new_generation != old_generation
    _publish(p, c, replace=True)

    # Restart: the generation differs and the group holds data → not replayed, a warning.
    events = ListSink()
    with caplog.at_level(logging.WARNING, logger="lcg"):
        engine = open_engine(c, events=events)
    try:
        assert events.of_type("wal_replay_complete") == []
        assert any(
            GROUP in r.getMessage() and "knowledge_rebuild_from_wal" in r.getMessage()
            for r in caplog.records
        ), caplog.text
        assert _snapshot(engine) == old_rows
        state = await _wal_group(engine)
        assert state["generation"] == new_generation
        assert state["generation_status"] == "known"
        assert state["applied_seq"] == old_state["applied_seq"]  # the old stream's position
        assert state["max_seq"] < old_state["applied_seq"]
        # §3.1.4: hydration_status compares numbers only (it cannot see the reset); the
        # changed `generation` is what tells a consumer its position belongs to another stream.
        assert state["hydration_status"] == "hydrated"

        preview = await dispatch(
            engine, "knowledge_rebuild_from_wal", {"group_id": GROUP, "dry_run": True}
        )
        assert preview["success"] is True and preview["dry_run"] is True
        assert preview["reset_detected"] is True
        assert preview["previous_generation"] == old_generation
        assert preview["generation"] == new_generation
        assert preview["message"]
        assert _snapshot(engine) == old_rows  # a dry run changes nothing

        # The tail the consumer would ask for is overridden: a reset means a full re-derive,
        # without force_clear.
        result = await _sync_rebuild(engine, {"from_seq": old_state["applied_seq"] + 1})
        assert result["success"] is True and result["dry_run"] is False
        assert result["reset_detected"] is True
        assert result["previous_generation"] == old_generation
        assert result["generation"] == new_generation
        assert result["from_seq"] == 0 and result["to_seq"] is None
        assert result["failed_lines"] == result["unparseable_lines"] == 0
        names = await _names(engine)
        assert "omega person 0" in names and "omega place" in names
        assert not any(n.startswith("alpha") for n in names)
        assert await engine.entity_by_name(GROUP, "alpha person 0") is None
        assert await engine.entity_by_name(GROUP, "omega person 0") is not None
        assert _fulltext(engine, "alpha") == set()
        assert _fulltext(engine, "omega") == {"omega person 0", "omega place"}
        _assert_same(expected, _snapshot(engine))
        state = await _wal_group(engine)
        assert state["applied_seq"] == state["max_seq"] == result["last_committed_seq"]
        assert state["generation"] == new_generation
        assert state["hydration_status"] == "hydrated"

        # A second dry run sees no reset any more.
        again = await dispatch(
            engine,
            "knowledge_rebuild_from_wal",
            {"group_id": GROUP, "dry_run": True, "from_seq": state["applied_seq"] + 1},
        )
        assert again["reset_detected"] is False
    finally:
        engine.close()

    events = ListSink()
    engine = open_engine(c, events=events)
    try:
        assert events.of_type("wal_replay_complete") == []
        _assert_same(expected, _snapshot(engine))
    finally:
        engine.close()


async def test_a_reset_stream_copied_into_an_open_consumer_is_rederived_by_a_background_rebuild(
    tmp_path: Path,
) -> None:
    p, c, old_generation = await _hydrated_consumer(tmp_path)
    engine = open_engine(c)
    try:
        expected = await _reset_publisher(p)
        new_generation = _generation(p)
        _publish(p, c, replace=True)
        state = await _wal_group(engine)
        assert state["generation"] == new_generation

        preview = await dispatch(
            engine, "knowledge_rebuild_from_wal", {"group_id": GROUP, "dry_run": True}
        )
        assert preview["reset_detected"] is True
        assert (preview["previous_generation"], preview["generation"]) == (
            old_generation,
            new_generation,
        )

        result = await rebuild_and_wait(engine, {"group_id": GROUP})
        assert result["reset_detected"] is True
        assert result["previous_generation"] == old_generation
        assert result["generation"] == new_generation
        _assert_same(expected, _snapshot(engine))
        assert (await _wal_group(engine))["hydration_status"] == "hydrated"
    finally:
        engine.close()


# -- 4. unknown generation ----------------------------------------------------------------------


def _assert_generation_refusal(info: pytest.ExceptionInfo[WalGenerationError], c: Settings) -> None:
    message = info.value.wire_message()
    assert message.startswith("WAL stream generation unknown: "), message
    assert f'group "{GROUP}"' in message
    assert f"{_stream(c)}/{GENERATION_FILE}" in message
    assert "republish the full WAL directory including its dot-files" in message
    assert '{"generation": "<any unique string>"}' in message


async def test_a_stream_without_its_generation_file_is_refused_once_a_position_is_recorded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    p, c, generation = await _hydrated_consumer(tmp_path)
    await _publisher_writes(p, "beta", 2)
    shutil.rmtree(_stream(c))
    _stream(c).mkdir()
    for path in _stream(p).glob("*.jsonl"):
        shutil.copy2(path, _stream(c) / path.name)
    assert not (_stream(c) / GENERATION_FILE).exists()

    events = ListSink()
    with caplog.at_level(logging.WARNING, logger="lcg"):
        engine = open_engine(c, events=events)
    try:
        # Startup does not replay a stream of unknown identity over recorded data...
        assert events.of_type("wal_replay_complete") == []
        assert "beta person 0" not in await _names(engine)
        state = await _wal_group(engine)
        assert state["generation"] is None
        assert state["generation_status"] == "unknown"
        assert state["hydration_status"] == "wal_ahead"
        # ...and mints no generation for a populated directory.
        assert not (_stream(c) / GENERATION_FILE).exists()
        rows = _snapshot(engine)

        tail = {"group_id": GROUP, "from_seq": state["applied_seq"] + 1}
        for params, ctx in (
            ({**tail, "dry_run": True}, None),
            ({"group_id": GROUP, "dry_run": True}, None),
            (tail, Context(progress=lambda frame: None)),
            ({"group_id": GROUP, "force_clear": True}, Context(progress=lambda frame: None)),
            (tail, None),  # the background form refuses before a job exists
        ):
            with pytest.raises(WalGenerationError) as info:
                await dispatch(engine, "knowledge_rebuild_from_wal", params, ctx)
            _assert_generation_refusal(info, c)
        assert _snapshot(engine) == rows

        # An unparseable or blank generation file is as unknown as an absent one (§5.3).
        for broken in ('{"generation": ', '{"generation": "  "}', '["x"]', ""):
            (_stream(c) / GENERATION_FILE).write_text(broken, encoding="utf-8")
            assert (await _wal_group(engine))["generation_status"] == "unknown"
            with pytest.raises(WalGenerationError) as info:
                await dispatch(engine, "knowledge_rebuild_from_wal", {**tail, "dry_run": True})
            _assert_generation_refusal(info, c)

        # The second remedy: hand-create the file. Its value differs from the recorded one,
        # so the next rebuild is a reset: purge and full replay.
        (_stream(c) / GENERATION_FILE).write_text('{"generation": "hand-made"}', encoding="utf-8")
        preview = await dispatch(engine, "knowledge_rebuild_from_wal", {**tail, "dry_run": True})
        assert preview["reset_detected"] is True
        assert (preview["previous_generation"], preview["generation"]) == (generation, "hand-made")
        result = await _sync_rebuild(engine, {})
        assert result["reset_detected"] is True
        assert result["failed_lines"] == 0
        _assert_same(_publisher_snapshot(p), _snapshot(engine))
        state = await _wal_group(engine)
        assert state["generation"] == "hand-made"
        assert state["hydration_status"] == "hydrated"
    finally:
        engine.close()


async def test_republishing_the_full_directory_lifts_the_refusal(tmp_path: Path) -> None:
    """The first remedy: copy the stream again with its dot-files; same generation, no reset."""
    p, c, generation = await _hydrated_consumer(tmp_path)
    await _publisher_writes(p, "beta", 2)
    (_stream(c) / GENERATION_FILE).unlink()
    engine = open_engine(c)
    try:
        state = await _wal_group(engine)
        with pytest.raises(WalGenerationError) as info:
            await dispatch(
                engine,
                "knowledge_rebuild_from_wal",
                {"group_id": GROUP, "dry_run": True, "from_seq": state["applied_seq"] + 1},
            )
        _assert_generation_refusal(info, c)
        _publish(p, c)
        assert _generation(c) == generation
        result = await _sync_rebuild(engine, {"from_seq": state["applied_seq"] + 1})
        assert result["reset_detected"] is False
        assert result["generation"] == generation
        _assert_same(_publisher_snapshot(p), _snapshot(engine))
    finally:
        engine.close()


async def test_a_null_recorded_generation_then_a_known_one_counts_as_a_reset(
    tmp_path: Path,
) -> None:
    """A fresh consumer hydrated from a stream without its generation file records a null
    generation; once the file arrives, the stream counts as reset (§2.34 step 7)."""
    p, c = _settings(tmp_path, "publisher"), _settings(tmp_path, "consumer")
    await _publisher_writes(p, "alpha", 2)
    _stream(c).mkdir(parents=True)
    for path in _stream(p).glob("*.jsonl"):
        shutil.copy2(path, _stream(c) / path.name)
    engine = open_engine(c)
    try:
        # No position was recorded before: startup hydrates it, generation unknown.
        state = await _wal_group(engine)
        assert state["applied_seq"] == state["max_seq"]
        assert (state["generation"], state["generation_status"]) == (None, "unknown")
        _assert_same(_publisher_snapshot(p), _snapshot(engine))
        # With a recorded position, an unknown generation is refused from now on.
        with pytest.raises(WalGenerationError):
            await dispatch(
                engine, "knowledge_rebuild_from_wal", {"group_id": GROUP, "dry_run": True}
            )

        _publish(p, c)  # the full directory, with its generation file
        generation = _generation(p)
        preview = await dispatch(
            engine, "knowledge_rebuild_from_wal", {"group_id": GROUP, "dry_run": True}
        )
        assert preview["reset_detected"] is True
        assert (preview["previous_generation"], preview["generation"]) == (None, generation)
        result = await _sync_rebuild(engine, {"from_seq": state["applied_seq"] + 1})
        assert result["reset_detected"] is True and result["from_seq"] == 0
        assert (result["previous_generation"], result["generation"]) == (None, generation)
        _assert_same(_publisher_snapshot(p), _snapshot(engine))
        state = await _wal_group(engine)
        assert (state["generation"], state["hydration_status"]) == (generation, "hydrated")
    finally:
        engine.close()
