"""The ranking math of hybrid search, as pure functions over numpy arrays.

- BM25 (Okapi, k1=1.2, b=0.75 as in Kuzu's full-text search), with collection statistics summed
  over every partition a query reads, so scores from different groups are comparable;
- exact top-k by `argpartition`;
- reciprocal-rank fusion (score `sum 1/(k + rank)`, 0-based ranks, ties by uuid ascending, as
  the reference fuses full-text and vector hits; optionally weighted per list);
- maximal marginal relevance over unit vectors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["K1", "B", "bm25_idf", "bm25_scores", "cosines", "mmr", "rrf", "top_k"]

K1 = 1.2
B = 0.75

Floats = npt.NDArray[np.float64]
Ints = npt.NDArray[np.int64]
Mask = npt.NDArray[np.bool_]


def bm25_idf(n_docs: int, df: Ints) -> Floats:
    """Okapi idf, floored at a small positive value so a term in every document still counts."""
    idf = np.log1p((n_docs - df + 0.5) / (df + 0.5))
    return np.maximum(idf, 1e-6)


def bm25_scores(
    n: int,
    postings: Sequence[tuple[Ints, Ints, float]],
    doc_len: Ints,
    avgdl: float,
) -> Floats:
    """Scores of documents 0..n-1 for terms given as (doc ids, term frequencies, idf)."""
    if not postings or avgdl <= 0:
        return np.zeros(n)
    docs = np.concatenate([p[0] for p in postings])
    tf = np.concatenate([p[1] for p in postings]).astype(np.float64)
    idf = np.concatenate([np.full(len(p[0]), p[2]) for p in postings])
    norm = K1 * (1.0 - B + B * doc_len[docs] / avgdl)
    weights = idf * tf * (K1 + 1.0) / (tf + norm)
    return np.bincount(docs, weights=weights, minlength=n).astype(np.float64)


def cosines(matrix: npt.NDArray[np.float32], vector: npt.NDArray[np.float32]) -> Floats:
    """`matrix @ vector` for unit rows, without BLAS.

    numpy's OpenBLAS runs a matrix-vector product on several threads; on a loaded 2-core
    machine those threads wait for each other, and a 2,000 x 384 product measured 21 ms instead
    of 0.07 ms single-threaded. einsum's own SIMD loop is single-threaded and close to
    single-threaded BLAS at every size, and it leaves the process-wide BLAS setting alone.
    """
    out: Floats = np.einsum("ij,j->i", matrix, vector).astype(np.float64)
    return out


def top_k(scores: Floats, k: int, mask: Mask | None = None, floor: float | None = None) -> Ints:
    """Indices of the k best scores (descending; ties by index), among `mask` and above `floor`."""
    eligible = np.ones(len(scores), dtype=bool) if mask is None else mask.copy()
    if floor is not None:
        eligible &= scores > floor
    idx = np.flatnonzero(eligible)
    if k <= 0 or not len(idx):
        return np.zeros(0, dtype=np.int64)
    if len(idx) > k:
        part = np.argpartition(-scores[idx], k - 1)[:k]
        idx = idx[part]
    order = np.lexsort((idx, -scores[idx]))
    return idx[order].astype(np.int64)


def rrf(
    rankings: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None
) -> list[tuple[str, float]]:
    """Reciprocal-rank fusion of ranked uuid lists: (uuid, score), best first, ties by uuid.
    `weights`: one per list (default 1 each), multiplying its `1 / (k + rank)` terms."""
    fused: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else weights[i]
        for rank, uuid in enumerate(ranking):
            fused[uuid] = fused.get(uuid, 0.0) + w / (k + rank)
    return sorted(fused.items(), key=lambda item: (-item[1], item[0]))


def mmr(
    relevance: Floats, vectors: npt.NDArray[np.float32], limit: int, lam: float
) -> list[tuple[int, float]]:
    """Maximal marginal relevance: pick `limit` of the candidates, trading relevance for novelty.

    `relevance` is rescaled to [0, 1]; each step picks the candidate maximising
    `lam * relevance - (1 - lam) * max cosine to those already picked`. Returns (candidate index,
    score) in pick order; scores are made non-increasing so that higher still means better.
    """
    n = len(relevance)
    if n == 0 or limit <= 0:
        return []
    top = float(relevance.max())
    rel = relevance / top if top > 0 else np.zeros(n)
    sims = np.einsum("ij,kj->ik", vectors, vectors) if len(vectors) else np.zeros((n, n))
    closest = np.full(n, -np.inf)
    free = np.ones(n, dtype=bool)
    out: list[tuple[int, float]] = []
    last = np.inf
    for _ in range(min(limit, n)):
        penalty = np.where(np.isfinite(closest), closest, 0.0)
        value = np.where(free, lam * rel - (1.0 - lam) * penalty, -np.inf)
        pick = int(np.argmax(value))
        last = min(last, float(value[pick]))
        out.append((pick, last))
        free[pick] = False
        closest = np.maximum(closest, sims[pick])
    return out
