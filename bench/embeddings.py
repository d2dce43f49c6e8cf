"""Embedding benchmarks: batched vs one-text-per-request HTTP embedding, and a backfill.

1. The OpenAI-compatible embedder against the scripted server on loopback: texts/s and requests
   for batch size 1 (what the reference does) and the default 64.
2. `knowledge_backfill_summary_embeddings` after an embedder change (hash-384 -> hash-256) on a
   graph of N entities with summaries: first run (rewrites 2N rows; the search index's load at
   open may have put their vectors in the cache already), second run (nothing to do).
4. `--onnx-model DIR` (repeat it to compare models; or LCG_EMBEDDING_MODEL_PATH; needs
   `lcg[embeddings]`): the ONNX embedder's cost on entity and fact texts (the names, summaries
   and fact sentences of bench/relevance_extraction.json, batched as `embed` batches them), ms
   per text, medians of `--repeats` runs interleaved across models and configurations (the
   machine is shared and its load moves), for each run configuration of ONNX_CONFIGS (ONNX
   Runtime intra-op threads 1 or 2, spinning or not; batches run at once 1 or one per usable
   CPU, lcg's default); for the default also per kind of text and per article (an episode's
   texts in one call, as ingestion embeds them). Three clocks: wall (on a shared machine it
   includes waiting for a CPU), CPU of the whole process, and CPU of its busiest thread (what
   the wall time would be on an otherwise idle machine if the threads never waited on each
   other). Also the padding share of the tokens (batched as `embed` does, and in input
   order), the token counts, the load average over the runs, and the cosine of a text's vector
   embedded alone to its batched vector (int8 quantises activations per run).
   `--onnx-reference DIR` adds the cosine of each text's vector to DIR's (min, p1, mean): how
   far a quantised variant (all-MiniLM-L6-v2-int8) moved from the float32 model.
3. The on-disk embedding cache with `--cache-rows` 384-d vectors already in its file: the time
   to open it, and to embed the first new text after opening (which appends to it) and a second.

Prints one JSON object. Run:
    .venv/bin/python bench/embeddings.py [--texts 1000] [--entities 1000] [--cache-rows 300000]
        [--onnx-model DIR ... [--onnx-reference DIR] [--repeats 3]] [--only onnx]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
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


# How a model runs its batches: (ONNX Runtime intra-op threads, batches run at once, spinning).
# The first is lcg's default (lcg.embedding.onnx_provider): one thread per run, never spinning,
# one batch per usable CPU at once.
ONNX_CONFIGS: dict[str, tuple[int, int, bool]] = {
    "intra1_workers_cpus": (1, 0, False),
    "intra1_workers1": (1, 1, False),
    "intra2_workers1": (2, 1, False),
    "intra2_workers1_spinning": (2, 1, True),
}


ALONE = 100  # texts embedded one by one to compare with their batched vectors


def _onnx_texts() -> dict[str, list[str]]:
    fixture = json.loads((Path(__file__).parent / "relevance_extraction.json").read_text())
    kinds: dict[str, list[str]] = {"entity_names": [], "entity_summaries": [], "facts": []}
    for art in fixture["articles"].values():
        kinds["entity_names"] += [e["name"] for e in art["entities"]]
        kinds["entity_summaries"] += [e["summary"] for e in art["entities"]]
        kinds["facts"] += [f["fact"] for f in art["facts"]]
    kinds["all"] = [t for texts in list(kinds.values()) for t in texts]
    return kinds


def _per_article() -> list[list[str]]:
    """Each article's entity names, summaries and facts: what one episode's ingestion embeds."""
    fixture = json.loads((Path(__file__).parent / "relevance_extraction.json").read_text())
    return [
        [e["name"] for e in art["entities"]]
        + [e["summary"] for e in art["entities"]]
        + [f["fact"] for f in art["facts"]]
        for art in fixture["articles"].values()
    ]


def _thread_cpu() -> dict[int, float]:
    """CPU seconds (user + system) of each thread of this process, by thread id."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[int, float] = {}
    for task in Path("/proc/self/task").iterdir():
        try:
            fields = (task / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended meanwhile
            continue
        out[int(task.name)] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _padding(counts: list[int], batches: list[list[int]]) -> float:
    """The share of padding tokens when each batch is padded to its longest text."""
    padded = sum(len(b) * max(counts[i] for i in b) for b in batches)
    return round(1 - sum(counts) / padded, 3)


def onnx_cost(
    directories: list[Path], repeats: int = 3, reference: Path | None = None
) -> dict[str, Any]:
    """ms per entity/fact text for each ONNX model directory and run configuration
    (ONNX_CONFIGS), wall and CPU time, runs interleaved across models and configurations (the
    machine is shared: its load moves), medians over `repeats`; with `reference` (another
    model directory, e.g. the float32 model for its int8 variant), the cosine of each text's
    vector to the reference's vector, per model."""
    from lcg.embedding.onnx_provider import OnnxEmbedder, load_onnx

    kinds = _onnx_texts()
    articles = _per_article()
    cpus = len(os.sched_getaffinity(0))
    embedders: dict[str, dict[str, OnnxEmbedder]] = {}
    for directory in directories:
        runs: dict[str, OnnxEmbedder] = {}
        for config, (intra, workers, spinning) in ONNX_CONFIGS.items():
            embedder = load_onnx(
                directory,
                None,
                batch_size=64,
                intra_op_threads=intra,
                spinning=spinning,
                workers=workers,
            )
            embedder.embed(kinds["all"][:64])  # warm: the session's first runs allocate
            runs[config] = embedder
        embedders[embedder.identity.model] = runs

    samples: dict[tuple[str, str], list[tuple[float, float, float]]] = {}
    loads: list[float] = []

    def timed(key: tuple[str, str], run: Callable[[], int]) -> None:
        threads, wall, cpu = _thread_cpu(), time.perf_counter(), time.process_time()
        n = run()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        after = _thread_cpu()
        busiest = max(after[t] - threads.get(t, 0.0) for t in after)
        samples.setdefault(key, []).append((1000 * wall / n, 1000 * cpu / n, 1000 * busiest / n))
        loads.append(os.getloadavg()[0])

    def embed_all(embedder: OnnxEmbedder, texts: list[str]) -> Callable[[], int]:
        return lambda: len(embedder.embed(texts))

    def embed_articles(embedder: OnnxEmbedder) -> Callable[[], int]:
        return lambda: sum(len(embedder.embed(texts)) for texts in articles)

    first = next(iter(ONNX_CONFIGS))
    for _ in range(repeats):
        for model, runs in embedders.items():
            for config, embedder in runs.items():
                timed((model, config), embed_all(embedder, kinds["all"]))
            default = runs[first]
            timed((model, "per_article"), embed_articles(default))
            for kind, texts in kinds.items():
                if kind != "all":
                    timed((model, kind), embed_all(default, texts))

    def summary(key: tuple[str, str]) -> dict[str, float]:
        walls, cpu_times, busiest = zip(*samples[key], strict=True)
        return {
            "wall_ms_per_text": round(float(np.median(walls)), 2),
            "cpu_ms_per_text": round(float(np.median(cpu_times)), 2),
            "busiest_thread_cpu_ms_per_text": round(float(np.median(busiest)), 2),
        }

    any_runs = next(iter(embedders.values()))
    counts = any_runs[first].token_counts(kinds["all"])
    size = len(any_runs[first].plan(counts)[0])
    out: dict[str, Any] = {
        "usable_cpus": cpus,
        "repeats": repeats,
        "texts": len(kinds["all"]),
        "articles": len(articles),
        "tokens": {
            "median": int(np.median(counts)),
            "p90": int(np.percentile(counts, 90)),
            "max": max(counts),
        },
        "padding_token_sorted": _padding(counts, any_runs[first].plan(counts)),
        "padding_input_order": _padding(
            counts,
            [list(range(i, min(i + size, len(counts)))) for i in range(0, len(counts), size)],
        ),
        "configs": {
            c: f"intra-op threads {i}, {w or cpus} batches at once, spinning {s}"
            for c, (i, w, s) in ONNX_CONFIGS.items()
        },
        "loadavg_1m": {
            "median": round(float(np.median(loads)), 2),
            "min": round(min(loads), 2),
            "max": round(max(loads), 2),
        },
    }
    models: dict[str, Any] = {}
    for model, runs in embedders.items():
        entry: dict[str, Any] = {c: summary((model, c)) for c in ONNX_CONFIGS}
        entry["per_article"] = summary((model, "per_article"))
        entry.update({k: summary((model, k)) for k in kinds if k != "all"})
        # Dynamic int8 quantisation scales activations per run: a text's vector depends a
        # little on the texts it is batched with (float32: not at all).
        batched = runs[first].embed(kinds["all"])[:ALONE]
        alone = np.stack([runs[first].embed([t])[0] for t in kinds["all"][:ALONE]])
        cosine = (batched * alone).sum(axis=1)
        entry["cosine_alone_to_batched"] = {
            "texts": ALONE,
            "min": round(float(cosine.min()), 4),
            "mean": round(float(cosine.mean()), 4),
        }
        if reference is not None:
            ours = runs[first].embed(kinds["all"])
            theirs = load_onnx(reference, None, batch_size=64).embed(kinds["all"])
            cosine = (ours * theirs).sum(axis=1)
            entry["cosine_to_reference"] = {
                "reference": str(reference),
                "min": round(float(cosine.min()), 4),
                "p1": round(float(np.percentile(cosine, 1)), 4),
                "mean": round(float(cosine.mean()), 4),
            }
        models[model] = entry
    out["models"] = models
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--texts", type=int, default=1000)
    parser.add_argument("--entities", type=int, default=1000)
    parser.add_argument("--cache-rows", type=int, default=300_000)
    parser.add_argument(
        "--onnx-model",
        action="append",
        help="an ONNX model directory (repeat to compare; default LCG_EMBEDDING_MODEL_PATH)",
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--onnx-reference", help="a model directory to compare vectors with")
    parser.add_argument("--only", choices=("onnx",))
    args = parser.parse_args()
    if not args.onnx_model and os.environ.get("LCG_EMBEDDING_MODEL_PATH"):
        args.onnx_model = [os.environ["LCG_EMBEDDING_MODEL_PATH"]]
    if args.only == "onnx" and not args.onnx_model:
        parser.error("--only onnx needs --onnx-model DIR (or LCG_EMBEDDING_MODEL_PATH)")
    result: dict[str, Any] = {}
    if args.onnx_model:
        reference = Path(args.onnx_reference) if args.onnx_reference else None
        result["onnx"] = onnx_cost(
            [Path(d) for d in args.onnx_model], repeats=args.repeats, reference=reference
        )
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
