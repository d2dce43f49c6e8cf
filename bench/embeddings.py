"""Embedding benchmarks: batched vs one-text-per-request HTTP embedding, and a backfill.

1. The OpenAI-compatible embedder against the scripted server on loopback: texts/s and requests
   for batch size 1 (what the reference does) and the default 64.
2. `knowledge_backfill_summary_embeddings` after an embedder change (hash-384 -> hash-256) on a
   graph of N entities with summaries: first run (rewrites 2N rows; the search index's load at
   open may have put their vectors in the cache already), second run (nothing to do).
3. The on-disk embedding cache with `--cache-rows` 384-d vectors already in its file: the time
   to open it, and to embed the first new text after opening (which appends to it) and a second.

Prints one JSON object. Run:
    .venv/bin/python bench/embeddings.py [--texts 1000] [--entities 1000] [--cache-rows 300000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import numpy as np

from lcg import Settings, open_engine
from lcg.embedding import HashEmbedder
from lcg.embedding.cache import CachedEmbedder
from lcg.embedding.http import Endpoint, connect_http
from lcg.service.registry import dispatch
from lcg.testing.scripted_embeddings import ScriptedEmbeddingServer


def http_throughput(n_texts: int) -> dict[str, Any]:
    texts = [f"sentence {i} about the Apollo program and its crews" for i in range(n_texts)]
    out: dict[str, Any] = {}
    with ScriptedEmbeddingServer(dim=384) as server:
        for batch in (1, 64):
            embedder = connect_http(
                Endpoint(url=server.url), model=None, dim=None, batch_size=batch
            )
            before = server.count
            started = time.perf_counter()
            embedder.embed(texts)
            seconds = time.perf_counter() - started
            out[f"batch_{batch}"] = {
                "texts_per_s": round(n_texts / seconds, 1),
                "requests": server.count - before,
                "seconds": round(seconds, 3),
            }
    out["speedup"] = round(out["batch_64"]["texts_per_s"] / out["batch_1"]["texts_per_s"], 2)
    return out


async def backfill(n_entities: int, home: Path) -> dict[str, Any]:
    def settings(dim: int) -> Settings:
        return Settings.for_home(home, embedder="hash", embedding_dim=dim)

    engine = open_engine(settings(384))
    try:
        for i in range(n_entities):
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": f"Entity {i}", "summary": f"Entity {i} is part of the benchmark."},
            )
    finally:
        engine.close()
    engine = open_engine(settings(256))
    try:
        started = time.perf_counter()
        first = await dispatch(engine, "knowledge_backfill_summary_embeddings", {})
        first_s = time.perf_counter() - started
        started = time.perf_counter()
        second = await dispatch(engine, "knowledge_backfill_summary_embeddings", {})
        second_s = time.perf_counter() - started
    finally:
        engine.close()
    return {
        "rows": first["scanned"],
        "first_run": {"embedded": first["embedded"], "seconds": round(first_s, 3)},
        "first_run_rows_per_s": round(first["scanned"] / first_s, 1),
        "second_run": {"embedded": second["embedded"], "seconds": round(second_s, 3)},
    }


def cache_open_and_append(rows: int, directory: Path) -> dict[str, Any]:
    """Open a cache file of `rows` random vectors, then embed two new texts one by one."""
    inner = HashEmbedder(384)
    record = np.dtype([("h", "S16"), ("v", "<f4", (384,))])
    data = np.zeros(rows, dtype=record)
    data["h"] = [i.to_bytes(16, "big") for i in range(rows)]
    data["v"] = np.random.default_rng(0).standard_normal((rows, 384), dtype=np.float32)
    data.tofile(directory / f"{inner.identity.model}-384.f32")
    del data
    started = time.perf_counter()
    cache = CachedEmbedder(inner, directory)
    opened = time.perf_counter() - started
    appends = []
    for text in ("the first new text", "a second new text"):
        started = time.perf_counter()
        cache.embed([text])
        appends.append(time.perf_counter() - started)
    return {
        "rows": rows,
        "open_s": round(opened, 3),
        "first_new_text_ms": round(appends[0] * 1000, 2),
        "second_new_text_ms": round(appends[1] * 1000, 2),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--entities", type=int, default=1000)
    parser.add_argument("--cache-rows", type=int, default=300_000)
    args = parser.parse_args()
    result: dict[str, Any] = {"http": http_throughput(args.texts)}
    with tempfile.TemporaryDirectory() as tmp:
        result["backfill"] = anyio.run(backfill, args.entities, Path(tmp) / ".lcg")
    with tempfile.TemporaryDirectory() as tmp:
        result["cache"] = cache_open_and_append(args.cache_rows, Path(tmp))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
