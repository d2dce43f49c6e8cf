"""BM25, top-k, reciprocal-rank fusion and MMR (lcg.search.scoring) against direct formulas."""

from __future__ import annotations

import math

import numpy as np

from lcg.search.scoring import K1, B, bm25_idf, bm25_scores, cosines, mmr, rrf, top_k


def test_bm25_matches_the_okapi_formula() -> None:
    # docs: 0 = "a a b", 1 = "b", 2 = "c c c c"; query "a b"
    doc_len = np.array([3, 1, 4])
    avgdl = doc_len.mean()
    df = np.array([1, 2])
    idf = bm25_idf(3, df)
    assert math.isclose(idf[0], math.log(1 + (3 - 1 + 0.5) / 1.5))
    postings = [
        (np.array([0]), np.array([2]), float(idf[0])),
        (np.array([0, 1]), np.array([1, 1]), float(idf[1])),
    ]
    got = bm25_scores(3, postings, doc_len, float(avgdl))

    def term(tf: int, dl: int, w: float) -> float:
        return w * tf * (K1 + 1) / (tf + K1 * (1 - B + B * dl / avgdl))

    assert math.isclose(got[0], term(2, 3, idf[0]) + term(1, 3, idf[1]))
    assert math.isclose(got[1], term(1, 1, idf[1]))
    assert got[2] == 0.0
    assert bm25_idf(10, np.array([10]))[0] > 0  # a term in every document still counts


def test_top_k_orders_masks_and_floors() -> None:
    scores = np.array([0.5, 2.0, 2.0, 0.0, 3.0, -1.0])
    assert top_k(scores, 3).tolist() == [4, 1, 2]  # ties by index
    mask = np.array([True, True, False, True, False, True])
    assert top_k(scores, 10, mask, floor=0.0).tolist() == [1, 0]
    assert top_k(scores, 0).tolist() == []
    assert top_k(np.zeros(0), 5).tolist() == []


def test_rrf_sums_reciprocal_ranks_with_uuid_tiebreak() -> None:
    fused = rrf([["a", "b", "c"], ["c", "a"]], k=60)
    scores = dict(fused)
    assert math.isclose(scores["a"], 1 / 60 + 1 / 61)
    assert math.isclose(scores["c"], 1 / 62 + 1 / 60)
    assert [u for u, _ in fused] == ["a", "c", "b"]
    assert [u for u, _ in rrf([["y"], ["x"]])] == ["x", "y"]  # equal scores: uuid ascending


def test_mmr_trades_relevance_for_novelty() -> None:
    same = np.array([1.0, 0.0], dtype=np.float32)
    other = np.array([0.0, 1.0], dtype=np.float32)
    vectors = np.stack([same, same, other])
    relevance = np.array([1.0, 0.95, 0.6])
    picks = mmr(relevance, vectors, 3, lam=0.5)
    assert [i for i, _ in picks] == [0, 2, 1]  # the near-duplicate goes last
    scores = [s for _, s in picks]
    assert scores == sorted(scores, reverse=True)
    assert [i for i, _ in mmr(relevance, vectors, 3, lam=1.0)] == [0, 1, 2]
    assert mmr(np.zeros(0), np.zeros((0, 2), dtype=np.float32), 3, 0.5) == []


def test_cosines_equal_the_matrix_product() -> None:
    rng = np.random.default_rng(1)
    matrix = rng.random((50, 16), dtype=np.float32)
    vector = rng.random(16, dtype=np.float32)
    got = cosines(matrix, vector)
    assert got.dtype == np.float64
    assert np.allclose(got, matrix.astype(np.float64) @ vector.astype(np.float64), rtol=1e-5)
