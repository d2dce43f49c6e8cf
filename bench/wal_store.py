"""Benchmark the write path, the WAL and rebuild; prints one JSON object.

    python bench/wal_store.py [--asserts 1000] [--episodes 5000] [--opens 5]

1. Assert throughput from one client: `knowledge_assert_entity` then
   `knowledge_assert_relationship` through the method registry (validation, embedding, one
   transaction, one WAL fsync per call), in a fresh workspace.
2. WAL bytes per entity and per fact, from the lines those calls wrote.
3. Rebuild throughput: a WAL of `--episodes` ingested episodes (each: 4 entity upserts, 4 fact
   upserts, the episode, its mentions: 10 operations, so 5,000 episodes = 50,000 operations)
   written with the WAL writer in the engine's own record format, then (a) a cold open on no
   database (startup catch-up: bulk fold + COPY + embedding with the hash embedder, nothing
   cached yet), (b) `lcg rebuild` of every group on the live engine (purge, fold, COPY; vectors
   come from the embedding cache) and (c)
   `knowledge_rebuild_from_wal` with `force_clear` called once per group.
4. Open time of a populated database that needs no replay (median of `--opens`).
5. The WAL codec alone, on that WAL (median of `--opens`, wall and CPU time): encoding every
   line again (`encode_line`, as an append does before its write) and reading every group's
   stream (`iter_records`, what replay, catch-up, rebuild and export read through) — the cost
   of the line checksum, written and checked, lives here.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

from fixtures import WORDS, sentence, write_wal
from lcg import Settings, open_engine
from lcg.admin import rebuild
from lcg.admin import status as admin_status
from lcg.service.registry import Context, dispatch
from lcg.storage.store import delete_database_files
from lcg.wal.layout import group_dir
from lcg.wal.reader import iter_records
from lcg.wal.records import Op, encode_line


def bench_asserts(home: Path, count: int) -> dict[str, float]:
    rng = random.Random(1)
    settings = Settings.for_home(home)
    engine = open_engine(settings)
    names = [f"{rng.choice(WORDS).title()} {rng.choice(WORDS).title()} {i}" for i in range(count)]

    async def run() -> tuple[float, float]:
        start = time.perf_counter()
        for name in names:
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": name, "summary": sentence(rng, 14), "labels": ["Person"]},
            )
        entities = time.perf_counter() - start
        start = time.perf_counter()
        for i in range(count):
            await dispatch(
                engine,
                "knowledge_assert_relationship",
                {
                    "source_name": names[i],
                    "target_name": names[(i * 7 + 1) % count],
                    "predicate": "WORKED_WITH",
                    "fact": sentence(rng, 12),
                    "valid_at": "1969-07-16T13:32:00Z",
                },
            )
        return entities, time.perf_counter() - start

    try:
        ent_s, fact_s = anyio.run(run)
    finally:
        engine.close()
    sizes: dict[str, list[int]] = {"entity.upsert": [], "fact.upsert": []}
    for path in settings.wal_dir.rglob("*.jsonl"):
        for line in path.read_bytes().splitlines(keepends=True):
            op = json.loads(line)["op"]
            if op in sizes:
                sizes[op].append(len(line))
    return {
        "assert_entities_per_s": round(count / ent_s, 1),
        "assert_facts_per_s": round(count / fact_s, 1),
        "wal_bytes_per_entity": round(statistics.mean(sizes["entity.upsert"]), 1),
        "wal_bytes_per_fact": round(statistics.mean(sizes["fact.upsert"]), 1),
    }


def bench_rebuild(home: Path, episodes: int, opens: int) -> dict[str, float]:
    settings = Settings.for_home(home)
    started = time.perf_counter()
    ops = write_wal(settings, episodes)
    write_s = time.perf_counter() - started

    started = time.perf_counter()
    engine = open_engine(settings)  # no database: startup catch-up replays every group
    cold_s = time.perf_counter() - started
    status = anyio.run(admin_status.status, engine)
    assert all(g["hydration_status"] == "hydrated" for g in status["wal_groups"].values()), status
    counts = {k: status[k] for k in ("entity_count", "relationship_count", "episode_count")}

    async def rebuild_all() -> float:  # what `lcg rebuild` does: every group in one call
        start = time.perf_counter()
        results = await rebuild.rebuild_groups(engine, engine.parts.wal.groups(), force_clear=True)
        assert all(r["failed_lines"] == 0 for r in results), results
        return time.perf_counter() - start

    async def rebuild_each() -> float:  # knowledge_rebuild_from_wal once per group
        start = time.perf_counter()
        for group in engine.parts.wal.groups():
            result = await dispatch(  # with a progress sink: the synchronous (streaming) form
                engine,
                "knowledge_rebuild_from_wal",
                {"group_id": group, "force_clear": True},
                Context(progress=lambda frame: None),
            )
            assert result["failed_lines"] == 0, result
        return time.perf_counter() - start

    try:
        rebuild_s = anyio.run(rebuild_all)
        each_s = anyio.run(rebuild_each)
        after = anyio.run(admin_status.status, engine)
        assert {k: after[k] for k in counts} == counts, (after, counts)
    finally:
        engine.close()

    open_times = []
    for _ in range(opens):
        started = time.perf_counter()
        engine = open_engine(settings)
        open_times.append(time.perf_counter() - started)
        engine.close()
    wal_bytes = sum(p.stat().st_size for p in settings.wal_dir.rglob("*.jsonl"))
    codec = bench_codec(settings, opens)
    delete_database_files(settings.db_path)
    return {
        **codec,
        "wal_ops": ops,
        "wal_bytes": wal_bytes,
        "wal_write_ops_per_s": round(ops / write_s, 1),
        "cold_open_replay_s": round(cold_s, 3),
        "cold_open_replay_ops_per_s": round(ops / cold_s, 1),
        "rebuild_all_groups_s": round(rebuild_s, 3),
        "rebuild_all_groups_ops_per_s": round(ops / rebuild_s, 1),
        "rebuild_from_wal_per_group_s": round(each_s, 3),
        "rebuild_from_wal_per_group_ops_per_s": round(ops / each_s, 1),
        "graph": counts,
        "db_open_s_median": round(statistics.median(open_times), 4),
    }


def bench_codec(settings: Settings, runs: int) -> dict[str, float]:
    """Encode and read back every line of the WAL under `settings`, `runs` times."""
    directories = [group_dir(settings.wal_dir, g) for g in ("g0", "g1", "g2")]
    records = [r for d in directories for r in iter_records(d)]
    timings: dict[str, list[tuple[float, float]]] = {"encode": [], "read": []}
    for _ in range(max(runs, 1)):
        wall, cpu = time.perf_counter(), time.process_time()
        for r in records:
            encode_line(r.seq, r.ts, Op(r.op, r.data), r.more, r.at or 0, r.commit)
        timings["encode"].append((time.perf_counter() - wall, time.process_time() - cpu))
        wall, cpu = time.perf_counter(), time.process_time()
        for d in directories:
            for _ in iter_records(d):
                pass
        timings["read"].append((time.perf_counter() - wall, time.process_time() - cpu))
    out: dict[str, float] = {"codec_lines": len(records)}
    for name, runs_of in timings.items():
        out[f"codec_{name}_s_median"] = round(statistics.median(w for w, _ in runs_of), 4)
        out[f"codec_{name}_cpu_s_median"] = round(statistics.median(c for _, c in runs_of), 4)
        out[f"codec_{name}_lines_per_s"] = round(len(records) / out[f"codec_{name}_s_median"], 1)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--asserts", type=int, default=1000)
    parser.add_argument("--episodes", type=int, default=5000)
    parser.add_argument("--opens", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        result = {"python": sys.version.split()[0]}
        result.update(bench_asserts(Path(tmp) / "asserts" / ".lcg", args.asserts))
        result.update(bench_rebuild(Path(tmp) / "rebuild" / ".lcg", args.episodes, args.opens))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
