"""The check at open that the store holds the rows of the batches its position says it applied.

A store whose recorded position covers a batch while rows of that batch are gone (what a
crash once left when facts were loaded by `COPY`) is made here by a child process that deletes
rows behind the engine's back on the real database and is SIGKILLed before any checkpoint; the
next open (which finds Kuzu's journal holding commits) must find it, replay the batches from the
oldest incomplete one, report it (`wal_problems` kind `store_missing_applied_rows`, event
`store_missing_applied_rows`) and serve the rows again. A store that holds everything (rows a
later batch deleted included) is left alone.
"""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lcg import Engine, Settings, open_engine
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.testing.episode_kills import GROUP, episode_commit

pytestmark = pytest.mark.anyio

# No automatic checkpoint: what a child commits stays in Kuzu's journal when it dies.
SETTINGS: dict[str, Any] = {
    "kuzu_buffer_pool_mb": 128,
    "embedder": "hash",
    "checkpoint_wal_bytes": 1 << 30,
}


async def _workspace(home: Path, sizes: list[int]) -> list[Any]:
    """Commit one episode per size; returns their commits."""
    rng = random.Random(3)
    commits = [episode_commit(size, rng) for size in sizes]
    engine = open_engine(Settings.for_home(home, **SETTINGS))
    try:
        for commit in commits:
            await engine.commit_episode(commit)
    finally:
        engine.close()
    return commits


# Opens the workspace, runs one raw statement (if any) on the real database and dies before
# any checkpoint, so the next open finds Kuzu's journal holding commits, as after a crash.
CHILD = r"""
import json, os, signal, sys
from pathlib import Path
from lcg import Settings, open_engine
engine = open_engine(Settings.for_home(Path(sys.argv[1]), **json.loads(sys.argv[2])))
if sys.argv[3]:
    with engine._mode.journal().transaction() as tx:
        tx.run(sys.argv[3], json.loads(sys.argv[4]))
os.kill(os.getpid(), signal.SIGKILL)
"""


def _crash(home: Path, statement: str = "", params: dict[str, Any] | None = None) -> None:
    """Delete rows behind the engine's back (the applied position as it is), then crash."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(home),
            json.dumps(SETTINGS),
            statement,
            json.dumps(params or {}),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]


def _facts(engine: Engine, uuids: list[str]) -> int:
    with engine.reader() as conn:
        return len(conn.facts_with_hops_by_uuid(uuids))


async def _problems(engine: Engine) -> list[dict[str, Any]]:
    status = await dispatch(engine, "knowledge_status", {})
    return [p for p in status["wal_problems"] if p["group_id"] == GROUP]


async def test_facts_missing_from_the_last_batch_are_replayed_and_reported(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    commits = await _workspace(home, [3, 10, 70])
    last = [f.uuid for f in commits[-1].facts]
    _crash(home, "MATCH (f:Fact) WHERE f.uuid IN $u DETACH DELETE f", {"u": last[:50]})
    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        assert _facts(engine, last) == len(last)
        [event] = sink.of_type("store_missing_applied_rows")
        assert event["group_id"] == GROUP and event["missing"] == {"facts": 50}
        [problem] = await _problems(engine)
        assert problem["kind"] == "store_missing_applied_rows"
        assert problem["missing"] == {"facts": 50} and problem["repaired"] is True
        # From the incomplete batch on, not the whole stream.
        assert problem["first_seq"] > 0 and problem["first_seq"] == event["first_seq"]
        status = await dispatch(engine, "knowledge_status", {})
        assert status["wal_groups"][GROUP]["hydration_status"] == "hydrated"
    finally:
        engine.close()
    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        assert sink.of_type("store_missing_applied_rows") == []
        assert len(await _problems(engine)) == 1  # kept, not repeated
    finally:
        engine.close()


async def test_missing_mentions_and_episodes_of_an_older_batch_are_replayed(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    commits = await _workspace(home, [2, 2, 2])
    first = commits[0]
    _crash(home, "MATCH (ep:Episode {uuid: $u}) DETACH DELETE ep", {"u": first.episode.uuid})
    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        [event] = sink.of_type("store_missing_applied_rows")
        assert event["missing"] == {"episodes": 1, "mentions": len(first.mentions)}
        assert event["first_seq"] == 0
        with engine.reader() as conn:
            mentions = conn.episode_mentions([first.episode.uuid])
        assert sorted(mentions[first.episode.uuid]) == sorted(first.mentions)
    finally:
        engine.close()


async def test_a_store_that_holds_every_applied_row_is_left_alone(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    commits = await _workspace(home, [2, 64])
    engine = open_engine(Settings.for_home(home, **SETTINGS))
    try:  # a later batch deletes an earlier episode: its absence is what the WAL says
        await dispatch(
            engine,
            "knowledge_delete_episode",
            {"episode_uuid": commits[0].episode.uuid},
        )
    finally:
        engine.close()
    _crash(home)  # the check runs at the next open, and finds every row
    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        assert sink.of_type("store_missing_applied_rows") == []
        assert [e for e in sink.of_type("wal_replay_complete") if e["group_id"] == GROUP] == []
        assert await _problems(engine) == []
    finally:
        engine.close()
