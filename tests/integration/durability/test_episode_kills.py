"""kill -9 an lcg process committing episodes of every write size; every restart must serve each
acknowledged episode whole, no episode by halves, and no seq twice.

`test_crash_safety.py` commits episodes of a handful of facts, which the store writes one
statement per fact; `test_kill_points.py` kills single-entity writes. Here each episode brings
1, 10, 63, 64, 300 or 1,000 new facts (with about half as many new entities, all mentioned), so
every way the store writes a batch of facts is killed in, and each restart is compared with
the WAL's records, batch by batch (`lcg.testing.episode_kills`): the episode present means its
facts (with both hops), entities and mentions present; every batch of the WAL applied; every
acknowledged episode at the seqs it was acknowledged with.
"""

from __future__ import annotations

import os
import random
from pathlib import Path
from typing import Any

import anyio
import pytest

from lcg import Settings, open_engine
from lcg.engine import exclusive
from lcg.service.registry import dispatch
from lcg.testing.episode_kills import GROUP, SIZES, Verdict, judge, kill

pytestmark = pytest.mark.slow

KILLS = 12
SEED = int(os.environ.get("EPISODE_KILLS_SEED", "20261207"))  # override to explore other timings
# Kuzu's journal is checkpointed every few large episodes, so kills land in checkpoints too.
SETTINGS: dict[str, Any] = {
    "kuzu_buffer_pool_mb": 128,
    "embedder": "hash",
    "checkpoint_wal_bytes": 4 << 20,
}
# No checkpoint at all: after a commit, Kuzu's journal still holds it when the child dies.
UNCHECKPOINTED = {**SETTINGS, "checkpoint_wal_bytes": 1 << 30}


def _restart(home: Path, settings: dict[str, Any], acked: list[dict[str, Any]]) -> Verdict:
    """Reopen the workspace, judge it, and require a clean status: hydrated, no WAL problem."""
    engine = open_engine(Settings.for_home(home, **settings))
    try:
        status = anyio.run(dispatch, engine, "knowledge_status", {})
        assert status["wal_problems"] == [], status["wal_problems"]
        assert status["wal_groups"][GROUP]["hydration_status"] == "hydrated"
        return judge(engine, acked)
    finally:
        engine.close()


def test_random_kills_leave_no_episode_partial(tmp_path: Path) -> None:
    rng = random.Random(SEED)
    home = tmp_path / "ws"
    acked: list[dict[str, Any]] = []
    for n in range(KILLS):
        acked += kill(home, rng.randrange(2**32), SETTINGS, stderr=tmp_path / f"child{n}.err")
        verdict = _restart(home, SETTINGS, acked)
        assert verdict.clean, (n, verdict)
    assert {a["size"] for a in acked} >= {1, 64, 300}, "too few size classes acknowledged"


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("point", ["after-append", "after-commit"])
def test_a_kill_at_a_write_point_keeps_the_episode_whole(
    tmp_path: Path, point: str, size: int
) -> None:
    """`after-append`: the second episode's WAL lines are durable and its transaction is open,
    so the restart's tail replay must apply it whole; `after-commit`: it is committed and
    never acknowledged, and Kuzu's own journal replay must keep all of it."""
    home = tmp_path / "ws"
    acked = kill(home, 1, UNCHECKPOINTED, [size], point=point, stderr=tmp_path / "child.err")
    assert len(acked) == 1
    verdict = _restart(home, UNCHECKPOINTED, acked)
    assert verdict.clean, verdict


def test_random_kills_of_a_server_mode_writer_leave_no_episode_partial(
    tmp_path: Path, falkordb_url: str
) -> None:
    """On FalkorDB each commit is one MULTI/EXEC of the stream append and every statement,
    written to the server at once: a writer killed before its EXEC arrived applied nothing,
    after it applied all."""
    from lcg.storage.falkordb.backend import FalkorBackend

    admin = FalkorBackend(falkordb_url)
    try:
        admin.client.flushall()
    finally:
        admin.close()
    settings = {"embedder": "hash", "storage": "falkordb", "falkordb_url": falkordb_url}
    rng = random.Random(SEED)
    home = tmp_path / "ws"
    acked: list[dict[str, Any]] = []
    for n in range(4):
        err = tmp_path / f"child{n}.err"
        acked += kill(home, rng.randrange(2**32), settings, [1, 64, 300, 1000], stderr=err)
        engine = open_engine(Settings.for_home(home, **settings))
        try:
            records, _ = exclusive.mode(engine).wal_records(GROUP)
            verdict = judge(engine, acked, records)
        finally:
            engine.close()
        assert verdict.clean, (n, verdict)
    assert {a["size"] for a in acked} >= {64, 300}, "too few size classes acknowledged"
