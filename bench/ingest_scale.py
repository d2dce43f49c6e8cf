"""Benchmark ingestion's per-episode engine time against the graph's size; prints one JSON object.

    python bench/ingest_scale.py [--preloads 0,100000] [--articles 50] [--same-group]

For each preload size N, a fresh workspace first gets a synthetic graph — N entities, 1.1 N
facts, N/10 episodes mentioning 4 entities each — written as WAL files in the engine's record
format and bulk-loaded by a cold open (the hash embedder adds an Embedding row per entity name,
entity summary, fact and episode). Then the first `--articles` Apollo articles are ingested one
at a time through `knowledge_process_chunk`, exactly as bench/ingest.py does (the scripted LLM
server in its own process, the hash embedder), and the per-episode engine time (wall time minus
LLM wait) is reported as median/p95. The preload goes to a group of its own unless
`--same-group`: the commit path's statements see the whole tables either way, while the
pipeline's group-scoped reads (resolution candidates) then see only the Apollo graph.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio

from common import ms, percentile
from fixtures import articles, chunk, llm_server, scripted_client
from lcg import Settings, open_engine
from lcg.admin import status as admin_status
from lcg.models import DEFAULT_GROUP_ID, Entity, Episode, Fact
from lcg.service.registry import dispatch
from lcg.wal.records import Op, entity_op, episode_op, fact_op
from lcg.wal.writer import Wal

WORDS = [
    "orbit",
    "lunar",
    "module",
    "crew",
    "launch",
    "stage",
    "guidance",
    "booster",
    "capsule",
    "docking",
    "telemetry",
]
BATCH = 2000


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n)).capitalize() + "."


def preload(settings: Settings, n: int, group: str) -> None:
    """Write a synthetic graph of `n` entities (+ facts, episodes, mentions) into the WAL."""
    rng = random.Random(n)
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    base = datetime(2000, 1, 1, tzinfo=UTC)
    ents = [
        Entity(
            str(uuid.uuid4()),
            group,
            f"Synthetic {rng.choice(WORDS)} {i}",
            ("Entity", "Thing"),
            _sentence(rng, 12),
            created_at=base,
        )
        for i in range(n)
    ]
    for start in range(0, n, BATCH):
        wal.append(group, [entity_op(e) for e in ents[start : start + BATCH]])
    facts = [
        fact_op(
            Fact(
                str(uuid.uuid4()),
                group,
                ents[rng.randrange(n)].uuid,
                ents[rng.randrange(n)].uuid,
                "RELATED_TO",
                _sentence(rng, 10),
                valid_at=base + timedelta(hours=i),
                created_at=base + timedelta(hours=i),
            )
        )
        for i in range(n * 11 // 10)
    ]
    for start in range(0, len(facts), BATCH):
        wal.append(group, facts[start : start + BATCH])
    ops: list[Op] = []
    for i in range(n // 10):
        when = base + timedelta(hours=i)
        ep = Episode(
            str(uuid.uuid4()),
            group,
            f"synthetic-{i}",
            _sentence(rng, 40),
            source_description=f"synthetic/{i}.md",
            created_at=when,
            valid_at=when,
        )
        mentioned = list(dict.fromkeys(ents[rng.randrange(n)].uuid for _ in range(4)))
        ops += [episode_op(ep), Op("mentions.add", {"episode": ep.uuid, "entities": mentioned})]
        if len(ops) >= BATCH:
            wal.append(group, ops)
            ops = []
    if ops:
        wal.append(group, ops)
    wal.close()


async def _ingest(engine: Any, corpus: list[dict[str, Any]]) -> list[float]:
    engine_s: list[float] = []
    for i, article in enumerate(corpus):
        result = await dispatch(engine, "knowledge_process_chunk", chunk(i, article))
        engine_s.append(result["timings"]["engine_s"])
    return engine_s


def run(home: Path, n: int, corpus: list[dict[str, Any]], same_group: bool) -> dict[str, Any]:
    settings = Settings.for_home(home, embedder="hash")
    out: dict[str, Any] = {"preload_entities": n}
    if n:
        started = time.perf_counter()
        preload(settings, n, DEFAULT_GROUP_ID if same_group else "preload")
        out["preload_wal_s"] = round(time.perf_counter() - started, 2)
    with llm_server(0.0) as server:
        started = time.perf_counter()
        engine = open_engine(settings, llm=scripted_client(server))
        out["open_s"] = round(time.perf_counter() - started, 2)
        try:
            engine_s = anyio.run(_ingest, engine, corpus)
            status = anyio.run(admin_status.status, engine)
        finally:
            engine.close()
    out["engine_ms"] = {
        "median": ms(statistics.median(engine_s)),
        "p95": ms(percentile(engine_s, 0.95)),
        "first10_median": ms(statistics.median(engine_s[:10])),
        "last10_median": ms(statistics.median(engine_s[-10:])),
    }
    out["graph"] = {
        "entities": status["entity_count"],
        "facts": status["relationship_count"],
        "episodes": status["episode_count"],
    }
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preloads", default="0,100000", help="synthetic entities per run")
    parser.add_argument("--articles", type=int, default=50)
    parser.add_argument("--same-group", action="store_true", help="preload the ingest group")
    args = parser.parse_args()
    corpus = articles(args.articles)
    result: dict[str, Any] = {
        "benchmark": "ingest_scale",
        "articles": len(corpus),
        "preload_group": "same" if args.same_group else "separate",
        "runs": [],
    }
    with tempfile.TemporaryDirectory() as tmp:
        for n in (int(x) for x in args.preloads.split(",")):
            result["runs"].append(run(Path(tmp) / f"p{n}", n, corpus, args.same_group))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
