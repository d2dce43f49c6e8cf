"""The vector half of search alone (lcg.search.vectors) on up to 1M real vectors; prints JSON.

    python bench/vector_scan.py --cache-file FILE [--rows 1000000] [--embedder hash|synthetic]
                                [--queries 40]

FILE is an embedding cache file (`<home>/embeddings/<model>-<dim>.f32`, e.g. of
bench/scale.py's 1M workspace) of the hash embedder; its first `--rows` vectors are the
documents (`--embedder synthetic`: turned by bench/scale.py's fixed rotation into dense
vectors). Queries are 1-3 words of bench/search.py's vocabulary, as bench/scale.py asks. For
the float32 store (exact, as before int8) and the int8 store: bytes held, p50/p95 wall and CPU
time of one top-30 (no filter), and the int8 store's recall@10 / @30 against float32 exact
search (the share of hits whose float32 cosine is at least the exact k-th one).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np

from common import percentile_ms
from fixtures import SyntheticEmbedder, Text
from lcg.embedding.hashing import HashEmbedder
from lcg.search import vectors as vectors_mod
from lcg.search.vectors import Vectors

K = 30


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache-file", type=Path, required=True)
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--embedder", choices=["hash", "synthetic"], default="hash")
    parser.add_argument("--queries", type=int, default=40)
    args = parser.parse_args()
    dim = 384
    record = np.dtype([("h", "S16"), ("v", "<f4", (dim,))])
    data = np.memmap(args.cache_file, dtype=record, mode="r")
    n = min(args.rows, len(data))
    rotation = SyntheticEmbedder()._rotation if args.embedder == "synthetic" else None
    embed = SyntheticEmbedder().embed if rotation is not None else HashEmbedder().embed
    text = Text(random.Random(11))
    queries = embed([" ".join(text.words_(text.rng.randint(1, 3))) for _ in range(args.queries)])

    f32 = Vectors(dim)
    f32.adopt(np.zeros((n, dim), dtype=np.float32))
    exact = np.empty((args.queries, n), dtype=np.float32)
    for lo in range(0, n, 65_536):
        rows = np.asarray(data["v"][lo : min(n, lo + 65_536)], dtype=np.float32)
        if rotation is not None:
            rows = rows @ rotation
        f32.put(lo, rows)
        exact[:, lo : lo + len(rows)] = queries @ rows.T
    present = np.ones(n, dtype=bool)
    out: dict[str, Any] = {"rows": n, "embedder": args.embedder}

    def timed(store: Vectors) -> tuple[dict[str, Any], list[np.ndarray[Any, Any]]]:
        view = store.view(n)
        for q in queries[:3]:  # warm-up
            view.top(q, K, present)
        wall, cpu, found = [], [], []
        for q in queries:
            started, cpu_started = time.perf_counter(), time.process_time()
            docs, _ = view.top(q, K, present)
            wall.append(time.perf_counter() - started)
            cpu.append(time.process_time() - cpu_started)
            found.append(docs)
        figures = {
            "layout": store.layout,
            "mb": round(store.nbytes() / 2**20, 1),
            "top30_p50_ms": percentile_ms(wall, 0.5),
            "top30_p95_ms": percentile_ms(wall, 0.95),
            "top30_p50_cpu_ms": percentile_ms(cpu, 0.5),
        }
        return figures, found

    out["float32"], _ = timed(f32)
    vectors_mod.QUANTIZE_MIN_ROWS = 0
    f32.quantize(n, present)  # the same store, now int8
    out["int8"], found = timed(f32)
    for k in (10, 30):
        shares = []
        for qi, docs in enumerate(found):
            kth = np.sort(exact[qi])[-k]
            shares.append(float(np.mean(exact[qi, docs[:k]] >= kth - 1e-6)))
        out["int8"][f"recall_at_{k}"] = round(statistics.mean(shares), 3)
    out["load_average"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out))


if __name__ == "__main__":
    main()
