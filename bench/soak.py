"""Soak the JSON-RPC service with a mixed read/write load and watch its RSS; prints one JSON object.

    python bench/soak.py [--minutes 10] [--warmup-minutes 2] [--clients 8] [--seed 300]
    python bench/soak.py --per-method 2000     # RSS growth per N calls of single read methods

Starts `lcg serve` as a subprocess on a fresh workspace, seeds `--seed` entities (and a fact
between each consecutive pair), then runs `--clients` threads for `--minutes`, each sending
requests one after the other: 80% reads spread over `knowledge_status`,
`knowledge_list_entities`, `knowledge_find_entities`, `knowledge_find_relationships`,
`knowledge_get_nodes_by_group`, `knowledge_get_entity_neighbors`, `knowledge_list_relationships`
and `knowledge_get_context`; 20% writes: `knowledge_assert_entity` (a summary update of one of
a fixed pool of names) and `knowledge_assert_relationship` (one of a fixed pool of triples). The
data set stays bounded, so RSS growth after warm-up measures leaks, not data. The server's RSS
is sampled every `--sample-seconds`; the report gives it at the start of the load, after the
warm-up and at the end, and the growth over the window after warm-up (target: <= 5%:
Kuzu 0.11.3 leaks native memory on every unprepared parameterised statement). It also gives
the graph's rows (`knowledge_status`' entity, relationship and episode counts) at the start,
after the warm-up and at the end, the rows added after the warm-up and the RSS growth per row
added, so that a figure says how much of it the data can be: 300 entities and 299 facts are
seeded, and the writes' pools add at most 200 of each, mostly during the warm-up.

`--all-reads` widens the read mix to every read method: besides those above
`knowledge_search_passages`, `knowledge_get_edges_by_group`, `knowledge_get_episodes`,
`knowledge_get_entity_timeline`, `knowledge_get_changes` and read-only `knowledge_query_cypher`
(which once emptied every connection's prepared statements: 16 clients grew 260 -> 1,249 MB in
180 s). `--engine ladybug|kuzu` sets the server's `LCG_EMBEDDED_STORE`.

`--per-method N` instead calls each read of the mix N times (after 200 warm-up calls) from one
client, with the mix's own parameters, and reports the RSS growth of each.
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
from typing import Any

from common import rss_kb
from fixtures import Conn  # one JSON-RPC line client for the socket benchmarks

READS: tuple[tuple[str, float], ...] = (
    ("knowledge_status", 1.0),
    ("knowledge_list_entities", 1.0),
    ("knowledge_find_entities", 1.0),
    ("knowledge_find_relationships", 1.0),
    ("knowledge_get_nodes_by_group", 0.5),
    ("knowledge_get_entity_neighbors", 1.0),
    ("knowledge_list_relationships", 0.5),
    ("knowledge_get_context", 0.5),
)
# `--all-reads`: the other read methods, read-only raw Cypher among them.
ALL_READS: tuple[tuple[str, float], ...] = (
    ("knowledge_search_passages", 0.5),
    ("knowledge_get_edges_by_group", 0.5),
    ("knowledge_get_episodes", 0.5),
    ("knowledge_get_entity_timeline", 0.5),
    ("knowledge_get_changes", 0.5),
    ("knowledge_query_cypher", 1.0),
)
CYPHER_READS = (
    "MATCH (e:Entity) RETURN e.name ORDER BY e.name LIMIT 10",
    "MATCH (a:Entity)-[:RELATES_TO]->(f:Fact) RETURN count(f)",
    "MATCH (f:Fact) WHERE f.expired_at IS NULL RETURN f.name, f.fact LIMIT 20",
    "MATCH (m:Meta) RETURN m.key ORDER BY m.key LIMIT 5",
)
WRITE_SHARE = 0.2
NAME_POOL = 200  # names the writes update (besides the seeded ones)
PREDICATES = ("works_with", "mentions", "depends_on")
# Triples the relationship writes re-assert. Drawn from all 300 x 300 x 3 seeded triples, as
# before, the writes added ~1,000 new facts per 10 minutes: growth of the data, not a leak.
TRIPLE_POOL = 200
PER_METHOD = tuple(m for m, _ in READS)  # --per-method: each read of the mix, in isolation


def _rss_mb(pid: int) -> float:
    """The server's resident memory now, in MiB (0.0 once it has exited)."""
    return rss_kb(pid).get("VmRSS", 0) / 1024


def _start(
    work: Path, sock_path: Path, engine: str | None = None
) -> tuple[subprocess.Popen[bytes], Any]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env["LCG_HOME"] = str(work / ".lcg")
    if engine:
        env["LCG_EMBEDDED_STORE"] = engine
    stderr = (work / "serve.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcg.cli", "serve", "--socket", str(sock_path)],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
    )
    deadline = time.monotonic() + 60
    while True:
        try:
            c = Conn(sock_path)
            try:
                if c.call("health_check", {})["result"]["state"] == "healthy":
                    return proc, stderr
            finally:
                c.close()
        except (OSError, KeyError):
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("service did not become healthy")
        time.sleep(0.05)


def _seed(sock_path: Path, n: int) -> list[str]:
    c = Conn(sock_path)
    uuids = []
    for i in range(n):
        res = c.call(
            "knowledge_assert_entity", {"name": f"seed {i}", "summary": f"seeded entity {i}"}
        )
        uuids.append(res["result"]["entity_uuid"])
        if i:
            c.call(
                "knowledge_assert_relationship",
                {"source_name": f"seed {i - 1}", "target_name": f"seed {i}", "predicate": "next"},
            )
    c.close()
    return uuids


ROW_COUNTS = ("entity_count", "relationship_count", "episode_count")


def _rows(sock_path: Path) -> dict[str, int]:
    """The graph's row counts from `knowledge_status`: entities, facts (relationships), episodes."""
    c = Conn(sock_path)
    try:
        status = c.call("knowledge_status", {})["result"]
    finally:
        c.close()
    return {k: int(status.get(k) or 0) for k in ROW_COUNTS}


def _request(
    rng: random.Random,
    uuids: list[str],
    seeded: int,
    write_share: float,
    reads: tuple[tuple[str, float], ...] = READS,
) -> tuple[str, dict[str, Any]]:
    if rng.random() < write_share:
        if rng.random() < 0.75:
            n = rng.randrange(NAME_POOL)
            return "knowledge_assert_entity", {
                "name": f"pool {n}",
                "summary": f"pool entity {n}, revision {rng.randrange(5)}",
            }
        n = rng.randrange(TRIPLE_POOL)  # triple n: seed n -> seed 7n+1, one of the predicates
        return "knowledge_assert_relationship", {
            "source_name": f"seed {n % seeded}",
            "target_name": f"seed {(7 * n + 1) % seeded}",
            "predicate": PREDICATES[n % len(PREDICATES)],
        }
    method = rng.choices([m for m, _ in reads], [w for _, w in reads])[0]
    return method, _read_params(method, rng, uuids, seeded)


def _read_params(method: str, rng: random.Random, uuids: list[str], seeded: int) -> dict[str, Any]:
    word = f"seed {rng.randrange(seeded)}"
    params: dict[str, Any] = {
        "knowledge_status": {},
        "knowledge_list_entities": {"num_results": 20},
        "knowledge_find_entities": {"query": word, "num_results": 10},
        "knowledge_find_relationships": {"query": word, "num_results": 10},
        "knowledge_get_nodes_by_group": {"group_ids": ["liminis"]},
        "knowledge_get_entity_neighbors": {"entity_uuid": rng.choice(uuids)},
        "knowledge_list_relationships": {"num_results": 20},
        "knowledge_get_context": {"query": word, "token_budget": 500},
        "knowledge_search_passages": {"query": word},
        "knowledge_get_edges_by_group": {"group_ids": ["liminis"]},
        "knowledge_get_episodes": {"group_ids": ["liminis"], "last_n": 10},
        "knowledge_get_entity_timeline": {"name": word},
        "knowledge_get_changes": {"group_ids": ["liminis"], "since": "2020-01-01T00:00:00Z"},
        "knowledge_query_cypher": {"query": rng.choice(CYPHER_READS)},
    }[method]
    return params


def _soak(args: argparse.Namespace, proc: subprocess.Popen[bytes], sock_path: Path) -> None:
    uuids = _seed(sock_path, args.seed)
    reads = READS + ALL_READS if args.all_reads else READS
    duration = args.minutes * 60
    warmup = min(args.warmup_minutes * 60, duration)
    counts: dict[str, int] = {}
    errors: list[str] = []
    lock = threading.Lock()
    stop = threading.Event()

    def client(worker: int) -> None:
        rng = random.Random(worker)
        conn = Conn(sock_path)
        mine: dict[str, int] = {}
        bad: list[str] = []
        while not stop.is_set():
            method, params = _request(rng, uuids, args.seed, args.write_share, reads)
            try:
                answer = conn.call(method, params)
            except (OSError, ValueError, RuntimeError) as exc:
                bad.append(f"{method}: {exc}")
                break
            mine[method] = mine.get(method, 0) + 1
            if "error" in answer:
                bad.append(f"{method}: {answer['error']}")
        conn.close()
        with lock:
            for m, n in mine.items():
                counts[m] = counts.get(m, 0) + n
            errors.extend(bad)

    samples: list[tuple[float, float]] = []
    threads = [threading.Thread(target=client, args=(w,)) for w in range(args.clients)]
    rows_start = _rows(sock_path)
    rows_warm: dict[str, int] | None = None
    started = time.monotonic()
    samples.append((0.0, _rss_mb(proc.pid)))
    for t in threads:
        t.start()
    while (elapsed := time.monotonic() - started) < duration:
        time.sleep(min(args.sample_seconds, max(0.0, duration - elapsed)))
        samples.append((time.monotonic() - started, _rss_mb(proc.pid)))
        if rows_warm is None and samples[-1][0] >= warmup:
            rows_warm = _rows(sock_path)  # the sample nearest the warm-up's end
    stop.set()
    for t in threads:
        t.join(180)
    wall = time.monotonic() - started
    rows_end = _rows(sock_path)
    rows_warm = rows_warm or rows_end

    def at(t: float) -> float:
        return min(samples, key=lambda s: abs(s[0] - t))[1]

    after_warmup, end = at(warmup), samples[-1][1]
    window = samples[-1][0] - min(samples, key=lambda s: abs(s[0] - warmup))[0]
    growth = (end - after_warmup) / after_warmup * 100 if after_warmup else 0.0
    # Checkpoints free memory in steps (a saw-tooth of tens of MB), so two single samples
    # depend on where in a tooth they fall: also compare the median of the minute after the
    # warm-up with the median of the last minute.
    first = [r for t, r in samples if warmup <= t < warmup + 60] or [after_warmup]
    last = [r for t, r in samples if t >= samples[-1][0] - 60] or [end]
    first_median, last_median = statistics.median(first), statistics.median(last)
    total = sum(counts.values())
    every = max(1, round(30 / args.sample_seconds))
    added = {k: rows_end[k] - rows_warm[k] for k in ROW_COUNTS}
    added_rows = sum(added.values())
    print(
        json.dumps(
            {
                "engine": args.engine or "default",
                "all_reads": args.all_reads,
                "minutes": args.minutes,
                "warmup_minutes": warmup / 60,
                "clients": args.clients,
                "seeded_entities": args.seed,
                "mix": {"reads": round(1 - args.write_share, 2), "writes": args.write_share},
                "requests_total": total,
                "throughput_rps": round(total / wall, 1),
                "per_method_count": dict(sorted(counts.items())),
                "errors": len(errors),
                "error_samples": errors[:5],
                "rss_mb_start": round(samples[0][1], 1),
                "rss_mb_after_warmup": round(after_warmup, 1),
                "rss_mb_end": round(end, 1),
                "rss_mb_max": round(max(r for _, r in samples), 1),
                "growth_window_minutes": round(window / 60, 2),
                "growth_after_warmup_pct": round(growth, 2),
                "flat_within_5_pct": growth <= 5.0,
                "rss_mb_median_first_minute_after_warmup": round(first_median, 1),
                "rss_mb_median_last_minute": round(last_median, 1),
                "growth_of_minute_medians_pct": round(
                    (last_median - first_median) / first_median * 100, 2
                ),
                # How much the graph grew: RSS growth with rows added is partly the data.
                "rows_at_start": rows_start,
                "rows_after_warmup": rows_warm,
                "rows_at_end": rows_end,
                "rows_added_after_warmup": added,
                "rss_kb_per_row_added_after_warmup": (
                    round((end - after_warmup) * 1024 / added_rows, 2) if added_rows else None
                ),
                "rss_mb_samples_30s": [round(r, 1) for _, r in samples[::every]],
                "cpus": os.cpu_count(),
            },
            indent=2,
        )
    )


def _per_method(args: argparse.Namespace, proc: subprocess.Popen[bytes], sock_path: Path) -> None:
    uuids = _seed(sock_path, args.seed)
    conn = Conn(sock_path)
    rng = random.Random(0)
    out: dict[str, Any] = {"calls_per_method": args.per_method, "seeded_entities": len(uuids)}
    for method in PER_METHOD:
        for _ in range(200):  # warm every path and cache first
            conn.call(method, _read_params(method, rng, uuids, len(uuids)))
        before = _rss_mb(proc.pid)
        errors = 0
        for _ in range(args.per_method):
            errors += "error" in conn.call(method, _read_params(method, rng, uuids, len(uuids)))
        after = _rss_mb(proc.pid)
        out[method] = {
            "rss_mb_before": round(before, 1),
            "rss_mb_after": round(after, 1),
            "growth_mb": round(after - before, 1),
            "errors": errors,
        }
    conn.close()
    print(json.dumps(out, indent=2))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--warmup-minutes", type=float, default=2.0)
    ap.add_argument("--clients", type=int, default=8)
    ap.add_argument("--seed", type=int, default=300)
    ap.add_argument("--sample-seconds", type=float, default=5.0)
    ap.add_argument("--write-share", type=float, default=WRITE_SHARE)
    ap.add_argument("--per-method", type=int, default=0, metavar="N")
    ap.add_argument("--all-reads", action="store_true", help="every read method, Cypher too")
    ap.add_argument("--engine", choices=("ladybug", "kuzu"), default=None)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lcg-soak-"))
    sock_dir = Path(tempfile.mkdtemp(dir="/tmp", prefix="lcg-"))
    sock_path = sock_dir / "s.sock"
    proc, stderr = _start(work, sock_path, args.engine)
    try:
        if args.per_method:
            _per_method(args, proc, sock_path)
        else:
            _soak(args, proc, sock_path)
        proc.send_signal(signal.SIGTERM)
        proc.wait(60)
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
