"""A corrupt or shortened WAL is never half-applied, never silent, never
makes a seq name two writes; and one process writes a WAL root at a time.

Every reproduction runs a real engine on a real Kuzu database and edits the real WAL files.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import orjson
import pytest
from graph_invariants import assert_no_dangling_rows
from rebuild_jobs import rebuild_and_wait

from lcg import Engine, Entity, Episode, EpisodeCommit, Fact, Settings, open_engine
from lcg.engine.recovery import degraded_engine
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files
from lcg.telemetry import ListSink
from lcg.timeutil import now, to_wal
from lcg.wal.layout import group_dir, ordered_files
from lcg.wal.lock import LOCK_FILE, WalLockedError
from lcg.wal.reader import parse_line
from lcg.wal.records import Op, encode_batch, entity_op, seal

pytestmark = pytest.mark.anyio

GROUP = "integrity"
EPISODE = "e0000000-0000-4000-8000-000000000001"
PEOPLE = [f"e0000000-0000-4000-8000-00000000001{i}" for i in range(3)]
FACTS = [f"e0000000-0000-4000-8000-00000000002{i}" for i in range(3)]


def _lines(settings: Settings) -> list[tuple[Path, int, bytes]]:
    """(file, index, raw line) of every non-blank line of the group's stream, in order."""
    out = []
    for path in ordered_files(group_dir(settings.wal_dir, GROUP)):
        for index, raw in enumerate(path.read_bytes().split(b"\n")):
            if raw.strip():
                out.append((path, index, raw))
    return out


def _seqs(settings: Settings) -> list[int]:
    records = (parse_line(raw) for _, _, raw in _lines(settings))
    return [r.seq for r in records if r is not None]


async def _status(engine: Engine) -> dict[str, Any]:
    result: dict[str, Any] = await dispatch(engine, "knowledge_status", {})
    return result


async def _commit_episode(engine: Engine) -> None:
    """One 8-line batch: the episode, three entities, three facts, the mentions."""
    stamp = now()
    names = ("Ada Lovelace", "Charles Babbage", "Analytical Engine")
    await engine.commit_episode(
        EpisodeCommit(
            group_id=GROUP,
            episode=Episode(EPISODE, GROUP, "chunk-1", "Ada and Charles.", created_at=stamp),
            entities=[
                Entity(u, GROUP, n, created_at=stamp) for u, n in zip(PEOPLE, names, strict=True)
            ],
            facts=[
                Fact(
                    FACTS[i],
                    GROUP,
                    PEOPLE[i],
                    PEOPLE[(i + 1) % 3],
                    "KNOWS",
                    f"{names[i]} knows {names[(i + 1) % 3]}",
                    episodes=(EPISODE,),
                    created_at=stamp,
                )
                for i in range(3)
            ],
            mentions=PEOPLE,
        )
    )


async def test_a_batch_with_a_corrupt_line_is_not_applied_and_is_reported(
    settings: Settings,
) -> None:
    """Corrupt the first line of an 8-line episode batch, delete the database,
    start: none of the batch is applied (no fact without its source entity), and
    knowledge_status names the group, the seq range and the file."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Before", "group_id": GROUP})
        await _commit_episode(engine)
        await dispatch(engine, "knowledge_assert_entity", {"name": "After", "group_id": GROUP})
    finally:
        engine.close()
    lines = _lines(settings)
    batch = [(p, i, r) for p, i, raw in lines if (r := parse_line(raw)) and 1 <= r.seq <= 8]
    ops = sorted(r.op for _, _, r in batch)
    assert ops == ["entity.upsert"] * 3 + ["episode.add"] + ["fact.upsert"] * 3 + ["mentions.add"]
    assert [r.more for _, _, r in batch] == list(range(7, -1, -1))  # one 8-line batch
    path, index, _ = batch[0]
    raw = next(raw for p, i, raw in lines if (p, i) == (path, index))
    content = path.read_bytes().split(b"\n")
    content[index] = raw[:40] + b"\x00garbled\x00" + raw[49:]
    path.write_bytes(b"\n".join(content))
    delete_database_files(settings.db_path)

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert sorted(n["name"] for n in nodes["nodes"]) == ["After", "Before"]
        edges = await dispatch(engine, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
        assert edges["edges"] == []
        episodes = await dispatch(
            engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 10}
        )
        assert episodes["episodes"] == []
        assert_no_dangling_rows(engine, "startup over a corrupt batch")
        status = await _status(engine)
        assert status["queryable"] is True
        assert status["wal_problems"] == [
            {
                "group_id": GROUP,
                "kind": "batch_not_applied",
                "file": path.name,
                "first_seq": 1,
                "last_seq": 8,
                "readable_lines_dropped": 7,
            }
        ]
        (lost,) = sink.of_type("wal_batch_lost")
        assert (lost["group_id"], lost["first_seq"], lost["last_seq"]) == (GROUP, 1, 8)
        (replay,) = sink.of_type("wal_replay_complete")
        assert replay["corrupt_batch_lines"] == 7
        assert replay["fidelity_warning"] is not None
    finally:
        engine.close()

    # The record outlives the restart that found it (the database no longer needs a replay).
    engine = open_engine(settings)
    try:
        assert [p["kind"] for p in (await _status(engine))["wal_problems"]] == ["batch_not_applied"]
    finally:
        engine.close()


async def test_a_batch_with_an_unknown_operation_is_not_applied_and_is_reported(
    settings: Settings,
) -> None:
    """An 8-line episode batch whose third line names an operation this version does not know
    (a newer lcg's, or damage that left valid JSON): none of the batch is applied, and it is
    reported like a batch with a corrupt line. Before, that line alone was skipped and the
    other seven applied: an episode with 2 of its 3 entities and a fact without its source."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Before", "group_id": GROUP})
        await _commit_episode(engine)
        await dispatch(engine, "knowledge_assert_entity", {"name": "After", "group_id": GROUP})
    finally:
        engine.close()
    lines = _lines(settings)
    batch = [(p, i, r) for p, i, raw in lines if (r := parse_line(raw)) and 1 <= r.seq <= 8]
    path, index, third = batch[2]
    assert third.op == "entity.upsert"
    content = path.read_bytes().split(b"\n")
    # What a newer lcg would write: a well-formed line, its checksum right, an unknown op.
    value = orjson.loads(content[index].replace(b'"op":"entity.upsert"', b'"op":"entity.teleport"'))
    del value["crc"]
    content[index] = seal(orjson.dumps(value)).rstrip(b"\n")
    assert parse_line(content[index]) is not None  # still a readable line
    path.write_bytes(b"\n".join(content))
    delete_database_files(settings.db_path)

    engine = open_engine(settings)
    try:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert sorted(n["name"] for n in nodes["nodes"]) == ["After", "Before"]
        edges = await dispatch(engine, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
        assert edges["edges"] == []
        episodes = await dispatch(
            engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 10}
        )
        assert episodes["episodes"] == []
        assert_no_dangling_rows(engine, "startup over a batch with an unknown operation")
        assert (await _status(engine))["wal_problems"] == [
            {
                "group_id": GROUP,
                "kind": "batch_not_applied",
                "file": path.name,
                "first_seq": 1,
                "last_seq": 8,
                "readable_lines_dropped": 8,
            }
        ]
    finally:
        engine.close()


@pytest.mark.parametrize("rebuild_first", [False, True], ids=["write", "rebuild-then-write"])
async def test_a_database_ahead_of_its_wal_is_reported_and_no_seq_is_reused(
    settings: Settings, rebuild_first: bool
) -> None:
    """After a clean shutdown, cut the last WAL line mid-way and start: the
    database (applied seq 2) is ahead of the WAL (max seq 1) — reported in status and
    telemetry — and the next write gets seq 3, not 2 again; also after a full rebuild has
    re-derived the group from the WAL (which no longer reaches seq 2)."""
    engine = open_engine(settings)
    try:
        for name in ("Ada", "Grace", "Linus"):
            await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": GROUP})
    finally:
        engine.close()
    assert _seqs(settings) == [0, 1, 2]
    path, _, raw = _lines(settings)[-1]
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - len(raw) // 2 - 1])  # the last line, cut mid-way

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        status = await _status(engine)
        if rebuild_first:
            await rebuild_and_wait(engine, {"group_id": GROUP, "force_clear": True})
        await dispatch(engine, "knowledge_assert_entity", {"name": "Barbara", "group_id": GROUP})
        assert _seqs(settings) == [0, 1, 3]  # seq 2 named "Linus" once: never again
        assert [e["lines"] for e in sink.of_type("wal_torn_tail")] == [1]
        (behind,) = sink.of_type("wal_behind_database")
        assert (behind["applied_seq"], behind["max_seq"], behind["next_seq"]) == (2, 1, 3)
        expected = {
            "group_id": GROUP,
            "kind": "database_ahead_of_wal",
            "file": None,
            "first_seq": 2,
            "last_seq": 2,
        }
        (cut,) = sink.of_type("wal_torn_tail")
        torn = {
            "group_id": GROUP,
            "kind": "torn_tail",
            "file": path.name,
            "first_seq": 2,
            "last_seq": None,
            "bytes_dropped": cut["bytes_dropped"],
            "lines": 1,
        }
        assert status["wal_problems"] == [torn, expected]
        # Still reported once the WAL has moved past the database again: seq 2 is gone.
        assert (await _status(engine))["wal_problems"] == [torn, expected]
    finally:
        engine.close()


def _open_elsewhere(home: Path, wal_dir: Path) -> str:
    """In a new process, open an engine with its own home (database) on `wal_dir`: what it
    printed, "LOCKED <message>" or "OPENED"."""
    script = textwrap.dedent(
        f"""
        from pathlib import Path
        from lcg import Settings, open_engine
        from lcg.wal.lock import WalLockedError
        settings = Settings.for_home(Path({str(home)!r}), wal_dir=Path({str(wal_dir)!r}))
        try:
            open_engine(settings).close()
        except WalLockedError as exc:
            print("LOCKED", exc)
        else:
            print("OPENED")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout


def test_a_second_process_cannot_write_the_same_wal_root(
    settings: Settings, tmp_path: Path
) -> None:
    """Another process with its own database but the same WAL directory is
    refused, with an error naming the holder's pid; the lock goes with the holder's close."""
    engine = open_engine(settings)
    try:
        out = _open_elsewhere(tmp_path / "other", settings.wal_dir)
        assert out.startswith("LOCKED"), out
        assert f"pid {os.getpid()}" in out
        assert str(settings.wal_dir) in out
        assert not (tmp_path / "other" / "db").exists()  # refused before touching its database
    finally:
        engine.close()
    assert _open_elsewhere(tmp_path / "other", settings.wal_dir).startswith("OPENED")


def test_a_lock_left_by_a_killed_process_does_not_block(settings: Settings) -> None:
    """The lock file outlives a SIGKILLed holder; its lock does not."""
    settings.wal_dir.mkdir(parents=True)
    script = (
        "import sys; from pathlib import Path; from lcg.wal import lock; "
        f"lock.acquire(Path({str(settings.wal_dir)!r})); print('held', flush=True); "
        "sys.stdin.read()"
    )
    with subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    ) as holder:
        try:
            assert holder.stdout is not None
            assert holder.stdout.readline().strip() == "held"
            with pytest.raises(WalLockedError, match=f"pid {holder.pid}"):
                open_engine(settings)
            with pytest.raises(WalLockedError):
                degraded_engine(settings, "unknown")
        finally:
            holder.kill()
    assert (settings.wal_dir / LOCK_FILE).exists()
    open_engine(settings).close()


async def test_engines_of_one_process_share_the_lock_and_clear_all_keeps_it(
    settings: Settings, tmp_path: Path
) -> None:
    """The service hands the WAL from a degraded engine to a recovered one within a process;
    knowledge_clear_all deletes the WAL but not the lock this process holds."""
    degraded = degraded_engine(settings, "unknown")
    engine = open_engine(settings)
    degraded.close()
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
        await dispatch(engine, "knowledge_clear_all", {"confirm": True, "preserve_wal": False})
        assert [p.name for p in settings.wal_dir.iterdir()] == [LOCK_FILE]
        assert _open_elsewhere(tmp_path / "other", settings.wal_dir).startswith("LOCKED")
    finally:
        engine.close()


async def test_a_replayed_batch_with_a_failing_line_is_not_applied_in_part(
    settings: Settings,
) -> None:
    """Replay isolates a failing transaction by WAL batch, not by line: a batch whose one
    operation fails leaves none of its lines in the graph (the same defect class as item 3)."""
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
    finally:
        engine.close()
    stamp = now()
    ops = [
        entity_op(Entity(PEOPLE[0], GROUP, "Grace", created_at=stamp)),
        Op("mentions.add", {"episode": EPISODE, "entities": [1, 2]}),  # fails: not uuids
        entity_op(Entity(PEOPLE[1], GROUP, "Linus", created_at=stamp)),
    ]
    path = ordered_files(group_dir(settings.wal_dir, GROUP))[-1]
    with path.open("ab") as fh:
        fh.write(b"".join(encode_batch(1, to_wal(stamp) or "", ops)))
        fh.write(b"".join(encode_batch(4, to_wal(stamp) or "", [ops[0]])))

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert sorted(n["name"] for n in nodes["nodes"]) == ["Ada", "Grace"]  # Grace: seq 4
        (replay,) = sink.of_type("wal_replay_complete")
        assert (replay["failed_lines"], replay["mutations_replayed"]) == (3, 1)
        assert replay["last_committed_seq"] == 4
    finally:
        engine.close()

    # The whole stream again, folded and bulk-loaded: the same rule.
    delete_database_files(settings.db_path)
    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        assert sorted(n["name"] for n in nodes["nodes"]) == ["Ada", "Grace"]
        (replay,) = sink.of_type("wal_replay_complete")
        assert (replay["replay_mode"], replay["failed_lines"]) == ("bulk", 3)
    finally:
        engine.close()
