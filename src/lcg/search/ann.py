"""`Ann`: approximate nearest-neighbour search over one vector kind of a large partition.

An exact cosine scan reads every vector of a partition for every query: at 1M facts that is
1.5 GB of float32 per query (350-830 ms on this 2-core machine) and 3.2 GB of resident vectors
for the workspace. A partition with at least `ANN_MIN_ROWS` documents keeps each vector kind in
an HNSW graph (usearch) over int8-quantised vectors instead: 384 bytes a vector plus its links,
a query visits a few thousand of them.

Keys are document numbers. A replaced or removed document stays in the graph and is filtered
out by the caller's mask (as with the postings); a compaction that renumbers documents builds
a new graph. Filters are applied after the search: the graph is asked for more neighbours than
wanted, and for up to the whole partition when a filter keeps few documents
(`Ann.top`). Cosines are the quantised ones (within ~0.01 of the float32 cosine).

usearch's index is not safe to grow (reallocate) while searched: every call holds the lock.
usearch comes with the `ann` extra (`pip install 'lcg[ann]'`) and is imported only when a graph
is built or loaded, so lcg imports without it while the graphs are off.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt

from lcg.errors import ConfigError

if TYPE_CHECKING:
    from usearch.index import Index

__all__ = ["ANN_MIN_ROWS", "Ann"]

# Partitions of at least this many documents build graphs at their first compaction; 0: none
# does (the default). Measured on bench/scale.py's 100k workspace (hash embedder, 1-3 word
# queries; shared machine): recall@30 against an exact scan of the same vectors 0.68 / 0.80 /
# 0.92 at expansion_search 96 / 256 / 1024 (14 / 19 / 57 ms a query), below the 0.95 issue 21
# asks, and ~3k vectors a CPU-second to build. Until a configuration meets it, search stays
# exact; tests set this to exercise the graphs.
ANN_MIN_ROWS = 0
_CONNECTIVITY = 16
_EXPANSION_ADD = 128
_EXPANSION_SEARCH = 96
# Masks keeping at most this many documents are scanned exactly (the scan reads their
# vectors from the graph); the graph is never asked for more than `_MAX_ASK` neighbours.
_EXACT_BELOW = 20_000
_MAX_ASK = 65_536

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
Vecs = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]


class Ann:
    """One HNSW graph of int8 vectors keyed by document number."""

    def __init__(self, dim: int, index: Index | None = None) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._index = index or _index_class()(
            ndim=dim,
            metric="cos",
            dtype="i8",
            connectivity=_CONNECTIVITY,
            expansion_add=_EXPANSION_ADD,
            expansion_search=_EXPANSION_SEARCH,
        )

    def __len__(self) -> int:
        return len(self._index)

    def add(self, docs: Ints, vectors: Vecs) -> None:
        """Add (or replace) the vectors of documents `docs`."""
        if not len(docs):
            return
        keys = np.asarray(docs, dtype=np.uint64)
        with self._lock:
            if len(self._index):
                present = np.asarray(self._index.contains(keys), dtype=bool).reshape(-1)
                if present.any():
                    self._index.remove(keys[present])
            self._index.add(keys, np.ascontiguousarray(vectors, dtype=np.float32))

    def get(self, docs: Ints) -> Vecs:
        """The vectors of documents that are in the graph, dequantised and scaled back to unit
        length (the int8 rows come back a few percent short)."""
        keys = np.asarray(docs, dtype=np.uint64)
        with self._lock:
            out = self._index.get(keys, dtype="f32")
        mat = np.asarray(out, dtype=np.float32).reshape(len(keys), self.dim)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return np.asarray(mat / np.maximum(norms, 1e-12), dtype=np.float32)

    def top(self, vector: Vecs, k: int, eligible: Mask) -> tuple[Ints, Floats]:
        """Up to `k` documents of `eligible` (a mask over document numbers, all of them in the
        graph) nearest `vector`: (documents, cosines), best first.

        The graph is asked for more neighbours than `k` in proportion to the share the mask
        keeps, and for more again while too few pass it; a mask keeping fewer than
        `_EXACT_BELOW` documents, or one the graph keeps missing, is scanned exactly."""
        allowed = int(eligible.sum())
        total = len(self._index)
        if k <= 0 or total == 0 or allowed == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        if allowed <= _EXACT_BELOW:
            return self.exact(vector, k, np.flatnonzero(eligible))
        want = min(allowed, k)
        ask = min(total, max(4 * k, int(k * total / allowed * 1.5)))
        query = np.ascontiguousarray(vector, dtype=np.float32)
        while ask <= _MAX_ASK:
            with self._lock:
                found = self._index.search(query, ask, threads=1)
            docs = np.asarray(found.keys, dtype=np.int64)
            sims = 1.0 - np.asarray(found.distances, dtype=np.float64)
            inside = docs < len(eligible)
            docs, sims = docs[inside], sims[inside]
            keep = eligible[docs]
            if int(keep.sum()) >= want or ask >= total:
                return docs[keep][:k], sims[keep][:k]
            ask *= 4
        return self.exact(vector, k, np.flatnonzero(eligible))

    def exact(self, vector: Vecs, k: int, docs: Ints) -> tuple[Ints, Floats]:
        """Exact top `k` of `docs` by the quantised vectors' cosine."""
        unit = (vector / max(float(np.linalg.norm(vector)), 1e-12)).astype(np.float32)
        best: list[tuple[Ints, Floats]] = []
        for lo in range(0, len(docs), _EXACT_BELOW):
            part = docs[lo : lo + _EXACT_BELOW]
            sims = np.einsum("ij,j->i", self.get(part), unit).astype(np.float64)
            if len(part) > k:
                pick = np.argpartition(-sims, k - 1)[:k]
                part, sims = part[pick], sims[pick]
            best.append((part, sims))
        docs_all = np.concatenate([b[0] for b in best])
        sims_all = np.concatenate([b[1] for b in best])
        order = np.lexsort((docs_all, -sims_all))[:k]
        return docs_all[order], sims_all[order]

    def nbytes(self) -> int:
        with self._lock:
            return int(self._index.memory_usage)

    def save(self, path: Path) -> None:
        with self._lock:
            self._index.save(str(path))

    @classmethod
    def load(cls, path: Path, dim: int) -> Ann:
        """A graph saved by `save`, read into memory."""
        index = _index_class().restore(str(path), view=False)
        if index is None or index.ndim != dim:
            raise ValueError(f"{path}: not a {dim}-dimension vector index")
        return cls(dim, index)


def _index_class() -> type[Index]:
    """usearch's Index, or a clear error naming the extra that provides it."""
    try:
        from usearch.index import Index
    except ImportError as exc:  # pragma: no cover - the dev and CI environments install it
        raise ConfigError("vector graphs need usearch: pip install 'lcg[ann]'") from exc
    return Index
