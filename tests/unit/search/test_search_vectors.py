"""Large partitions hold int8 vectors (lcg.search.vectors): the vector half of hybrid search on
them finds what exact float32 search finds on a fixed set (sparse, hash-embedder-like vectors
and dense, model-like ones; with filters, documents added after quantisation, a replacement,
removals, a renumbering compaction and a save/load round trip), and the float32 rows are gone
(one copy of the vectors, a quarter of their float32 size)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lcg.graph.hybrid import _cosine
from lcg.search import vectors as vectors_mod
from lcg.search.partition import Partition
from lcg.search.text import Vocabulary

DIM = 64
N = 3000


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


def sparse(rng: np.random.Generator, count: int) -> np.ndarray:
    """Rows with ~8 of 64 cells non-zero, like the hash embedder's."""
    rows = rng.standard_normal((count, DIM)) * (rng.random((count, DIM)) < 0.125)
    rows[:, 0] += 1e-3  # no all-zero row
    return unit(rows)


@pytest.fixture
def small_int8(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(vectors_mod, "QUANTIZE_MIN_ROWS", 1000)
    monkeypatch.setattr(vectors_mod, "PREFILTER_MIN_ROWS", 500)  # dense: the sign-bit prefilter


def exact(model: dict[str, np.ndarray], query: np.ndarray, allowed: set[str], k: int) -> list[str]:
    ranked = sorted((u for u in model if u in allowed), key=lambda u: (-float(model[u] @ query), u))
    return ranked[:k]


@pytest.mark.parametrize(("shape", "layout"), [("sparse", "sparse"), ("dense", "dense")])
def test_int8_search_finds_what_float32_search_finds(
    small_int8: None, tmp_path: Path, shape: str, layout: str
) -> None:
    rng = np.random.default_rng(5)

    def rows(count: int) -> np.ndarray:
        return sparse(rng, count) if shape == "sparse" else unit(rng.standard_normal((count, DIM)))

    part = Partition(Vocabulary(), ["v"], DIM)
    uuids = [f"d{i}" for i in range(N)]
    first = rows(N)
    part.add(uuids, ["x"] * N, {"v": (first, np.ones(N, dtype=bool))}, bulk=True)
    part.compact()
    store = part.view().vectors["v"]
    assert store.layout == layout and store.rows.dtype == np.int8  # the float32 rows are gone
    held = store.rows.nbytes + store.scale.nbytes + store.bits.nbytes
    assert held < 0.6 * N * DIM * 4  # spare rows for later documents included
    model = dict(zip(uuids, first, strict=True))

    extra = rows(50)  # written after quantisation
    part.add([f"n{i}" for i in range(50)], ["x"] * 50, {"v": (extra, np.ones(50, dtype=bool))})
    model.update({f"n{i}": extra[i] for i in range(50)})
    moved = rows(1)
    part.add(["d7"], ["x"], {"v": (moved, np.ones(1, dtype=bool))})
    model["d7"] = moved[0]
    part.remove([f"d{i}" for i in range(100, 200)])
    for i in range(100, 200):
        del model[f"d{i}"]

    def check(part: Partition) -> None:
        view = part.view()
        queries = rows(30)
        queries[:3] = model["d7"]  # the replaced vector is found under its new value
        shares = []
        for q in queries:
            for keep_every in (1, 2, 40):  # no filter, half the documents, a selective one
                allowed = {u for u in model if int(u[1:]) % keep_every == 0}
                mask = view.live() & np.array([u in allowed for u in view.uuids[: view.n]])
                hits = _cosine([("g", view)], [mask], ["v"], q, 20, -1.0)
                found = [h[0] for h in hits]
                assert set(found) <= allowed  # filters hold exactly
                truth = exact(model, q, allowed, 20)
                # Found: scoring at least the exact 20th cosine (less the int8 error).
                floor = float(model[truth[-1]] @ q) - 0.02
                shares.append(np.mean([float(model[u] @ q) >= floor for u in found]))
                assert len(found) == len(truth)
                for u, sim in zip(found, (h[3] for h in hits), strict=True):
                    assert abs(sim - float(model[u] @ q)) < 0.02  # cosines close to float32
        assert float(np.mean(shares)) >= 0.99
        top = _cosine([("g", view)], [view.live()], ["v"], model["d7"], 1, -1.0)
        assert top[0][0] == "d7"

    check(part)
    part.compact()  # renumbers (100 dead)
    check(part)
    part.save(tmp_path)
    loaded = Partition(Vocabulary(), ["v"], DIM)
    loaded.load(tmp_path)
    assert loaded.view().vectors["v"].layout == layout
    check(loaded)


def test_small_partitions_keep_exact_float32_vectors() -> None:
    rng = np.random.default_rng(6)
    part = Partition(Vocabulary(), ["v"], DIM)
    rows = unit(rng.standard_normal((200, DIM)))
    part.add([f"d{i}" for i in range(200)], ["x"] * 200, {"v": (rows, np.ones(200, dtype=bool))})
    part.compact()
    view = part.view()
    assert view.vectors["v"].layout == "f32"
    q = rows[3]
    hits = _cosine([("g", view)], [view.live()], ["v"], q, 5, -1.0)
    expected = sorted(range(200), key=lambda i: (-float(rows[i] @ q), i))[:5]
    assert [h[0] for h in hits] == [f"d{i}" for i in expected]
    assert [h[3] for h in hits] == pytest.approx([float(rows[i] @ q) for i in expected], abs=1e-6)
