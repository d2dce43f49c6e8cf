"""Float32 stores of sparse vectors held dimension-major (lcg.search.vectors, layout
`f32-sparse`) answer exactly what the document-major float32 scan answers: the same documents,
in the same order, with the same cosines to the bit, whatever the floor, k and filter, ties at
the k-th place included; through documents added after the change, a replacement, removals, a
renumbering compaction, a save (written document-major, as an `f32` store) and a load."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from lcg.search import vectors as vectors_mod
from lcg.search.partition import Partition
from lcg.search.text import Vocabulary
from lcg.search.vectors import Vectors

DIM = 64
N = 1500


def unit(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    return (rows / np.maximum(norms, 1e-12)).astype(np.float32)


def sparse(rng: np.random.Generator, count: int) -> np.ndarray:
    """Rows with ~8 of 64 cells non-zero, like the hash embedder's; a fifth of them repeat
    earlier rows (equal cosines: ties), and non-negative cells, as the hash embedder's."""
    rows = np.abs(rng.standard_normal((count, DIM))) * (rng.random((count, DIM)) < 0.125)
    rows[:, 0] += 1e-3
    rows = unit(rows)
    copies = rng.choice(count, count // 5, replace=False)
    rows[copies] = rows[rng.integers(0, count, len(copies))]
    return rows


def build(rows: np.ndarray, present: np.ndarray) -> Partition:
    part = Partition(Vocabulary(), ["v"], DIM)
    part.add([f"d{i}" for i in range(len(rows))], ["x"] * len(rows), {"v": (rows, present)})
    part.compact()
    return part


def same(mine: Partition, theirs: Partition, rng: np.random.Generator) -> None:
    a, b = mine.view(), theirs.view()
    assert a.uuids[: a.n] == b.uuids[: b.n]
    va, vb = a.vectors["v"], b.vectors["v"]
    assert va.layout == "f32-sparse" and vb.layout == "f32"
    held = vb.get(np.arange(b.n))
    assert np.array_equal(va.get(np.arange(a.n)), held)
    queries = [held[i] for i in rng.integers(0, b.n, 12)]  # documents' own vectors: ties
    queries += [*sparse(rng, 12), np.zeros(DIM, dtype=np.float32)]
    live = a.live() & a.has_vector["v"]
    masks = [live, live & (np.arange(a.n) % 2 == 0), live & (np.arange(a.n) % 40 == 0)]
    for q in queries:
        assert np.array_equal(va.scan(q), vb.scan(q))
        for floor in (None, -1.0, 0.0, 0.3, 0.6, 0.99):
            for k in (1, 3, 20, 2 * N):
                for mask in masks:
                    docs, sims = va.top(q, k, mask, floor)
                    want_docs, want_sims = vb.top(q, k, mask, floor)
                    assert np.array_equal(docs, want_docs), (floor, k)
                    assert np.array_equal(sims, want_sims), (floor, k)


def test_dimension_major_float32_answers_as_the_document_major_scan(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    rng = np.random.default_rng(11)
    rows = sparse(rng, N)
    present = rng.random(N) > 0.05
    rows[~present] = 0.0  # an absent vector is a zero row

    def major(yes: bool) -> None:  # `theirs` is never arranged: document-major throughout
        monkeypatch.setattr(vectors_mod, "DIMENSION_MAJOR_MIN_ROWS", 1000 if yes else 10**9)

    major(False)
    theirs = build(rows, present)
    major(True)
    mine = build(rows, present)
    same(mine, theirs, rng)

    for part in (mine, theirs):  # the same writes to both
        major(part is mine)
        extra = sparse(np.random.default_rng(12), 40)
        ones = np.ones(40, dtype=bool)
        part.add([f"n{i}" for i in range(40)], ["x"] * 40, {"v": (extra, ones)})
        part.add(["d7"], ["x"], {"v": (extra[:1], ones[:1])})
        part.remove([f"d{i}" for i in range(100, 200)])
    same(mine, theirs, rng)
    for part in (mine, theirs):  # renumbers: 101 dead documents
        major(part is mine)
        part.compact()
    same(mine, theirs, rng)

    major(True)
    mine.save(tmp_path)
    meta = json.loads((tmp_path / "partition.json").read_text())
    assert meta["vectors"]["v"] == {"layout": "f32"}  # the snapshot format is unchanged
    loaded = Partition(Vocabulary(), ["v"], DIM)
    loaded.load(tmp_path)
    same(loaded, theirs, rng)


def test_dense_vectors_and_small_stores_stay_document_major(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors_mod, "DIMENSION_MAJOR_MIN_ROWS", 1000)
    rng = np.random.default_rng(13)
    dense = build(unit(rng.standard_normal((N, DIM))), np.ones(N, dtype=bool))
    assert dense.view().vectors["v"].layout == "f32"
    small = build(sparse(rng, 999), np.ones(999, dtype=bool))
    assert small.view().vectors["v"].layout == "f32"


def test_quantising_a_dimension_major_store_equals_quantising_the_document_major_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(vectors_mod, "DIMENSION_MAJOR_MIN_ROWS", 1000)
    rng = np.random.default_rng(14)
    rows = sparse(rng, N)
    present = np.ones(N, dtype=bool)
    mine, theirs = Vectors(DIM), Vectors(DIM)
    mine.adopt(np.concatenate([rows, np.zeros((100, DIM), dtype=np.float32)]))
    theirs.adopt(np.concatenate([rows, np.zeros((100, DIM), dtype=np.float32)]))
    mine.arrange(N, present)
    assert mine.layout == "f32-sparse" and mine.capacity == theirs.capacity == N + 100
    mine.quantize(N, present)
    theirs.quantize(N, present)
    assert mine.layout == theirs.layout == "sparse"
    a, b = mine.view(N), theirs.view(N)
    assert np.array_equal(a.rows, b.rows) and np.array_equal(a.scale, b.scale)
