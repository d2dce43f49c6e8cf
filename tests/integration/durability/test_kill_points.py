"""kill -9 a writer at chosen points of one write, and check that the matching recovery path ran.

`test_crash_safety.py` kills at random moments, so it cannot tell which recovery path a reopen
took (a startup that skipped the WAL-tail replay passed it). Here a child process opens the
engine, acknowledges one write, arms one kill point on the real WAL and dies at it with SIGKILL
during a second write (`assert_entity` of "Victim"):

- `after-append`: the batch's lines are written and fsynced, the transaction is not committed.
  The reopen must replay exactly that tail (a `wal_replay_complete` event, mode
  `incremental` from the first unapplied seq, one mutation) and serve the write;
- `after-commit`: committed, never acknowledged. The reopen must find the WAL and the database
  in step (no replay; Kuzu's own journal, which still held the commit, is replayed by Kuzu) and
  serve the write;
- `mid-line`: half of the batch's line reached the file. The reopen must cut the torn tail (a
  `wal_torn_tail` event), serve nothing of the write, and the next write must get the seq the
  torn line would have had;
- `between-groups`: a write that spans two groups (`knowledge_delete_by_group` of both) dies
  after the first group's batch is durable and before the second's append. The reopen must cut
  the first group's batch as a torn tail (reported like a single-group one, naming the commit's
  groups), apply nothing of the write to either group, and reuse its seq.

Fault injection sits at the process's edge only (a wrapper that calls the real append, or a file
object that writes half a line): the WAL, the store and the startup catch-up are the real ones.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink

pytestmark = pytest.mark.anyio

G = "kill"
# No automatic checkpoint: after a commit, Kuzu's journal still holds it when the child dies.
SETTINGS: dict[str, Any] = {
    "kuzu_buffer_pool_mb": 128,
    "embedder": "hash",
    "checkpoint_wal_bytes": 1 << 30,
}

CHILD = r"""
import json
import os
import signal
import sys
from pathlib import Path

import anyio

from lcg import Settings, open_engine
from lcg.service.registry import dispatch

home, point, group = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
settings = Settings.for_home(home, **json.loads(sys.argv[4]))


def report(**record):
    print(json.dumps(record), flush=True)


def die():
    os.kill(os.getpid(), signal.SIGKILL)


class HalfLine:
    # The stream's open file, except that the next write puts half its bytes on disk and dies.
    def __init__(self, inner):
        self._inner = inner

    def write(self, blob):
        self._inner.write(blob[: len(blob) // 2])
        self._inner.flush()
        os.fsync(self._inner.fileno())
        report(event="half-written", bytes=len(blob) // 2, of=len(blob))
        die()

    def __getattr__(self, name):
        return getattr(self._inner, name)


async def main():
    engine = open_engine(settings)
    out = await dispatch(engine, "knowledge_assert_entity", {"name": "Anchor", "group_id": group})
    report(event="ack", name="Anchor", uuid=out["entity_uuid"])
    stream = engine.parts.wal.stream(group)
    report(event="armed", next_seq=stream.next_seq)
    if point == "after-append":
        real = stream.append

        def append_then_die(ops, commit=None):
            first, last = real(ops, commit)
            report(event="appended", first=first, last=last)
            die()

        stream.append = append_then_die
    elif point == "mid-line":
        stream._file = HalfLine(stream._file)
    elif point == "between-groups":
        other = group + "2"
        await dispatch(engine, "knowledge_assert_entity", {"name": "Other", "group_id": other})
        report(event="ack", name="Other", group=other)

        def die_before_append(ops, commit=None):
            report(event="second-append", first=engine.parts.wal.stream(other).next_seq, marked=commit is not None)
            die()

        engine.parts.wal.stream(other).append = die_before_append
        await dispatch(
            engine, "knowledge_delete_by_group", {"group_ids": [group, other], "confirm": True}
        )
    out = await dispatch(engine, "knowledge_assert_entity", {"name": "Victim", "group_id": group})
    if point == "after-commit":
        report(event="committed", uuid=out["entity_uuid"], journal=engine._mode.journal().journal_bytes())
        die()
    report(event="ack", name="Victim", uuid=out["entity_uuid"])


anyio.run(main)
"""


def _run_child(tmp_path: Path, home: Path, point: str) -> list[dict[str, Any]]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    done = subprocess.run(
        [sys.executable, str(script), str(home), point, G, json.dumps(SETTINGS)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == -9, (done.returncode, done.stderr[-3000:])
    return [json.loads(line) for line in done.stdout.splitlines()]


async def _names(engine: Any) -> set[str]:
    found = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_id": G})
    return {n["name"] for n in found["nodes"]}


async def _names_in(engine: Any, group: str) -> set[str]:
    found = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": [group]})
    return {n["name"] for n in found["nodes"] if n["group_id"] == group}


async def _wal_state(engine: Any) -> tuple[int, int]:
    status = await dispatch(engine, "knowledge_status", {})
    group = status["wal_groups"][G]
    return group["applied_seq"], group["max_seq"]


async def test_a_kill_after_the_wal_append_is_repaired_by_a_tail_replay(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    records = _run_child(tmp_path, home, "after-append")
    armed = next(r for r in records if r["event"] == "armed")
    appended = next(r for r in records if r["event"] == "appended")
    assert appended["first"] == armed["next_seq"]
    assert not any(r["event"] == "ack" and r["name"] == "Victim" for r in records)

    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        replays = [e for e in sink.of_type("wal_replay_complete") if e["group_id"] == G]
        assert len(replays) == 1, sink.events
        replay = replays[0]
        assert (replay["replay_mode"], replay["from_seq"], replay["mutations_replayed"]) == (
            "incremental",
            appended["first"],
            appended["last"] - appended["first"] + 1,
        )
        assert replay["failed_lines"] == 0
        assert sink.of_type("wal_torn_tail") == []
        assert await _names(engine) == {"Anchor", "Victim"}
        assert await _wal_state(engine) == (appended["last"], appended["last"])
    finally:
        engine.close()


async def test_a_kill_after_the_commit_needs_no_replay_and_keeps_the_write(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    records = _run_child(tmp_path, home, "after-commit")
    armed = next(r for r in records if r["event"] == "armed")
    committed = next(r for r in records if r["event"] == "committed")
    # Kuzu's journal still held the commit: the reopen must replay it (Kuzu's own recovery).
    assert committed["journal"] > 0

    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        assert [e for e in sink.of_type("wal_replay_complete") if e["group_id"] == G] == []
        assert sink.of_type("wal_torn_tail") == []
        assert await _names(engine) == {"Anchor", "Victim"}
        victim = await engine.entity_by_name(G, "Victim")
        assert victim is not None and victim.uuid == committed["uuid"]
        assert await _wal_state(engine) == (armed["next_seq"], armed["next_seq"])
    finally:
        engine.close()


async def test_a_kill_mid_line_cuts_the_torn_tail_and_reuses_nothing(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    records = _run_child(tmp_path, home, "mid-line")
    armed = next(r for r in records if r["event"] == "armed")
    half = next(r for r in records if r["event"] == "half-written")
    assert 0 < half["bytes"] < half["of"]

    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        torn = [e for e in sink.of_type("wal_torn_tail") if e["group_id"] == G]
        assert len(torn) == 1, sink.events
        assert torn[0]["bytes_dropped"] == half["bytes"]
        assert [e for e in sink.of_type("wal_replay_complete") if e["group_id"] == G] == []
        assert await _names(engine) == {"Anchor"}
        last = armed["next_seq"] - 1
        assert await _wal_state(engine) == (last, last)
        # Writing resumes at the seq the torn line would have had, and it sticks.
        await dispatch(engine, "knowledge_assert_entity", {"name": "After", "group_id": G})
        assert await _wal_state(engine) == (armed["next_seq"], armed["next_seq"])
    finally:
        engine.close()
    engine = open_engine(Settings.for_home(home, **SETTINGS))
    try:
        assert await _names(engine) == {"Anchor", "After"}
    finally:
        engine.close()


async def test_a_kill_between_two_groups_appends_applies_nothing_of_the_commit(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    records = _run_child(tmp_path, home, "between-groups")
    armed = next(r for r in records if r["event"] == "armed")
    second = next(r for r in records if r["event"] == "second-append")
    assert second["marked"]  # the engine marked the commit's batches

    sink = ListSink()
    engine = open_engine(Settings.for_home(home, **SETTINGS), events=sink)
    try:
        torn = sink.of_type("wal_torn_tail")
        assert [(e["group_id"], e["lines"]) for e in torn] == [(G, 1)], sink.events
        # Nothing of the purge was replayed: both groups are as acknowledged.
        assert [e for e in sink.of_type("wal_replay_complete") if e["group_id"] == G] == []
        assert await _names_in(engine, G) == {"Anchor"}
        assert await _names_in(engine, G + "2") == {"Other"}
        status = await dispatch(engine, "knowledge_status", {})
        problems = [p for p in status["wal_problems"] if p["group_id"] == G]
        assert len(problems) == 1
        assert problems[0]["kind"] == "torn_tail"
        assert problems[0]["first_seq"] == armed["next_seq"]
        assert problems[0]["commit_groups"] == [G, G + "2"]
        last = armed["next_seq"] - 1
        assert await _wal_state(engine) == (last, last)
        # The next write takes the seq the cut batch had, and sticks.
        await dispatch(engine, "knowledge_assert_entity", {"name": "After", "group_id": G})
        assert await _wal_state(engine) == (armed["next_seq"], armed["next_seq"])
    finally:
        engine.close()
    engine = open_engine(Settings.for_home(home, **SETTINGS))
    try:
        assert await _names_in(engine, G) == {"Anchor", "After"}
        assert await _names_in(engine, G + "2") == {"Other"}
    finally:
        engine.close()
