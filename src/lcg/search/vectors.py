"""`Vectors`: the vectors of one embedding kind of a search partition, and the scan that ranks
them against a query vector (the vector half of hybrid search).

Row i is document i. A store starts as float32 rows, scanned exactly (einsum). A store of at
least `DIMENSION_MAJOR_MIN_ROWS` rows of sparse content (`layout_for`: lexical embedders such as
the hash embedder) is held dimension-major at a compaction or a load (`arrange`, layout
`f32-sparse`): a query then reads only its non-zero dimensions to bound every document's cosine,
and only the documents whose bound may reach the top k above the floor are scored exactly, by
the same einsum over their rows as the document-major scan, so the result is that scan's to the
bit (at 10k episodes, 30k-row partitions: the scan was ~45% of a context read's CPU). Once its
partition reaches `QUANTIZE_MIN_ROWS` documents (at a compaction, or when loaded), the rows
become int8 with one float32 scale each (`x ~ q * scale`, `scale = max|x| / 127`): a quarter of
the memory, and the float32 rows are dropped, so a workspace's vectors are held once
(at 1M facts the float32 rows were ~3.2 GB and the scan 350-830 ms a query). The int8 rows are
laid out for the vectors they hold, decided at quantisation from the share of non-zero cells:

- `sparse` (lexical embedders such as the hash embedder: ~13% of cells non-zero): one row of
  int8 per dimension (dimension-major). A query only reads the dimensions where it is non-zero
  (a 1-3 word query: ~10-30 of 384), so the scan is exact over the int8 vectors at a tenth of
  the cost of reading them all;
- `dense` (models): document-major int8 rows plus one sign bit per cell. Partitions with at
  least `PREFILTER_MIN_ROWS` eligible documents are ranked by Hamming distance of the sign bits
  first (48 bytes a vector), and the best `_rescored(n, k)` of them rescored exactly on the int8
  rows; smaller ones are scanned exactly on the int8 rows. This half is approximate: its recall
  against float32 exact search is measured by bench/scale.py (`vector_recall_at_30`).

Cosines from int8 rows are within ~0.01 of the float32 ones. Concurrency follows the partition:
writes (`put`, `select`, `quantize`, `load`) happen under its lock and only fill rows beyond a
view's `n` or replace whole arrays, so a `VectorsView` stays consistent without a lock.
"""

from __future__ import annotations

import mmap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from lcg.search.scoring import cosines

__all__ = [
    "DIMENSION_MAJOR_MIN_ROWS",
    "PREFILTER_MIN_ROWS",
    "QUANTIZE_MIN_ROWS",
    "SAMPLE_ROWS",
    "Vectors",
    "VectorsView",
    "layout_for",
]

# Partitions of at least this many documents hold int8 rows (tests lower it).
QUANTIZE_MIN_ROWS = 50_000
# Float32 stores of at least this many rows of sparse content are held dimension-major.
DIMENSION_MAJOR_MIN_ROWS = 4096
# The most the cosine summed over a query's non-zero dimensions (dimension-major) may differ
# from the exact scan's, with room to spare: both sum the same float32 products of unit rows
# (a zero product adds nothing), in different orders, so they differ by rounding alone (at
# most (dim + nnz) * 2**-24, ~3e-5 at 384 dimensions).
_SLACK = 1e-3
# The share of a dimension-major store's documents above which a bounded scan scores them all.
_BOUNDED_SHARE = 0.25
# Dense stores with at least this many eligible documents use the sign-bit prefilter.
PREFILTER_MIN_ROWS = 100_000
_SPARSE_SHARE = 0.5  # at most this share of non-zero cells: the sparse layout
SAMPLE_ROWS = 20_000  # present rows `layout_for` decides from
_BLOCK = 16_384  # documents per block of a scan (the float32 scratch stays in cache)
_NO_MATCH = np.uint16(65535)

Ints = npt.NDArray[np.int64]
Floats = npt.NDArray[np.float64]
F32 = npt.NDArray[np.float32]
I8 = npt.NDArray[np.int8]
U64 = npt.NDArray[np.uint64]
Mask = npt.NDArray[np.bool_]


def _rescored(n: int, k: int) -> int:
    """How many prefilter candidates a dense scan rescores on the int8 rows."""
    return min(n, max(4096, 64 * k, n // 32))


def _quantize(rows: F32) -> tuple[I8, F32]:
    """int8 rows and their scales (a zero row: scale 0, all zeros)."""
    if rows.size:  # max |x| without an |x| temporary the size of `rows`
        peak = np.maximum(rows.max(axis=1), -rows.min(axis=1))
    else:
        peak = np.zeros(len(rows), dtype=np.float32)
    scale = (peak / 127.0).astype(np.float32)
    safe = np.where(scale > 0, scale, 1.0).astype(np.float32)
    work = np.divide(rows, safe[:, None], dtype=np.float32)  # one float32 temporary, in place
    np.rint(work, out=work)
    np.clip(work, -127, 127, out=work)
    return work.astype(np.int8), scale


def layout_for(sample: F32) -> str:
    """The int8 layout of rows whose first present ones are `sample` (the first `SAMPLE_ROWS`
    are looked at): sparse when at most `_SPARSE_SHARE` of their cells are non-zero."""
    sample = sample[:SAMPLE_ROWS]
    nonzero = float(np.count_nonzero(sample)) / max(1, sample.size)
    return "sparse" if nonzero <= _SPARSE_SHARE else "dense"


def _sign_words(rows: F32, words: int) -> U64:
    """The rows' sign bits (1: positive) as `words` 64-bit words a row, dimension-major
    ((words, len(rows)): one contiguous array per word, as the Hamming scan reads them)."""
    packed = np.packbits(rows > 0, axis=1)
    padded = np.zeros((len(rows), words * 8), dtype=np.uint8)
    padded[:, : packed.shape[1]] = packed
    return np.ascontiguousarray(padded.view(np.uint64).T)


def _spare_free(dim: int, capacity: int) -> F32:
    """A zero float32 (dim, capacity) array on an anonymous mapping of its own. numpy advises
    huge pages for large arrays, and a dimension-major array has spare rows at the end of each
    dimension's row: one written row made them resident (a quarter more memory for the spare
    rows of every store); here a page never written is never resident."""
    count = dim * capacity
    buf = mmap.mmap(-1, max(1, 4 * count))
    return np.frombuffer(buf, dtype=np.float32, count=count).reshape(dim, capacity)


def _transposed(rows: F32, n: int) -> F32:
    """`rows` dimension-major, with as many spare rows: the first `n` copied in blocks (about
    twice as fast as one copy), the spare ones left unwritten."""
    out = _spare_free(rows.shape[1], rows.shape[0])
    for lo in range(0, n, 512):
        hi = min(n, lo + 512)
        out[:, lo:hi] = rows[lo:hi].T
    return out


def _top(sims: Floats | F32, k: int, eligible: Mask, floor: float | None) -> Ints:
    """Indices of the k best `sims` among `eligible` and above `floor`, best first (ties by index)."""
    keep = eligible if floor is None else eligible & (sims > floor)
    idx = np.flatnonzero(keep)
    if k <= 0 or not len(idx):
        return np.zeros(0, dtype=np.int64)
    if len(idx) > k:
        part = np.argpartition(-sims[idx], k - 1)[:k]
        idx = idx[part]
    order = np.lexsort((idx, -sims[idx]))
    return cast(Ints, idx[order].astype(np.int64))


@dataclass(frozen=True)
class VectorsView:
    """A read-only snapshot of a store's first `n` rows."""

    n: int
    dim: int
    layout: str  # "f32", "f32-sparse", "sparse" or "dense"
    rows: F32 | I8  # f32/dense: (rows, dim); *sparse: (dim, rows) (a view may hold spare rows)
    scale: F32  # int8 layouts: per row
    bits: U64  # dense: (words, rows)

    def __len__(self) -> int:
        return self.n

    def get(self, docs: Ints) -> F32:
        """The vectors of documents `docs`, as float32 unit rows (int8 ones dequantised)."""
        docs = np.asarray(docs, dtype=np.int64)
        if self.layout == "f32":
            return cast(F32, self.rows[docs])
        if self.layout == "f32-sparse":
            return np.ascontiguousarray(self.rows[:, docs].T, dtype=np.float32)
        q = self.rows[:, docs].T if self.layout == "sparse" else self.rows[docs]
        mat = q.astype(np.float32)
        norms = np.linalg.norm(mat, axis=1, keepdims=True)
        return cast(F32, (mat / np.maximum(norms, 1e-12)).astype(np.float32))

    def top(
        self, vector: F32, k: int, eligible: Mask, floor: float | None = None
    ) -> tuple[Ints, Floats]:
        """Up to `k` documents of `eligible` (a mask over the first `n`) with a cosine above
        `floor` nearest `vector` (a unit vector): (documents, cosines), best first."""
        n = self.n
        eligible = eligible[:n]
        if k <= 0 or not n or not eligible.any():
            return np.zeros(0, dtype=np.int64), np.zeros(0)
        query = np.asarray(vector, dtype=np.float32)
        if self.layout == "dense" and int(eligible.sum()) >= PREFILTER_MIN_ROWS:
            return self._prefiltered(query, k, eligible, floor)
        if self.layout == "f32-sparse":
            return self._bounded(query, k, eligible, floor)
        sims = self.scan(query)
        docs = _top(sims, k, eligible, floor)
        return docs, sims[docs].astype(np.float64)

    def scan(self, query: F32) -> Floats | F32:
        """The cosine of every one of the `n` documents with `query` (exact on the stored rows;
        float32 for int8 rows, whose cosines are no finer)."""
        n = self.n
        if self.layout == "f32":
            return cosines(cast(F32, self.rows[:n]), query)
        if self.layout == "f32-sparse":
            exact = np.empty(n)
            for lo in range(0, n, _BLOCK):
                hi = min(n, lo + _BLOCK)
                exact[lo:hi] = self._exact(np.arange(lo, hi), query)
            return exact
        out = np.empty(n, dtype=np.float32)
        if self.layout == "sparse":
            dims = np.flatnonzero(query)
            weights = query[dims]
            for lo in range(0, n, _BLOCK):
                hi = min(n, lo + _BLOCK)
                block = self.rows[dims, lo:hi].astype(np.float32)
                out[lo:hi] = np.einsum("i,ij->j", weights, block)
        else:
            for lo in range(0, n, _BLOCK):
                hi = min(n, lo + _BLOCK)
                out[lo:hi] = np.einsum("ij,j->i", self.rows[lo:hi].astype(np.float32), query)
        out *= self.scale[:n]
        return out

    def _exact(self, docs: Ints, query: F32) -> Floats:
        """f32-sparse: the cosines of `docs` as the document-major scan computes them (the same
        einsum over the same rows, gathered document-major: equal to the bit)."""
        rows = np.ascontiguousarray(self.rows[:, docs].T, dtype=np.float32)
        return cosines(rows, query)

    def _bounded(
        self, query: F32, k: int, eligible: Mask, floor: float | None
    ) -> tuple[Ints, Floats]:
        """f32-sparse: `top`, exactly what the document-major scan answers. A cosine summed over
        the query's non-zero dimensions is within `_SLACK` of the exact one, so only documents
        whose sum is above `floor - _SLACK` may clear the floor, and of those, only the ones
        within twice `_SLACK` of the (k+1)-th best sum may be among the k + 1 best: they alone
        are scored exactly. When the k-th best of them scores above the (k+1)-th, the top k is
        the scan's; on a tie there (the scan's `argpartition` picks among tied documents by
        their positions among all it ranks) every document that may clear the floor is scored
        exactly and ranked as the scan ranks them, or, when that is more than
        `_BOUNDED_SHARE` of them, the scan itself runs."""
        n = self.n
        dims = np.flatnonzero(query)
        weights = query[dims]
        approx = np.empty(n, dtype=np.float32)
        for lo in range(0, n, _BLOCK):
            hi = min(n, lo + _BLOCK)
            approx[lo:hi] = np.einsum("i,ij->j", weights, self.rows[dims, lo:hi])
        low = -np.inf if floor is None else floor - _SLACK
        docs = np.flatnonzero(eligible & (approx > low))
        if len(docs) > k:
            sums = approx[docs]
            cut = np.partition(sums, len(docs) - k - 1)[len(docs) - k - 1]  # the (k+1)-th best
            near = docs[sums >= cut - 2 * _SLACK]
            sims = self._exact(near, query)
            if floor is not None:
                near, sims = near[sims > floor], sims[sims > floor]
            order = np.lexsort((near, -sims))
            if len(near) > k and sims[order[k - 1]] > sims[order[k]]:
                return near[order[:k]], sims[order[:k]]
        if len(docs) > _BOUNDED_SHARE * n:
            every = self.scan(query)
            found = _top(every, k, eligible, floor)
            return found, every[found].astype(np.float64)
        sims = self._exact(docs, query)
        pick = _top(sims, k, np.ones(len(docs), dtype=bool), floor)
        return docs[pick], sims[pick]

    def _prefiltered(
        self, query: F32, k: int, eligible: Mask, floor: float | None
    ) -> tuple[Ints, Floats]:
        """Dense: the `_rescored` eligible documents nearest by sign bits, ranked exactly."""
        n = self.n
        qbits = _sign_words(query[None, :], len(self.bits))[:, 0]
        dist = np.bitwise_count(self.bits[0, :n] ^ qbits[0]).astype(np.uint16)
        for w in range(1, len(self.bits)):
            dist += np.bitwise_count(self.bits[w, :n] ^ qbits[w])
        dist[~eligible] = _NO_MATCH
        want = _rescored(int(eligible.sum()), k)
        cand = np.argpartition(dist, want - 1)[:want] if want < n else np.arange(n)
        cand = np.sort(cand[eligible[cand]])
        rows = cast(I8, self.rows[cand])
        sims = (np.einsum("ij,j->i", rows.astype(np.float32), query) * self.scale[cand]).astype(
            np.float64
        )
        pick = _top(sims, k, np.ones(len(cand), dtype=bool), floor)
        return cand[pick], sims[pick]


class Vectors:
    """One kind's rows: float32, or int8 in the layout their content suits (module docstring).
    Not locked: the owning partition serialises writes."""

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.layout = "f32"
        self._words = (dim + 63) // 64
        self._rows: F32 | I8 = np.zeros((0, dim), dtype=np.float32)
        self._scale: F32 = np.zeros(0, dtype=np.float32)
        self._bits: U64 = np.zeros((self._words, 0), dtype=np.uint64)

    @property
    def capacity(self) -> int:
        major = self.layout in ("sparse", "f32-sparse")  # dimension-major
        return int(self._rows.shape[1] if major else self._rows.shape[0])

    def view(self, n: int) -> VectorsView:
        return VectorsView(n, self.dim, self.layout, self._rows, self._scale, self._bits)

    def nbytes(self) -> int:
        return int(self._rows.nbytes + self._scale.nbytes + self._bits.nbytes)

    def float32_rows(self) -> F32 | None:
        """The float32 rows (spare rows included; dimension-major ones as a transposed view)
        while the store is not quantised."""
        if self.layout == "f32-sparse":
            return cast(F32, self._rows.T)
        return cast(F32, self._rows) if self.layout == "f32" else None

    def adopt(self, rows: F32) -> None:
        """Take `rows` (a fresh float32 matrix, spare rows after the documents) as the store."""
        self.layout = "f32"
        self._rows = np.ascontiguousarray(rows, dtype=np.float32)

    def _grow(self, need: int) -> None:
        cap = self.capacity
        if cap >= need:
            return
        size = max(need, 2 * cap, 64)
        if self.layout == "f32":
            rows = np.zeros((size, self.dim), dtype=np.float32)
            rows[:cap] = self._rows
            self._rows = rows
            return
        if self.layout == "f32-sparse":
            rows = _spare_free(self.dim, size)
            rows[:, :cap] = self._rows
            self._rows = rows
            return
        scale = np.zeros(size, dtype=np.float32)
        scale[:cap] = self._scale
        self._scale = scale
        if self.layout == "sparse":
            grown = np.zeros((self.dim, size), dtype=np.int8)
            grown[:, :cap] = self._rows
        else:
            grown = np.zeros((size, self.dim), dtype=np.int8)
            grown[:cap] = self._rows
            bits = np.zeros((self._words, size), dtype=np.uint64)
            bits[:, :cap] = self._bits
            self._bits = bits
        self._rows = grown

    def put(self, start: int, rows: F32) -> None:
        """Write `rows` (float32) as documents start, start + 1, ..."""
        end = start + len(rows)
        self._grow(end)
        if self.layout == "f32":
            self._rows[start:end] = rows
            return
        if self.layout == "f32-sparse":
            self._rows[:, start:end] = np.asarray(rows, dtype=np.float32).T
            return
        q, scale = _quantize(np.asarray(rows, dtype=np.float32))
        self._scale[start:end] = scale
        if self.layout == "sparse":
            self._rows[:, start:end] = q.T
        else:
            self._rows[start:end] = q
            self._bits[:, start:end] = _sign_words(np.asarray(rows, dtype=np.float32), self._words)

    def select(self, keep: Ints) -> None:
        """Keep only the rows `keep`, renumbered 0.. (a compaction)."""
        if self.layout in ("sparse", "f32-sparse"):
            self._rows = cast("F32 | I8", np.ascontiguousarray(self._rows[:, keep]))
        else:
            self._rows = self._rows[keep]
        if self.layout in ("sparse", "dense"):
            self._scale = self._scale[keep]
        if self.layout == "dense":
            self._bits = np.ascontiguousarray(self._bits[:, keep])

    @classmethod
    def quantized(cls, dim: int, layout: str, capacity: int) -> Vectors:
        """An int8 store of `layout` ("sparse" or "dense") with room for `capacity` rows, all
        zero (a zero row is an absent vector: scale 0); `put` quantises rows into it."""
        store = cls(dim)
        store.layout = layout
        store._scale = np.zeros(capacity, dtype=np.float32)
        if layout == "sparse":
            store._rows = np.zeros((dim, capacity), dtype=np.int8)
        else:
            store._rows = np.zeros((capacity, dim), dtype=np.int8)
            store._bits = np.zeros((store._words, capacity), dtype=np.uint64)
        return store

    def arrange(self, n: int, present: Mask) -> None:
        """Hold float32 rows dimension-major (`f32-sparse`, module docstring) once there are
        `DIMENSION_MAJOR_MIN_ROWS` of them and the first `n` (`present`: which hold a vector)
        are sparse; spare rows are kept."""
        if self.layout != "f32" or n < DIMENSION_MAJOR_MIN_ROWS:
            return
        rows = cast(F32, self._rows)
        # The share of non-zero cells of the first `SAMPLE_ROWS` present rows (`layout_for`),
        # counted in place: an absent vector is a zero row.
        m = min(n, SAMPLE_ROWS)
        cells = int(np.count_nonzero(present[:m])) * self.dim
        if cells and np.count_nonzero(rows[:m]) <= _SPARSE_SHARE * cells:
            self._rows = _transposed(rows, n)
            self.layout = "f32-sparse"

    def quantize(self, n: int, present: Mask) -> None:
        """Turn the first `n` float32 rows into int8 (their layout chosen by content), keeping
        spare rows for later documents; the float32 rows are released."""
        if self.layout not in ("f32", "f32-sparse"):
            return
        rows = cast(F32, self._rows if self.layout == "f32" else self._rows.T)
        sample = rows[np.flatnonzero(present[:n])[:SAMPLE_ROWS]]  # not a copy of every row
        fresh = Vectors.quantized(self.dim, layout_for(sample), n + n // 4 + 1024)
        for lo in range(0, n, 65_536):  # no second full-size float32 temporary
            fresh.put(lo, rows[lo : min(n, lo + 65_536)])
        self.layout = fresh.layout
        self._rows, self._scale, self._bits = fresh._rows, fresh._scale, fresh._bits

    # -- persistence (lcg.search.snapshot, through Partition.save / load) --------------------

    def save(self, directory: Path, kind: str, n: int) -> dict[str, Any]:
        """Write the first `n` rows under `directory`; what `load` needs to read them back."""
        arrays: dict[str, np.ndarray[Any, Any]]
        if self.layout == "sparse":
            arrays = {"q": self._rows[:, :n], "scale": self._scale[:n]}
        elif self.layout == "dense":
            arrays = {"q": self._rows[:n], "scale": self._scale[:n], "bits": self._bits[:, :n]}
        elif self.layout == "f32-sparse":  # written document-major, as an "f32" store
            arrays = {"vec": self._rows[:, :n].T}
        else:
            arrays = {"vec": self._rows[:n]}
        for name, arr in arrays.items():
            np.save(directory / f"{name}.{kind}.npy", np.ascontiguousarray(arr))
        return {"layout": "f32" if self.layout == "f32-sparse" else self.layout}

    def load(self, directory: Path, kind: str, n: int, meta: dict[str, Any]) -> None:
        """Read what `save` wrote, into arrays with spare rows for the commits after the load.

        Raises:
            OSError, ValueError, KeyError: a missing or malformed file.
        """
        layout = str(meta["layout"])
        if layout not in ("f32", "sparse", "dense"):
            raise ValueError(f"{directory}: unknown vector layout {layout!r}")

        def arr(name: str, shape: tuple[int, ...], dtype: Any) -> np.ndarray[Any, Any]:
            out = np.load(directory / f"{name}.{kind}.npy", mmap_mode="r")
            if out.shape != shape or out.dtype != np.dtype(dtype):
                raise ValueError(f"{directory}: {name}.{kind} is {out.dtype}{out.shape}")
            return cast("np.ndarray[Any, Any]", out)

        cap = n + n // 4 + 1024
        self.layout = layout
        if layout == "f32":
            self._rows = np.zeros((cap, self.dim), dtype=np.float32)
            self._rows[:n] = arr("vec", (n, self.dim), np.float32)
            return
        self._scale = np.zeros(cap, dtype=np.float32)
        self._scale[:n] = arr("scale", (n,), np.float32)
        if layout == "sparse":
            self._rows = np.zeros((self.dim, cap), dtype=np.int8)
            self._rows[:, :n] = arr("q", (self.dim, n), np.int8)
        else:
            self._rows = np.zeros((cap, self.dim), dtype=np.int8)
            self._rows[:n] = arr("q", (n, self.dim), np.int8)
            self._bits = np.zeros((self._words, cap), dtype=np.uint64)
            self._bits[:, :n] = arr("bits", (self._words, n), np.uint64)
