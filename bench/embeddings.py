"""Embedding benchmarks: batched vs one-text-per-request HTTP embedding, and a backfill.

1. The OpenAI-compatible embedder against the scripted server on loopback: texts/s and requests
   for batch size 1 (what the reference does) and the default 64.
2. `knowledge_backfill_summary_embeddings` after an embedder change (hash-384 -> hash-256) on a
   graph of N entities with summaries: first run (rewrites 2N rows; the search index's load at
   open may have put their vectors in the cache already), second run (nothing to do).
4. `--onnx-model DIR` (or LCG_EMBEDDING_MODEL_PATH; needs `lcg[embeddings]`): the ONNX
   embedder's cost on entity and fact texts (the names, summaries and fact sentences of
   bench/relevance_extraction.json, sorted and batched as ingestion does), ms per text in wall
   and CPU time, median of 3 runs, with 1 worker and with the default (one per usable CPU).
   Wall time on a shared machine includes waiting for the CPU; CPU time does not.
   `--onnx-reference DIR` adds the cosine of each text's vector to DIR's (min, p1, mean): how
   far a quantised variant (all-MiniLM-L6-v2-int8) moved from the float32 model.
3. The on-disk embedding cache with `--cache-rows` 384-d vectors already in its file: the time
   to open it, and to embed the first new text after opening (which appends to it) and a second.

Prints one JSON object. Run:
    .venv/bin/python bench/embeddings.py [--texts 1000] [--entities 1000] [--cache-rows 300000]
        [--onnx-model DIR [--onnx-reference DIR]] [--only onnx]
"""

from __future__ import annotations

import argparse
import json
import os
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


def onnx_cost(directory: Path, repeats: int = 3, reference: Path | None = None) -> dict[str, Any]:
    """ms per entity/fact text with the ONNX embedder, wall and CPU, per kind of text and
    worker count; with `reference` (another model directory, e.g. the float32 model for its
    int8 variant), the cosine of each text's vector to the reference's vector."""
    from lcg.embedding.onnx_provider import load_onnx

    fixture = json.loads((Path(__file__).parent / "relevance_extraction.json").read_text())
    kinds: dict[str, list[str]] = {"entity_names": [], "entity_summaries": [], "facts": []}
    for art in fixture["articles"].values():
        kinds["entity_names"] += [e["name"] for e in art["entities"]]
        kinds["entity_summaries"] += [e["summary"] for e in art["entities"]]
        kinds["facts"] += [f["fact"] for f in art["facts"]]
    kinds["all"] = [t for texts in list(kinds.values()) for t in texts]
    embedder = load_onnx(directory, None, batch_size=64)
    embedder.embed(kinds["all"][:64])  # warm: the session's first runs allocate

    def measure(texts: list[str], threads: int) -> dict[str, Any]:
        embedder.threads = threads
        walls, cpus = [], []
        for _ in range(repeats):
            wall, cpu = time.perf_counter(), time.process_time()
            embedder.embed(texts)
            walls.append(time.perf_counter() - wall)
            cpus.append(time.process_time() - cpu)
        wall_s, cpu_s = float(np.median(walls)), float(np.median(cpus))
        return {
            "texts": len(texts),
            "wall_ms_per_text": round(1000 * wall_s / len(texts), 2),
            "cpu_ms_per_text": round(1000 * cpu_s / len(texts), 2),
            "texts_per_s": round(len(texts) / wall_s, 1),
        }

    workers = len(os.sched_getaffinity(0))
    out: dict[str, Any] = {"usable_cpus": workers, "workers": workers}
    for kind, texts in kinds.items():
        out[kind] = measure(texts, workers)
    if workers != 1:
        out["all_1_worker"] = measure(kinds["all"], 1)
    out["loadavg_1m"] = round(os.getloadavg()[0], 2)
    if reference is not None:
        ours = embedder.embed(kinds["all"])
        theirs = load_onnx(reference, None, batch_size=64).embed(kinds["all"])
        cosine = (ours * theirs).sum(axis=1)
        out["cosine_to_reference"] = {
            "reference": str(reference),
            "min": round(float(cosine.min()), 4),
            "p1": round(float(np.percentile(cosine, 1)), 4),
            "mean": round(float(cosine.mean()), 4),
        }
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--entities", type=int, default=1000)
    parser.add_argument("--cache-rows", type=int, default=300_000)
    parser.add_argument("--onnx-model", default=os.environ.get("LCG_EMBEDDING_MODEL_PATH"))
    parser.add_argument("--onnx-reference", help="a model directory to compare vectors with")
    parser.add_argument("--only", choices=("onnx",))
    args = parser.parse_args()
    if args.only == "onnx" and not args.onnx_model:
        parser.error("--only onnx needs --onnx-model DIR (or LCG_EMBEDDING_MODEL_PATH)")
    result: dict[str, Any] = {}
    if args.onnx_model:
        reference = Path(args.onnx_reference) if args.onnx_reference else None
        result["onnx"] = onnx_cost(Path(args.onnx_model), reference=reference)
    if args.only == "onnx":
        print(json.dumps(result))
        return
    result["http"] = http_throughput(args.texts)
    with tempfile.TemporaryDirectory() as tmp:
        result["backfill"] = anyio.run(backfill, args.entities, Path(tmp) / ".lcg")
    with tempfile.TemporaryDirectory() as tmp:
        result["cache"] = cache_open_and_append(args.cache_rows, Path(tmp))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
