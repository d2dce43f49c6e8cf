"""What a crash leaves in the WAL, and how opening (or rebuilding) a workspace deals with it.

- a torn final line is cut, reported, and writing resumes at the next seq;
- an unparseable line in the middle of a stream is skipped and counted by a rebuild;
- WAL lines that were appended but never committed to the database (a crash between the
  fsync and the COMMIT) are applied by startup catch-up.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from rebuild_jobs import rebuild_and_wait
from search_support import indexed

from lcg import Engine, Entity, Episode, Fact, Settings, open_engine
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.timeutil import now
from lcg.wal.layout import group_dir, ordered_files
from lcg.wal.reader import parse_line
from lcg.wal.records import Op, encode_batch, entity_op, episode_op, fact_op

pytestmark = pytest.mark.anyio

GROUP = "torn"


def _wal_files(settings: Settings, group_id: str) -> list[Path]:
    return ordered_files(group_dir(settings.wal_dir, group_id))


def _seqs(settings: Settings, group_id: str) -> list[int]:
    """The seq of every readable line of a group's stream, in file order."""
    records = (
        parse_line(line)
        for path in _wal_files(settings, group_id)
        for line in path.read_bytes().splitlines()
    )
    return [rec.seq for rec in records if rec is not None]


async def _names(engine: Engine, group_id: str) -> set[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [group_id]})
    return {n["name"] for n in nodes["nodes"]}


async def _wal_group(engine: Engine, group_id: str) -> dict[str, Any]:
    status = await dispatch(engine, "knowledge_status", {})
    state: dict[str, Any] = status["wal_groups"][group_id]
    return state


def _fulltext(engine: Engine, word: str) -> set[str]:
    """Names of the entities whose search-index text (name + summary) holds `word`."""
    hits = indexed(engine, "Entity", word)
    with engine.reader() as conn:
        return {e.name for e in conn.entities_by_uuids(hits).values()}


async def test_torn_final_line_is_cut_reported_and_writing_resumes(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        for name in ("Ada", "Grace", "Linus"):
            await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": GROUP})
    finally:
        engine.close()
    last = _wal_files(settings, GROUP)[-1]
    intact = last.read_bytes()
    torn = b'{"seq":3,"ts":"2024-06-11T10:00:00.000000+00:00","op":"entity.upsert","data":{"uu'
    with last.open("ab") as fh:
        fh.write(torn)

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        assert sink.of_type("wal_torn_tail") == [
            {
                "type": "wal_torn_tail",
                "group_id": GROUP,
                "path": str(last),
                "bytes_dropped": len(torn),
                "lines": 1,
            }
        ]
        assert last.read_bytes() == intact
        assert sink.of_type("wal_replay_complete") == []  # nothing beyond what was applied
        assert await _names(engine, GROUP) == {"Ada", "Grace", "Linus"}
        state = await _wal_group(engine, GROUP)
        assert (state["applied_seq"], state["max_seq"], state["hydration_status"]) == (
            2,
            2,
            "hydrated",
        )
        torn_problem = {
            "group_id": GROUP,
            "kind": "torn_tail",
            "file": last.name,
            "first_seq": 3,
            "last_seq": None,
            "bytes_dropped": len(torn),
            "lines": 1,
        }
        # In knowledge_status too, not only in telemetry.
        assert (await dispatch(engine, "knowledge_status", {}))["wal_problems"] == [torn_problem]

        await dispatch(engine, "knowledge_assert_entity", {"name": "Barbara", "group_id": GROUP})
        assert _seqs(settings, GROUP) == [0, 1, 2, 3]
        state = await _wal_group(engine, GROUP)
        assert (state["applied_seq"], state["max_seq"]) == (3, 3)
    finally:
        engine.close()

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        assert sink.of_type("wal_torn_tail") == []
        assert await _names(engine, GROUP) == {"Ada", "Grace", "Linus", "Barbara"}
        # Kept across restarts, like the other WAL problems.
        assert (await dispatch(engine, "knowledge_status", {}))["wal_problems"] == [torn_problem]
        assert _fulltext(engine, "barbara") == {"Barbara"}
    finally:
        engine.close()


async def test_corrupt_line_mid_stream_is_counted_by_a_rebuild(tmp_path: Path) -> None:
    # Three lines per file, so the stream spans two files and the damage sits inside the first.
    settings = Settings.for_home(
        tmp_path / ".lcg", kuzu_buffer_pool_mb=256, wal_max_events_per_file=3
    )
    names = ["Mercury", "Venus", "Earth", "Mars", "Jupiter"]
    engine = open_engine(settings)
    try:
        for name in names:
            await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": GROUP})
    finally:
        engine.close()
    files = _wal_files(settings, GROUP)
    assert len(files) == 2
    lines = files[0].read_bytes().splitlines(keepends=True)
    assert [json.loads(line)["data"]["name"] for line in lines] == names[:3]
    lines[1] = b'{"seq":1,"ts":"2024-06-11T10:00:00.0000\x00\xff garbage from a bad disk\n'
    files[0].write_bytes(b"".join(lines))

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        assert sink.of_type("wal_torn_tail") == []  # only a final line is a torn write
        assert await _names(engine, GROUP) == set(names)  # the database still has everything
        result = await rebuild_and_wait(engine, {"group_id": GROUP, "force_clear": True})
        assert result["success"] is True
        assert result["replay_mode"] == "bulk"
        assert result["wal_files_processed"] == 2
        assert result["mutations_replayed"] == 4
        assert result["unparseable_lines"] == 1
        assert result["lines_skipped"] == 1
        assert (
            result["failed_lines"],
            result["unrecognised_lines"],
            result["noop_lines"],
            result["torn_tail_lines"],
        ) == (0, 0, 0, 0)
        assert result["last_committed_seq"] == 4
        assert result["fidelity_warning"] == (
            "1 of 5 WAL lines (20.0%) had no effect (failed 0, no-op 0, unrecognised 0, "
            "unparseable 1); the rebuilt graph may differ from the original"
        )
        events = sink.of_type("wal_replay_complete")
        assert len(events) == 1
        assert events[0]["unparseable_lines"] == 1 and events[0]["mutations_replayed"] == 4
        # The line that could not be read is gone; everything around it was replayed.
        assert await _names(engine, GROUP) == set(names) - {"Venus"}
        assert _fulltext(engine, "venus") == set()
        assert _fulltext(engine, "mars") == {"Mars"}
        state = await _wal_group(engine, GROUP)
        assert (state["applied_seq"], state["max_seq"]) == (4, 4)
        await dispatch(engine, "knowledge_assert_entity", {"name": "Saturn", "group_id": GROUP})
        assert _seqs(settings, GROUP) == [0, 2, 3, 4, 5]
    finally:
        engine.close()


async def test_wal_lines_never_committed_are_applied_at_startup(settings: Settings) -> None:
    """A crash after the WAL fsync and before the COMMIT: the next open applies the lines."""
    engine = open_engine(settings)
    stamp = now()
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Anchor", "group_id": GROUP})
        # An assert_entity's line, written to the WAL only.
        ghost = Entity(
            uuid=str(uuid.uuid4()),
            group_id=GROUP,
            name="Ghost Writer",
            summary="only in the log",
            created_at=stamp,
        )
        assert engine.parts.wal.append(GROUP, [entity_op(ghost)]) == (1, 1)
        # And a whole episode batch, as commit_episode would log it.
        ep = Episode(
            uuid=str(uuid.uuid4()),
            group_id=GROUP,
            name="ep",
            content="a lost episode",
            created_at=stamp,
        )
        a = Entity(uuid=str(uuid.uuid4()), group_id=GROUP, name="Phantom One", created_at=stamp)
        b = Entity(uuid=str(uuid.uuid4()), group_id=GROUP, name="Phantom Two", created_at=stamp)
        fact = Fact(
            uuid=str(uuid.uuid4()),
            group_id=GROUP,
            source_uuid=a.uuid,
            target_uuid=b.uuid,
            name="HAUNTS",
            fact="Phantom One haunts Phantom Two",
            episodes=(ep.uuid,),
            created_at=stamp,
        )
        batch = [
            entity_op(a),
            entity_op(b),
            fact_op(fact),
            episode_op(ep),
            Op("mentions.add", {"episode": ep.uuid, "entities": [a.uuid, b.uuid]}),
        ]
        assert engine.parts.wal.append(GROUP, batch) == (2, 6)
        # A group whose very first write never reached the database.
        lonely = Entity(uuid=str(uuid.uuid4()), group_id="fresh", name="Lonely", created_at=stamp)
        assert engine.parts.wal.append("fresh", [entity_op(lonely)]) == (0, 0)

        state = await _wal_group(engine, GROUP)
        assert (state["applied_seq"], state["max_seq"], state["hydration_status"]) == (
            0,
            6,
            "wal_ahead",
        )
        assert await _names(engine, GROUP) == {"Anchor"}
    finally:
        engine.close()

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        replays = {e["group_id"]: e for e in sink.of_type("wal_replay_complete")}
        assert set(replays) == {GROUP, "fresh"}
        assert (
            replays[GROUP]["from_seq"],
            replays[GROUP]["mutations_replayed"],
            replays[GROUP]["last_committed_seq"],
            replays[GROUP]["failed_lines"],
            replays[GROUP]["fidelity_warning"],
        ) == (1, 6, 6, 0, None)
        assert (replays["fresh"]["replay_mode"], replays["fresh"]["mutations_replayed"]) == (
            "bulk",
            1,
        )
        status = await dispatch(engine, "knowledge_status", {})
        assert {g: (s["applied_seq"], s["max_seq"]) for g, s in status["wal_groups"].items()} == {
            GROUP: (6, 6),
            "fresh": (0, 0),
        }
        assert status["wal_groups"][GROUP]["hydration_status"] == "hydrated"
        # docs/api.md §status-wal: a stream whose max_seq is 0 is "not_applicable", whatever its position.
        assert status["wal_groups"]["fresh"]["hydration_status"] == "not_applicable"

        assert await _names(engine, GROUP) == {
            "Anchor",
            "Ghost Writer",
            "Phantom One",
            "Phantom Two",
        }
        assert await _names(engine, "fresh") == {"Lonely"}
        edges = await dispatch(engine, "knowledge_get_edges_by_uuids", {"uuids": [fact.uuid]})
        assert [e["fact"] for e in edges["edges"]] == ["Phantom One haunts Phantom Two"]
        episodes = await dispatch(
            engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 5}
        )
        assert [(e["uuid"], sorted(e["entity_edges"])) for e in episodes["episodes"]] == [
            (ep.uuid, sorted([a.uuid, b.uuid]))
        ]
        assert _fulltext(engine, "ghost") == {"Ghost Writer"}
        assert _fulltext(engine, "phantom") == {"Phantom One", "Phantom Two"}
        assert _fulltext(engine, "lonely") == {"Lonely"}
        # The name index knows the replayed entities: asserting one again changes nothing.
        again = await dispatch(
            engine,
            "knowledge_assert_entity",
            {"name": "Ghost Writer", "group_id": GROUP, "summary": "only in the log"},
        )
        assert again == {"entity_uuid": ghost.uuid, "created": False, "embedding_warning": None}
        await dispatch(engine, "knowledge_assert_entity", {"name": "Next", "group_id": GROUP})
        assert _seqs(settings, GROUP)[-1] == 7
    finally:
        engine.close()


def _episode_batch(stamp_text: str) -> tuple[list[bytes], dict[str, str]]:
    """The WAL lines (seq 1..5) of one commit_episode batch, and the uuids it writes."""
    stamp = now()
    ep = Episode(
        uuid=str(uuid.uuid4()),
        group_id=GROUP,
        name="ep",
        content="half an episode",
        created_at=stamp,
    )
    a = Entity(uuid=str(uuid.uuid4()), group_id=GROUP, name="Torn One", created_at=stamp)
    b = Entity(uuid=str(uuid.uuid4()), group_id=GROUP, name="Torn Two", created_at=stamp)
    fact = Fact(
        uuid=str(uuid.uuid4()),
        group_id=GROUP,
        source_uuid=a.uuid,
        target_uuid=b.uuid,
        name="TEARS",
        fact="Torn One tears Torn Two",
        episodes=(ep.uuid,),
        created_at=stamp,
    )
    ops = [
        entity_op(a),
        entity_op(b),
        fact_op(fact),
        episode_op(ep),
        Op("mentions.add", {"episode": ep.uuid, "entities": [a.uuid, b.uuid]}),
    ]
    lines = encode_batch(1, stamp_text, ops)
    return lines, {"episode": ep.uuid, "a": a.uuid, "b": b.uuid, "fact": fact.uuid}


@pytest.mark.parametrize(
    ("cut", "lines_cut"),
    [
        pytest.param(
            lambda lines: sum(map(len, lines)) - len(lines[-1]) // 2, 5, id="in-last-line"
        ),
        pytest.param(lambda lines: sum(map(len, lines)) - 1, 5, id="only-the-newline-missing"),
        pytest.param(lambda lines: len(lines[0]) + len(lines[1]) + 60, 3, id="in-third-line"),
        pytest.param(
            lambda lines: len(lines[0]) + len(lines[1]) + 12, 3, id="before-third-line-ts"
        ),
        pytest.param(lambda lines: len(lines[0]) + len(lines[1]), 2, id="between-two-lines"),
    ],
)
async def test_a_batch_whose_write_was_cut_short_is_dropped_whole(
    settings: Settings, cut: Any, lines_cut: int
) -> None:
    """A crash can cut a batch's single write() short after some of its lines (the kernel
    stops a write at a page boundary when SIGKILL arrives; power loss keeps any prefix). The
    batch was never acknowledged, and a commit_episode batch is all-or-nothing."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Anchor", "group_id": GROUP})
    finally:
        engine.close()
    last = _wal_files(settings, GROUP)[-1]
    intact = last.read_bytes()
    lines, uuids = _episode_batch("2024-06-11T10:00:00.123456+00:00")
    blob = b"".join(lines)
    with last.open("ab") as fh:
        fh.write(blob[: cut(lines)])

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        (torn,) = sink.of_type("wal_torn_tail")
        assert last.read_bytes() == intact
        assert (torn["bytes_dropped"], torn["lines"]) == (cut(lines), lines_cut)
        assert await _names(engine, GROUP) == {"Anchor"}
        edges = await dispatch(engine, "knowledge_get_edges_by_uuids", {"uuids": [uuids["fact"]]})
        assert edges["count"] == 0
        episodes = await dispatch(
            engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 5}
        )
        assert episodes["count"] == 0
        state = await _wal_group(engine, GROUP)
        assert (state["applied_seq"], state["max_seq"]) == (0, 0)
        await dispatch(engine, "knowledge_assert_entity", {"name": "After", "group_id": GROUP})
        assert _seqs(settings, GROUP) == [0, 1]
    finally:
        engine.close()


async def test_an_empty_file_left_by_a_crash_does_not_hide_a_later_torn_tail(
    settings: Settings,
) -> None:
    """A crash between a rotation's file creation and its first write leaves an empty file,
    which sorts last (it has no first seq); a torn tail in a later session's file is still cut."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Before", "group_id": GROUP})
    finally:
        engine.close()
    empty = group_dir(settings.wal_dir, GROUP) / "20000101_000000_abcdef_0001.jsonl"
    empty.write_bytes(b"")

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        assert sink.of_type("wal_torn_tail") == []
        await dispatch(engine, "knowledge_assert_entity", {"name": "During", "group_id": GROUP})
    finally:
        engine.close()
    files = _wal_files(settings, GROUP)
    assert files[-1] == empty  # no first seq: ordered last
    latest = files[-2]
    intact = latest.read_bytes()
    assert parse_line(intact.splitlines()[-1]) is not None
    torn = b'{"seq":2,"ts":"2024-06-11T10:00:0'
    with latest.open("ab") as fh:
        fh.write(torn)

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        assert [(e["path"], e["bytes_dropped"]) for e in sink.of_type("wal_torn_tail")] == [
            (str(latest), len(torn))
        ]
        assert latest.read_bytes() == intact
        assert await _names(engine, GROUP) == {"Before", "During"}
        await dispatch(engine, "knowledge_assert_entity", {"name": "After", "group_id": GROUP})
        assert _seqs(settings, GROUP) == [0, 1, 2]
    finally:
        engine.close()
