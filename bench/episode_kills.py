"""SIGKILL an lcg process committing episodes of every write size, many times; prints one JSON
object.

    python bench/episode_kills.py [--kills 100] [--seed 1] [--within 2.0]

A child process commits episodes of 1, 10, 63, 64, 300 and 1,000 new facts (drawn at random)
on one workspace and is SIGKILLed at a random moment up to `--within` seconds after its first
acknowledgement; the workspace is reopened here and judged against its WAL
(lcg.testing.episode_kills): acknowledged episodes lost, partial episodes (an episode without
all its facts, hops, entities and mentions, or a WAL batch left unapplied), seqs reused, and
the restarts that had to repair the store (`wal_problems` entries of kind
`store_missing_applied_rows`). The target is 0 for each. Kuzu's journal is checkpointed every
4 MiB, so kills land inside checkpoints as well as commits.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio

from common import emit
from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.testing.episode_kills import SIZES, judge, kill

SETTINGS: dict[str, Any] = {
    "kuzu_buffer_pool_mb": 128,
    "embedder": "hash",
    "checkpoint_wal_bytes": 4 << 20,
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kills", type=int, default=100)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--within", type=float, default=2.0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    acked: list[dict[str, Any]] = []
    lost: set[str] = set()
    partial: set[str] = set()
    reused: set[str] = set()
    repairs = 0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "ws"
        for n in range(args.kills):
            err = Path(tmp) / f"child{n}.err"
            acked += kill(home, rng.randrange(2**32), SETTINGS, SIZES, args.within, err)
            engine = open_engine(Settings.for_home(home, **SETTINGS))
            try:
                status = anyio.run(dispatch, engine, "knowledge_status", {})
                repairs += sum(
                    1 for p in status["wal_problems"] if p["kind"] == "store_missing_applied_rows"
                )
                verdict = judge(engine, acked)
            finally:
                engine.close()
            lost |= set(verdict.acknowledged_lost)
            partial |= set(verdict.partial_episodes)
            reused |= set(verdict.seq_reused)
    sizes = Counter(a["size"] for a in acked)
    emit(
        "episode_kills",
        {
            "kills": args.kills,
            "acknowledged": len(acked),
            "acknowledged_by_size": {str(s): sizes.get(s, 0) for s in SIZES},
            "acknowledged_lost": len(lost),
            "partial_episodes": len(partial),
            "seq_reused": len(reused),
            "store_repairs_at_open": repairs,
            "samples": sorted(lost | partial | reused)[:5],
            "seconds": round(time.perf_counter() - started, 1),
        },
        params=vars(args),
    )


if __name__ == "__main__":
    main()
