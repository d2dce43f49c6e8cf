"""Benchmark hybrid search (lcg.search); prints one JSON object.

    python bench/search.py [--sizes 10000,100000] [--queries 200]

For each size N: N entities and 1.5 N facts (plus N/10 episodes, each the provenance of 15
facts) over 5 groups are written as WAL files in the engine's record format and bulk-loaded by
a cold open (no database yet). Then:

- index build: `SearchIndex.warm()` from the database and the embedding cache (what every open
  does after catch-up), timed on its own, and the process RSS after it;
- latency (p50/p95 ms, one client, in-process `dispatch`) of `knowledge_find_entities`,
  `knowledge_find_relationships`, `knowledge_search_passages` and, when registered,
  `knowledge_get_context`; unfiltered and filtered to one group, with the median CPU time of
  the process per call (`cpu_p50_ms`: on a shared machine, the part of the wall time that is
  this process's own work) and the slowest of the 10 warm-up calls before them
  (`warmup_max_ms`). Query texts are 1-3 words drawn
  from the same Zipf-distributed vocabulary as the data. Each call includes embedding its query;
  the query embedding alone (hash embedder) is reported separately. `knowledge_get_context`
  runs only the first 30 queries. The machine's load average is printed: the latency targets
  assume an otherwise idle machine;
- the process RSS after the queries and the rows the search row cache holds then
  (lcg.search.rows: the rows of search hits kept in memory).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from common import percentile_ms, rss_mb
from fixtures import Text
from lcg import Settings, open_engine
from lcg.admin import status as admin_status
from lcg.embedding.hashing import HashEmbedder
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import REGISTRY, dispatch
from lcg.wal.records import entity_op, episode_op, fact_op
from lcg.wal.writer import Wal

GROUPS = [f"team-{i}" for i in range(5)]
CONTEXT_QUERIES = 30  # knowledge_get_context does much more per call (expansion, packing)


def write_wal(settings: Settings, n_entities: int, text: Text) -> None:
    rng = text.rng
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    base = datetime(2020, 1, 1, tzinfo=UTC)
    per_group = n_entities // len(GROUPS)
    for gi, group in enumerate(GROUPS):
        ents = [
            Entity(
                str(uuid.uuid4()),
                group,
                f"{' '.join(text.words_(2)).title()} {gi * per_group + i}",
                ("Entity", rng.choice(["Person", "Place", "Thing", "Org"])),
                text.sentence(14),
                created_at=base,
            )
            for i in range(per_group)
        ]
        for start in range(0, len(ents), 2000):
            wal.append(group, [entity_op(e) for e in ents[start : start + 2000]])
        # Each fact names the episode it came from (15 facts an episode), so the reads that
        # return facts look their provenance up, as they do on an ingested graph.
        ep_uuids = [str(uuid.uuid4()) for _ in range(per_group // 10)]
        facts = []
        for i in range(per_group * 3 // 2):
            a, b = rng.randrange(per_group), rng.randrange(per_group)
            when = base + timedelta(hours=i)
            ended = rng.random() < 0.2
            facts.append(
                Fact(
                    str(uuid.uuid4()),
                    group,
                    ents[a].uuid,
                    ents[b].uuid,
                    rng.choice(["WORKS_WITH", "LOCATED_IN", "PART_OF", "OWNS"]),
                    text.sentence(12),
                    episodes=(ep_uuids[i // 15 % len(ep_uuids)],),
                    valid_at=when,
                    invalid_at=when + timedelta(days=30) if ended else None,
                    expired_at=when + timedelta(days=30) if ended else None,
                    created_at=when,
                )
            )
        for start in range(0, len(facts), 2000):
            wal.append(group, [fact_op(f) for f in facts[start : start + 2000]])
        eps = [
            episode_op(
                Episode(
                    ep_uuids[i],
                    group,
                    f"chunk-{i}",
                    text.sentence(60),
                    source_description=f"notes/{i}.md",
                    created_at=base + timedelta(hours=i),
                    valid_at=base + timedelta(hours=i),
                )
            )
            for i in range(per_group // 10)
        ]
        for start in range(0, len(eps), 2000):
            wal.append(group, eps[start : start + 2000])
    wal.close()


def bench_size(n: int, queries: int) -> dict[str, Any]:
    text = Text(random.Random(n))
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings.for_home(Path(tmp))
        started = time.perf_counter()
        write_wal(settings, n, text)
        write_s = time.perf_counter() - started
        started = time.perf_counter()
        engine = open_engine(settings, embedder=HashEmbedder())
        open_s = time.perf_counter() - started
        try:
            index = engine.parts.search
            index.reset()
            started = time.perf_counter()
            index.warm()
            build_s = time.perf_counter() - started
            rss = rss_mb()
            index_mb = round(index.nbytes() / 2**20, 1)
            qrng = random.Random(7)
            texts = [" ".join(text.words_(qrng.randint(1, 3))) for _ in range(queries)]
            started = time.perf_counter()
            for q in texts:
                index.embed_query(q)
            embed_ms = (time.perf_counter() - started) / len(texts) * 1000

            methods: dict[str, dict[str, Any]] = {
                "knowledge_find_entities": {},
                "knowledge_find_relationships": {},
                "knowledge_search_passages": {"min_score": 0.0},
            }
            notes = []
            if "knowledge_get_context" in REGISTRY:
                methods["knowledge_get_context"] = {}
            else:
                notes.append("knowledge_get_context is not registered: skipped")

            async def measure(
                name: str, extra: dict[str, Any], qs: list[str]
            ) -> tuple[list[float], list[float]]:
                wall, cpu = [], []
                for q in qs:
                    params = {"query": q, **extra}
                    start, start_cpu = time.perf_counter(), time.process_time()
                    await dispatch(engine, name, params)
                    wall.append(time.perf_counter() - start)
                    cpu.append(time.process_time() - start_cpu)
                return wall, cpu

            latency: dict[str, Any] = {}
            for name, extra in methods.items():
                row: dict[str, Any] = {}
                for label, groups in (("unfiltered", None), ("one_group", [GROUPS[0]])):
                    params = dict(extra)
                    if groups is not None:
                        params["group_ids"] = groups
                    qs = texts if name != "knowledge_get_context" else texts[:CONTEXT_QUERIES]
                    # warm-up (first touches: lazy loads, rows read whole, lcg.search.rows)
                    first, _ = anyio.run(measure, name, params, texts[:10])
                    times, cpu = anyio.run(measure, name, params, qs)
                    row[label] = {
                        "p50_ms": percentile_ms(times, 0.5),
                        "p95_ms": percentile_ms(times, 0.95),
                        "cpu_p50_ms": percentile_ms(cpu, 0.5),
                        "cpu_p95_ms": percentile_ms(cpu, 0.95),
                        "warmup_max_ms": percentile_ms(first, 1.0),
                    }
                row["filtered_over_unfiltered_p50"] = round(
                    row["one_group"]["p50_ms"] / max(row["unfiltered"]["p50_ms"], 1e-9), 2
                )
                latency[name] = row
            status = anyio.run(admin_status.status, engine)
            rss_after = rss_mb()
            cached_rows = {f: len(c) for f, c in (index.rows or {}).items()}
        finally:
            engine.close()
    return {
        "entities": status["entity_count"],
        "facts": status["relationship_count"],
        "episodes": status["episode_count"],
        "groups": len(GROUPS),
        "wal_write_s": round(write_s, 2),
        "cold_open_s": round(open_s, 2),
        "index_build_s": round(build_s, 3),
        "rss_mb_after_build": rss,
        "rss_mb_after_queries": rss_after,
        "row_cache_rows": cached_rows,
        "index_arrays_mb": index_mb,
        "query_embedding_ms": round(embed_ms, 3),
        "latency": latency,
        "notes": notes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="entity counts, comma-separated")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    started = time.perf_counter()
    results = {str(n): bench_size(n, args.queries) for n in (int(s) for s in args.sizes.split(","))}
    print(
        json.dumps(
            {
                "bench": "search",
                "queries_per_case": args.queries,
                "sizes": results,
                "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
                "total_s": round(time.perf_counter() - started, 1),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
