"""Benchmark the ingestion pipeline on the Apollo corpus; prints one JSON object.

    python bench/ingest.py [--articles 228] [--latency-articles 8,32] [--offline-only]

The LLM is a real OpenAI-compatible HTTP server (lcg.testing.scripted_llm, in a process of its
own) whose answers come from the heuristic extractor run on the episode text inside each prompt
(lcg.testing.heuristic_llm), so resolution, dedup and supersession candidates do real work; the
embedder is `hash`.

1. Zero-latency run over all articles, one at a time, via `knowledge_process_chunk`: per-episode
   engine time (the call's wall time minus the time the model server spent on its requests, as
   the server measures it: lcg's own prompt building and reply parsing count as engine time),
   LLM calls per episode, and LLM input
   characters per article character — median/p95 and first 10 vs last 10, to show they stay flat
   as the graph grows.
2. Throughput with a simulated 1 s LLM latency per call at LCG_EXTRACTION_CONCURRENCY 1 and 8,
   on the first `--latency-articles` articles (a subset: at 1 s a call the full corpus would take
   minutes), all submitted at once — with the default settings (articles up to
   LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS characters take one call, longer ones two) and, for
   comparison, at concurrency 8 with two calls for every article.
3. `offline`: the same articles, one at a time, with the offline heuristic extractor
   (`extractor="heuristic"`: no model, no server), per-episode engine time as lcg reports it
   (`timings.engine_s`; no model time to subtract) and the process's CPU time per call
   (`engine_cpu_ms`). `--offline-only` runs this part alone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio

from common import ms, percentile, store_settings
from fixtures import articles, chunk, llm_server, scripted_client
from lcg import Settings, open_engine
from lcg.service.registry import dispatch

CORPUS = Path(__file__).resolve().parents[1] / "examples" / "apollo" / "corpus_prose.jsonl"
START = datetime(2020, 1, 1, tzinfo=UTC)


async def _sequential(home: Path, corpus: list[dict[str, Any]]) -> dict[str, Any]:
    settings = Settings.for_home(home, embedder="hash", **store_settings())
    engine_s: list[float] = []
    server_s: list[float] = []
    reported_s: list[float] = []
    calls: list[int] = []
    prompt_chars: list[int] = []
    article_chars: list[int] = []
    with llm_server(0.0) as server:
        engine = open_engine(settings, llm=scripted_client(server))
        try:
            started = time.perf_counter()
            for i, article in enumerate(corpus):
                before = server.served_s()
                t0 = time.perf_counter()
                result = await dispatch(engine, "knowledge_process_chunk", chunk(i, article))
                wall_s = time.perf_counter() - t0
                served = server.served_s() - before
                # lcg's time: the call's wall time minus what the model server spent on it
                # (lcg's request building, HTTP client and reply parsing count as lcg's).
                engine_s.append(wall_s - served)
                server_s.append(served)
                reported_s.append(result["timings"]["engine_s"])
                calls.append(result["cost"]["llm_calls"])
                prompt_chars.append(
                    sum(s["input_chars"] for s in result["cost"]["stages"].values())
                )
                article_chars.append(len(article["prose"]))
            wall = time.perf_counter() - started
            status = await dispatch(engine, "knowledge_status", {})
        finally:
            engine.close()
    quarters = [range(q * len(corpus) // 4, (q + 1) * len(corpus) // 4) for q in range(4)]
    return {
        "articles": len(corpus),
        "wall_s": round(wall, 2),
        "engine_ms": {
            "median": ms(statistics.median(engine_s)),
            "p95": ms(percentile(engine_s, 0.95)),
            "first10_median": ms(statistics.median(engine_s[:10])),
            "last10_median": ms(statistics.median(engine_s[-10:])),
            "median_by_quarter": [ms(statistics.median(engine_s[i] for i in q)) for q in quarters],
        },
        # What the model server spent per episode, measured by the server itself.
        "llm_server_ms": {
            "median": ms(statistics.median(server_s)),
            "p95": ms(percentile(server_s, 0.95)),
        },
        # lcg's own timings.engine_s (wall minus the whole client.complete() time), for contrast.
        "reported_engine_ms_median": ms(statistics.median(reported_s)),
        "llm_calls_per_episode": round(sum(calls) / len(calls), 3),
        # Characters of all prompts sent / characters of the articles they were about.
        "input_chars_per_article_char": {
            "all": round(sum(prompt_chars) / sum(article_chars), 3),
            "first10": round(sum(prompt_chars[:10]) / sum(article_chars[:10]), 3),
            "last10": round(sum(prompt_chars[-10:]) / sum(article_chars[-10:]), 3),
            "by_quarter": [
                round(sum(prompt_chars[i] for i in q) / sum(article_chars[i] for i in q), 3)
                for q in quarters
            ],
        },
        "graph": {
            "entities": status["entity_count"],
            "facts": status["relationship_count"],
            "episodes": status["episode_count"],
        },
    }


async def _offline(home: Path, corpus: list[dict[str, Any]]) -> dict[str, Any]:
    settings = Settings.for_home(home, embedder="hash", extractor="heuristic", **store_settings())
    engine = open_engine(settings)
    engine_s: list[float] = []
    cpu_s: list[float] = []
    facts: list[int] = []
    try:
        started = time.perf_counter()
        for i, article in enumerate(corpus):
            cpu = time.process_time()
            result = await dispatch(engine, "knowledge_process_chunk", chunk(i, article))
            cpu_s.append(time.process_time() - cpu)
            engine_s.append(result["timings"]["engine_s"])
            facts.append(result["edges_extracted"])
        wall = time.perf_counter() - started
        status = await dispatch(engine, "knowledge_status", {})
    finally:
        engine.close()
    return {
        "articles": len(corpus),
        "wall_s": round(wall, 2),
        "engine_ms": {
            "median": ms(statistics.median(engine_s)),
            "p95": ms(percentile(engine_s, 0.95)),
            "first10_median": ms(statistics.median(engine_s[:10])),
            "last10_median": ms(statistics.median(engine_s[-10:])),
        },
        # CPU seconds of the whole process (all its threads) per call: on a shared machine,
        # less sensitive than wall time to what other processes do.
        "engine_cpu_ms": {
            "median": ms(statistics.median(cpu_s)),
            "p95": ms(percentile(cpu_s, 0.95)),
        },
        "facts_per_episode": round(sum(facts) / len(facts), 3),
        "graph": {
            "entities": status["entity_count"],
            "facts": status["relationship_count"],
            "episodes": status["episode_count"],
        },
    }


async def _count_calls(engine: Any, params: dict[str, Any], calls: list[int]) -> None:
    result = await dispatch(engine, "knowledge_process_chunk", params)
    calls.append(result["cost"]["llm_calls"])


async def _throughput(
    home: Path, corpus: list[dict[str, Any]], concurrency: int, **overrides: Any
) -> dict[str, Any]:
    settings = Settings.for_home(
        home,
        embedder="hash",
        extraction_concurrency=concurrency,
        **store_settings(),
        **overrides,
    )
    calls: list[int] = []
    with llm_server(1.0) as server:
        engine = open_engine(settings, llm=scripted_client(server))
        try:
            started = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for i, article in enumerate(corpus):
                    tg.start_soon(_count_calls, engine, chunk(i, article), calls)
            wall = time.perf_counter() - started
        finally:
            engine.close()
    return {
        "concurrency": concurrency,
        "single_call_max_chars": settings.extraction_single_call_max_chars,
        "articles": len(corpus),
        "llm_latency_s": 1.0,
        "llm_calls": sum(calls),
        "wall_s": round(wall, 2),
        "episodes_per_s": round(len(corpus) / wall, 3),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--articles", type=int, default=228)
    parser.add_argument(
        "--latency-articles",
        default="8,32",
        help="articles for the 1 s latency runs at concurrency 1 and 8",
    )
    parser.add_argument("--offline-only", action="store_true", help="only the offline run")
    args = parser.parse_args()
    few, many = (int(x) for x in args.latency_articles.split(","))
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        out: dict[str, Any] = {"benchmark": "ingest", "corpus": str(CORPUS.name)}
        out["offline"] = await _offline(root / "offline", articles(args.articles))
        if args.offline_only:
            print(json.dumps(out, indent=2))
            return
        out["zero_latency"] = await _sequential(root / "seq", articles(args.articles))
        out["latency_1s"] = [
            await _throughput(root / "c1", articles(few), 1),
            await _throughput(root / "c8", articles(many), 8),
            await _throughput(
                root / "c8-two", articles(many), 8, extraction_single_call_max_chars=0
            ),
        ]
        out["note"] = (
            "engine time = wall time of each knowledge_process_chunk call minus the time the "
            "model server spent serving its requests (measured by the server, per request); "
            "lcg's request building, HTTP client and reply parsing count as engine time; "
            "reported_engine_ms_median is lcg's own timings.engine_s, which subtracts the whole "
            "client.complete() time instead; the 1 s latency runs use the first articles only (subset sizes "
            "in 'articles'); with two dependent calls per episode at 1 s each, throughput is "
            "bounded by concurrency/2 episodes per second, with one call by concurrency"
        )
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    anyio.run(main)
