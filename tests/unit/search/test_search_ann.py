"""Large partitions keep their vectors in an int8 HNSW graph (lcg.search.ann): the vector half of
hybrid search against exact float32 search over the same documents (recall >= 0.95), with
filters, documents added after the graph was built, replacements, removals and a renumbering
compaction; and the float32 rows are dropped once the graph holds them."""

from __future__ import annotations

import numpy as np
import pytest

from lcg.search import ann as ann_mod
from lcg.search.hybrid import _cosine
from lcg.search.partition import Partition
from lcg.search.text import Vocabulary

# The graphs need the `ann` extra (the dev extra, and so CI, installs it).
pytest.importorskip("usearch")

DIM = 32
N = 3000


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=-1, keepdims=True)).astype(np.float32)


@pytest.fixture
def small_graphs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ann_mod, "ANN_MIN_ROWS", 1000)
    monkeypatch.setattr(ann_mod, "_EXACT_BELOW", 100)  # filters keeping more search the graph


def exact(
    vectors: dict[str, np.ndarray], query: np.ndarray, allowed: set[str], k: int
) -> list[str]:
    ranked = sorted(
        (u for u in vectors if u in allowed), key=lambda u: (-float(vectors[u] @ query), u)
    )
    return ranked[:k]


def recall(found: list[str], truth: list[str]) -> float:
    return len(set(found) & set(truth)) / max(1, len(truth))


def test_graph_search_matches_exact_search(small_graphs: None) -> None:
    rng = np.random.default_rng(5)
    part = Partition(Vocabulary(), ["v"], DIM)
    uuids = [f"d{i}" for i in range(N)]
    rows = unit(rng.standard_normal((N, DIM)))
    part.add(uuids, ["x"] * N, {"v": (rows, np.ones(N, dtype=bool))}, bulk=True)
    part.compact()
    view = part.view()
    assert set(view.ann) == {"v"} and "v" not in view.vectors  # the float32 rows are gone
    model = dict(zip(uuids, rows, strict=True))

    # Writes after the graph exists: new documents, a replacement, removals.
    extra = unit(rng.standard_normal((50, DIM)))
    part.add([f"n{i}" for i in range(50)], ["x"] * 50, {"v": (extra, np.ones(50, dtype=bool))})
    model.update({f"n{i}": extra[i] for i in range(50)})
    moved = unit(rng.standard_normal((1, DIM)))
    part.add(["d7"], ["x"], {"v": (moved, np.ones(1, dtype=bool))})
    model["d7"] = moved[0]
    part.remove([f"d{i}" for i in range(100, 200)])
    for i in range(100, 200):
        del model[f"d{i}"]

    def check(min_recall: float) -> None:
        view = part.view()
        queries = unit(rng.standard_normal((40, DIM)))
        queries[:5] = model["d7"]  # the replaced vector is found under its new value
        total = []
        for q in queries:
            for keep_every in (1, 2, 40):  # no filter, half the documents, a selective one
                allowed = {u for u in model if int(u[1:]) % keep_every == 0}
                mask = view.live() & np.array([u in allowed for u in view.uuids[: view.n]])
                hits = _cosine([("g", view)], [mask], ["v"], q, 20, -1.0)
                found = [h[0] for h in hits]
                assert set(found) <= allowed  # filters hold exactly
                total.append(recall(found, exact(model, q, allowed, 20)))
                sims = [h[3] for h in hits]
                assert sims == sorted(sims, reverse=True)
        assert float(np.mean(total)) >= min_recall
        assert _cosine([("g", view)], [view.live()], ["v"], model["d7"], 1, -1.0)[0][0] == "d7"

    check(0.95)
    part.compact()  # a third of nothing: renumbers (100 dead), a new graph
    check(0.95)


def test_small_partitions_stay_exact() -> None:
    rng = np.random.default_rng(6)
    part = Partition(Vocabulary(), ["v"], DIM)
    rows = unit(rng.standard_normal((200, DIM)))
    part.add([f"d{i}" for i in range(200)], ["x"] * 200, {"v": (rows, np.ones(200, dtype=bool))})
    part.compact()
    view = part.view()
    assert not view.ann
    q = rows[3]
    hits = _cosine([("g", view)], [view.live()], ["v"], q, 5, -1.0)
    expected = sorted(range(200), key=lambda i: (-float(rows[i] @ q), i))[:5]
    assert [h[0] for h in hits] == [f"d{i}" for i in expected]
