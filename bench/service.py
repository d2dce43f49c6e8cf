"""Benchmark the JSON-RPC socket service under concurrent clients; prints one JSON object.

    python bench/service.py [--clients 16] [--requests 500] [--seed 300]

Starts `lcg serve` as a subprocess on a fresh workspace, seeds `--seed` entities (and a fact
between each consecutive pair), then runs `--clients` threads, each with its own connection,
each sending `--requests` requests one after the other: 80% reads, split evenly between
`knowledge_list_entities` (num_results 20), `knowledge_get_nodes_by_group` and
`knowledge_get_entity_neighbors` (a random seeded entity), and 20% `knowledge_assert_entity`
(new names). Reports throughput (all replies), per-method latency percentiles (successful replies
only), errors (failed calls and error replies, each counted once and never as a latency sample)
and the server's RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from common import cpu_seconds, percentile, rss_kb
from fixtures import Conn

READS = (
    "knowledge_list_entities",
    "knowledge_get_nodes_by_group",
    "knowledge_get_entity_neighbors",
)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--clients", type=int, default=16)
    ap.add_argument("--requests", type=int, default=500)
    ap.add_argument("--seed", type=int, default=300)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lcg-bench-"))
    sock_dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="lcg-"))
    sock_path = sock_dir / "s.sock"
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env["LCG_HOME"] = str(work / ".lcg")
    stderr = (work / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcg.cli", "serve", "--socket", str(sock_path)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                c = Conn(sock_path)
                if c.call("health_check", {})["result"]["state"] == "healthy":
                    break
                c.close()
            except (OSError, KeyError):
                pass
            if time.monotonic() > deadline:
                raise SystemExit("service did not become healthy")
            time.sleep(0.05)

        seed_started = time.perf_counter()
        uuids = []
        for i in range(args.seed):
            res = c.call(
                "knowledge_assert_entity", {"name": f"seed {i}", "summary": f"seeded entity {i}"}
            )
            uuids.append(res["result"]["entity_uuid"])
            if i:
                c.call(
                    "knowledge_assert_relationship",
                    {
                        "source_name": f"seed {i - 1}",
                        "target_name": f"seed {i}",
                        "predicate": "next",
                    },
                )
        seed_seconds = time.perf_counter() - seed_started
        c.close()

        latencies: dict[str, list[float]] = {m: [] for m in (*READS, "knowledge_assert_entity")}
        errors: list[str] = []
        lock = threading.Lock()
        barrier = threading.Barrier(args.clients + 1)

        def client(worker: int) -> None:
            rng = random.Random(worker)
            conn = Conn(sock_path)
            mine: dict[str, list[float]] = {m: [] for m in latencies}
            bad: list[str] = []
            barrier.wait()
            for i in range(args.requests):
                if rng.random() < 0.2:
                    method, params = (
                        "knowledge_assert_entity",
                        {"name": f"client {worker} item {i}"},
                    )
                else:
                    method = rng.choice(READS)
                    if method == "knowledge_list_entities":
                        params = {"num_results": 20}
                    elif method == "knowledge_get_nodes_by_group":
                        params = {"group_ids": ["liminis"]}
                    else:
                        params = {"entity_uuid": rng.choice(uuids)}
                started = time.perf_counter()
                try:
                    answer = conn.call(method, params)
                except (OSError, ValueError, RuntimeError) as exc:
                    bad.append(f"{method}: {exc}")
                    continue
                elapsed_ms = (time.perf_counter() - started) * 1000
                if "error" in answer:  # an error, not a latency sample: counted once
                    bad.append(f"{method}: {answer['error']}")
                else:
                    mine[method].append(elapsed_ms)
            conn.close()
            with lock:
                for m, values in mine.items():
                    latencies[m].extend(values)
                errors.extend(bad)

        threads = [threading.Thread(target=client, args=(w,)) for w in range(args.clients)]
        for t in threads:
            t.start()
        barrier.wait()
        started = time.perf_counter()
        cpu_before = cpu_seconds(proc.pid)
        peak = 0
        while any(t.is_alive() for t in threads):
            peak = max(peak, rss_kb(proc.pid).get("VmRSS", 0))
            time.sleep(0.2)
        wall = time.perf_counter() - started
        server_cpu = cpu_seconds(proc.pid) - cpu_before
        rss = rss_kb(proc.pid)

        c = Conn(sock_path)
        status = c.call("knowledge_status", {})["result"]
        c.close()
        proc.send_signal(signal.SIGTERM)
        exit_code = proc.wait(60)
        total = sum(len(v) for v in latencies.values()) + len(errors)
        print(
            json.dumps(
                {
                    "clients": args.clients,
                    "requests_per_client": args.requests,
                    "requests_total": total,
                    "mix": {"reads": 0.8, "writes": 0.2},
                    "seeded_entities": args.seed,
                    "seed_seconds": round(seed_seconds, 2),
                    "wall_seconds": round(wall, 2),
                    "throughput_rps": round(total / wall, 1),
                    "per_method_ms": {
                        m: {
                            "count": len(v),
                            "p50": round(percentile(v, 0.50), 2),
                            "p95": round(percentile(v, 0.95), 2),
                            "p99": round(percentile(v, 0.99), 2),
                            "mean": round(statistics.fmean(v), 2),
                        }
                        for m, v in latencies.items()
                        if v
                    },
                    "server_cpu_seconds": round(server_cpu, 1),
                    "server_cpu_utilisation": round(server_cpu / wall, 2),
                    "errors": len(errors),
                    "error_samples": errors[:5],
                    "server_rss_mb_end": round(rss.get("VmRSS", 0) / 1024, 1),
                    "server_rss_mb_peak_sampled": round(peak / 1024, 1),
                    "server_rss_mb_high_water": round(rss.get("VmHWM", 0) / 1024, 1),
                    "entities_after": status["entity_count"],
                    "server_exit_code": exit_code,
                    "cpus": os.cpu_count(),
                },
                indent=2,
            )
        )
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        stderr.close()
        for p in sock_dir.iterdir():
            p.unlink()
        sock_dir.rmdir()


if __name__ == "__main__":
    main()
