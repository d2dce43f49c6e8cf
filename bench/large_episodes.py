"""Benchmark committing large episodes, and the check at open of the last applied batches;
prints one JSON object.

    python bench/large_episodes.py [--sizes 64,256,1000] [--episodes 7] [--base 0,50000]
                                   [--check-episodes 10000]

1. `commit`: for each base size (entities and facts already in the database, bulk-loaded from a
   WAL at a cold open) and each episode size (new facts; about half as many new entities, all
   mentioned: lcg.testing.episode_kills.episode_commit), `--episodes` episodes committed one
   after another through `Engine.commit_episode` (validation, embedding with the hash embedder,
   one transaction, one WAL fsync each): the median wall and CPU time of a commit.
2. `open_check`: on a workspace of `--check-episodes` ingested episodes in 3 groups
   (bench/wal_store.py's WAL), the median time of the check that the store holds the rows of
   each group's last applied batches (`lcg.engine.applied.check`, nothing to repair: what an
   open after a crash adds; an open after a clean close skips it), and of a whole open that
   needs no replay.
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from common import emit
from fixtures import write_wal
from lcg import Settings, open_engine
from lcg.engine import applied, exclusive
from lcg.models import Entity, Fact
from lcg.testing.episode_kills import episode_commit
from lcg.wal.records import entity_op, fact_op
from lcg.wal.writer import Wal

SETTINGS: dict[str, Any] = {"embedder": "hash", "kuzu_buffer_pool_mb": 512}


def _base(settings: Settings, rows: int) -> None:
    """A WAL of `rows` entities and `rows` facts between them, in group `base`."""
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    stamp = datetime(2020, 1, 1, tzinfo=UTC)
    uuids = [str(uuid.uuid4()) for _ in range(rows)]
    for start in range(0, rows, 1000):
        chunk = range(start, min(rows, start + 1000))
        ops = [entity_op(Entity(uuids[i], "base", f"base {i}", created_at=stamp)) for i in chunk]
        ops += [
            fact_op(
                Fact(
                    str(uuid.uuid4()),
                    "base",
                    uuids[i],
                    uuids[(i + 1) % rows],
                    "NEXT",
                    f"base {i} precedes base {(i + 1) % rows}",
                    created_at=stamp,
                )
            )
            for i in chunk
        ]
        wal.append("base", ops)
    wal.close()


async def _commits(home: Path, base: int, sizes: list[int], episodes: int) -> dict[str, Any]:
    settings = Settings.for_home(home, **SETTINGS)
    if base:
        _base(settings, base)
    engine = open_engine(settings)  # a cold open bulk-loads the base
    rng = random.Random(5)
    out: dict[str, Any] = {}
    try:
        for size in sizes:
            walls: list[float] = []
            cpus: list[float] = []
            for _ in range(episodes):
                commit = episode_commit(size, rng)
                wall, cpu = time.perf_counter(), time.process_time()
                await engine.commit_episode(commit)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
            out[str(size)] = {
                "wall_ms_median": round(statistics.median(walls) * 1000, 1),
                "cpu_ms_median": round(statistics.median(cpus) * 1000, 1),
                "n": episodes,
            }
    finally:
        engine.close()
    return out


def _open_check(home: Path, episodes: int, opens: int) -> dict[str, Any]:
    settings = Settings.for_home(home, **SETTINGS)
    write_wal(settings, episodes)
    open_engine(settings).close()  # the cold open's bulk load
    checks: list[float] = []
    whole: list[float] = []
    for _ in range(opens):
        started = time.perf_counter()
        engine = open_engine(settings)
        whole.append(time.perf_counter() - started)
        try:
            with exclusive.write_lock(engine):
                started = time.perf_counter()
                repaired = applied.check(
                    exclusive.catchup(engine), exclusive.store(engine), engine.parts.wal
                )
                checks.append(time.perf_counter() - started)
            assert repaired == [], repaired
        finally:
            engine.close()
    return {
        "episodes": episodes,
        "groups": len(engine.parts.wal.groups()),
        "check_ms_median": round(statistics.median(checks) * 1000, 1),
        "open_ms_median": round(statistics.median(whole) * 1000, 1),
        "opens": opens,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="64,256,1000")
    parser.add_argument("--episodes", type=int, default=7)
    parser.add_argument("--base", default="0,50000")
    parser.add_argument("--check-episodes", type=int, default=10_000)
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",")]
    results: dict[str, Any] = {"commit": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for base in [int(b) for b in args.base.split(",")]:
            home = Path(tmp) / f"base{base}"
            results["commit"][f"base_{base}"] = anyio.run(
                _commits, home, base, sizes, args.episodes
            )
        if args.check_episodes:
            results["open_check"] = _open_check(
                Path(tmp) / "check", args.check_episodes, args.opens
            )
    emit("large_episodes", results, params=vars(args))


if __name__ == "__main__":
    main()
