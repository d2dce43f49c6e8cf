"""One search partition: the documents of one (group, kind of row), lexical and vector side.

Documents are numbered in arrival order. Each has a uuid, a token count, its postings, one
vector per embedding kind (aligned by document number: row i of every matrix is document i),
a few int64 columns (times, codes) and an optional tuple of tags (entity labels).

A partition with a `WINDOW` column holds windows (episodes, lcg.search.windows): consecutive
documents may share a uuid, column `WINDOW` numbering them 0, 1, ... within it, so a document's
first window is `doc - window[doc]`. They are added, replaced and removed together.

Each vector kind's rows are a `lcg.search.vectors.Vectors` store: float32 while the partition is
small (dimension-major for sparse vectors once a compaction or a load finds enough of them,
`Vectors.arrange`), int8 once a compaction (or a load) finds it has at least `QUANTIZE_MIN_ROWS`
documents; documents added later are quantised as they arrive.

Postings are a compressed-sparse-row `base` (built in one go at load and at compaction) plus an
append-only `delta` of (term, doc, tf) triplets for documents added since, scanned linearly. A
replaced or removed document is only marked dead; `compact` renumbers the live ones and folds the
delta into a new base once the delta or the dead share grows.

Concurrency: writers (`add`, `remove`, `set_columns`, `compact`) hold the partition lock; a
reader takes a `View` under that lock (a few references and counters) and searches it without
any lock. Writes only ever fill slots beyond the views' `n`, replace whole arrays, or flip
`alive` flags and column cells of existing documents, so a view stays internally consistent.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

import numpy as np
import numpy.typing as npt

from lcg.search import vectors as vectors_mod
from lcg.search.text import Vocabulary
from lcg.search.vectors import Vectors, VectorsView

__all__ = ["WINDOW", "Partition", "View"]

A = TypeVar("A", bound="np.ndarray[Any, Any]")
Ints = npt.NDArray[np.int64]
Vecs = npt.NDArray[np.float32]
Mask = npt.NDArray[np.bool_]

_EMPTY = np.zeros(0, dtype=np.int64)
# The column numbering the windows of one uuid (see the module docstring).
WINDOW = "window"


def _fit(arr: A, need: int) -> A:
    """`arr` if it has room for `need` rows, else a copy with at least double the room."""
    if len(arr) >= need:
        return arr
    grown = np.zeros((max(need, 2 * len(arr), 64), *arr.shape[1:]), dtype=arr.dtype)
    grown[: len(arr)] = arr
    return cast(A, grown)


@dataclass(frozen=True)
class View:
    """A consistent read-only snapshot of a partition's first `n` documents."""

    n: int
    uuids: list[str]
    alive: Mask
    doc_len: Ints
    live_docs: int
    live_len: int
    base_terms: int
    indptr: Ints
    post_docs: Ints
    post_tf: Ints
    delta_term: Ints
    delta_doc: Ints
    delta_tf: Ints
    vectors: Mapping[str, VectorsView]
    has_vector: Mapping[str, Mask]
    columns: Mapping[str, Ints]
    tags: list[tuple[str, ...]]

    def postings(self, term: int) -> tuple[Ints, Ints]:
        """(doc ids, term frequencies) of one term."""
        if term < self.base_terms:
            lo, hi = int(self.indptr[term]), int(self.indptr[term + 1])
            docs, tf = self.post_docs[lo:hi], self.post_tf[lo:hi]
        else:
            docs, tf = _EMPTY, _EMPTY
        if len(self.delta_term):
            hit = self.delta_term == term
            if hit.any():
                docs = np.concatenate([docs, self.delta_doc[hit]])
                tf = np.concatenate([tf, self.delta_tf[hit]])
        return docs, tf

    def live(self) -> Mask:
        return self.alive[: self.n]

    def windows_of(self, doc: int) -> Ints:
        """The documents of `doc`'s uuid (its windows, in order; `doc` alone without a `WINDOW`
        column)."""
        window = self.columns.get(WINDOW)
        if window is None:
            return np.array([doc], dtype=np.int64)
        first = doc - int(window[doc])
        last = first
        while last + 1 < self.n and window[last + 1] == window[last] + 1:
            last += 1
        return np.arange(first, last + 1, dtype=np.int64)

    def vectors_of(self, kind: str, docs: Ints) -> Vecs:
        """The `kind` vectors of documents `docs` (each must have one), float32 unit rows."""
        return self.vectors[kind].get(docs)


class Partition:
    """Documents of one (group, kind): see the module docstring."""

    def __init__(
        self,
        vocab: Vocabulary,
        vector_kinds: Sequence[str],
        dim: int,
        columns: Sequence[str] = (),
    ) -> None:
        self._vocab = vocab
        self._lock = threading.Lock()
        self._kinds = tuple(vector_kinds)
        self._dim = dim
        self._uuids: list[str] = []
        self._tags: list[tuple[str, ...]] = []
        self._pos: dict[str, int] = {}  # uuid -> its (first) document
        self._runs: dict[str, int] = {}  # uuid -> its number of windows, where more than one
        self._windowed = WINDOW in columns
        self._n = 0
        self._alive: Mask = np.zeros(0, dtype=bool)
        self._doc_len: Ints = np.zeros(0, dtype=np.int64)
        self._live_docs = 0
        self._live_len = 0
        self._base_terms = 0
        self._indptr: Ints = np.zeros(1, dtype=np.int64)
        self._post_docs: Ints = _EMPTY
        self._post_tf: Ints = _EMPTY
        self._delta: Ints = np.zeros((0, 3), dtype=np.int64)  # (term, doc, tf) rows
        self._delta_len = 0
        self._vectors: dict[str, Vectors] = {k: Vectors(dim) for k in self._kinds}
        self._has: dict[str, Mask] = {k: np.zeros(0, dtype=bool) for k in self._kinds}
        self._columns: dict[str, Ints] = {name: np.zeros(0, dtype=np.int64) for name in columns}
        self.dirty = False  # changed since loaded or saved (lcg.search.snapshot)

    def __len__(self) -> int:
        return self._live_docs

    def view(self) -> View:
        with self._lock:
            n = self._n
            return View(
                n=n,
                uuids=self._uuids,
                alive=self._alive,
                doc_len=self._doc_len,
                live_docs=self._live_docs,
                live_len=self._live_len,
                base_terms=self._base_terms,
                indptr=self._indptr,
                post_docs=self._post_docs,
                post_tf=self._post_tf,
                delta_term=self._delta[: self._delta_len, 0],
                delta_doc=self._delta[: self._delta_len, 1],
                delta_tf=self._delta[: self._delta_len, 2],
                vectors={k: v.view(n) for k, v in self._vectors.items()},
                has_vector={k: m[:n] for k, m in self._has.items()},
                columns={k: c[:n] for k, c in self._columns.items()},
                tags=self._tags,
            )

    def nbytes(self) -> int:
        """Bytes held in numpy arrays (postings, vectors, columns); Python lists not counted."""
        with self._lock:
            arrays: list[np.ndarray[Any, Any]] = [self._alive, self._doc_len, self._indptr]
            arrays += [self._post_docs, self._post_tf, self._delta]
            arrays += [*self._has.values(), *self._columns.values()]
            return sum(a.nbytes for a in arrays) + sum(v.nbytes() for v in self._vectors.values())

    def contains(self, uuid: str) -> bool:
        return uuid in self._pos

    def doc(self, uuid: str) -> int | None:
        return self._pos.get(uuid)

    # -- writes -------------------------------------------------------------------------------

    def _kill(self, doc: int) -> None:
        if self._alive[doc]:
            self._alive[doc] = False
            self._live_docs -= 1
            self._live_len -= int(self._doc_len[doc])

    def _kill_uuid(self, uuid: str, doc: int) -> None:
        """Kill the documents of `uuid` from its first, `doc` (all its windows)."""
        for d in range(doc, doc + self._runs.pop(uuid, 1)):
            self._kill(d)

    def _first_positions(self) -> None:
        """`_pos` and `_runs` from `_uuids` (every document live): a uuid's first document."""
        if not self._windowed:
            self._pos = {u: i for i, u in enumerate(self._uuids)}
            return
        n = len(self._uuids)
        self._pos = dict(zip(reversed(self._uuids), range(n - 1, -1, -1), strict=True))
        self._runs = {}
        if len(self._pos) != n:
            window = self._columns[WINDOW]
            for i in np.flatnonzero(window[:n] > 0).tolist():
                uuid = self._uuids[i]
                self._runs[uuid] = max(self._runs.get(uuid, 1), int(window[i]) + 1)

    def add(
        self,
        uuids: Sequence[str],
        texts: Sequence[str],
        vectors: Mapping[str, tuple[Vecs | Vectors, Mask]] | None = None,
        columns: Mapping[str, Ints] | None = None,
        tags: Sequence[tuple[str, ...]] | None = None,
        *,
        bulk: bool = False,
    ) -> None:
        """Add (or replace, by uuid) documents. `vectors[kind]` is (rows, present flags).

        `bulk`: a whole partition being loaded, compacted once by the caller afterwards; only
        then may rows be a `Vectors` store (adopted as is).
        """
        m = len(uuids)
        if not m:
            return
        lengths, terms = self._vocab.analyze(texts)
        owner = np.repeat(np.arange(m, dtype=np.int64), lengths)
        with self._lock:
            self.dirty = True
            start = self._n
            for uuid in dict.fromkeys(uuids) if self._windowed else uuids:
                old = self._pos.get(uuid)
                if old is not None:
                    self._kill_uuid(uuid, old)
            need = start + m
            self._alive = _fit(self._alive, need)
            self._doc_len = _fit(self._doc_len, need)
            self._alive[start:need] = True
            self._doc_len[start:need] = lengths
            for kind in self._kinds:
                store = self._vectors[kind]
                given = vectors.get(kind) if vectors is not None else None
                if bulk and start == 0 and given is not None and store.layout == "f32":
                    # A bulk load into an empty partition adopts the caller's (fresh) arrays,
                    # spare rows after the m documents included: float32 rows, or a store
                    # already quantised (`Vectors.quantized`, lcg.search.index `_vectors`).
                    if isinstance(given[0], Vectors):
                        self._vectors[kind] = given[0]
                    else:
                        store.adopt(given[0])
                    self._has[kind] = np.asarray(given[1], dtype=bool)
                    continue
                has = _fit(self._has[kind], need)
                if given is not None:
                    if isinstance(given[0], Vectors):
                        raise TypeError("a Vectors store is only adopted by a bulk load")
                    store.put(start, np.asarray(given[0][:m], dtype=np.float32))
                    has[start:need] = given[1][:m]
                else:
                    store.put(start, np.zeros((m, self._dim), dtype=np.float32))
                    has[start:need] = False
                self._has[kind] = has
            for name, col in self._columns.items():
                grown = _fit(col, need)
                if columns is not None and name in columns:
                    grown[start:need] = columns[name]
                self._columns[name] = grown
            if len(terms):
                # In (term, doc) order, a compaction's order: a bulk load's is not sorted again.
                pairs, tf = np.unique(terms * m + owner, return_counts=True)
                triplets = np.stack([pairs // m, pairs % m + start, tf], axis=1)
                end = self._delta_len + len(triplets)
                self._delta = _fit(self._delta, end)
                self._delta[self._delta_len : end] = triplets
                self._delta_len = end
            self._uuids.extend(uuids)
            self._tags.extend(tags if tags is not None else [()] * m)
            if self._windowed:
                for i, uuid in enumerate(uuids):
                    first = self._pos.get(uuid)
                    if first is not None and first >= start:  # a later window of this add
                        self._runs[uuid] = start + i - first + 1
                    else:
                        self._pos[uuid] = start + i
            else:
                for i, uuid in enumerate(uuids):
                    self._pos[uuid] = start + i
            self._n = need
            self._live_docs += m
            self._live_len += int(lengths.sum())
            if bulk:
                return
            if self._delta_len > max(8192, len(self._post_docs) // 8) or (
                self._n > 1024 and self._live_docs < self._n * 2 // 3
            ):
                self._compact()
            else:
                self._quantize_if_large()

    def remove(self, uuids: Sequence[str]) -> None:
        with self._lock:
            self.dirty = True
            for uuid in uuids:
                doc = self._pos.pop(uuid, None)
                if doc is not None:
                    self._kill_uuid(uuid, doc)

    def set_columns(self, uuid: str, values: Mapping[str, int]) -> bool:
        """Change numeric columns of a live document in place; False if it is not here."""
        with self._lock:
            doc = self._pos.get(uuid)
            if doc is None:
                return False
            self.dirty = True
            for name, value in values.items():
                self._columns[name][doc] = value
            return True

    def compact(self) -> None:
        with self._lock:
            self._compact()

    def _compact(self) -> None:
        """Renumber live documents and rebuild the base postings (lock held)."""
        n = self._n
        keep = np.flatnonzero(self._alive[:n])
        remap = np.full(n, -1, dtype=np.int64)
        remap[keep] = np.arange(len(keep))
        counts = np.diff(self._indptr)
        base_terms = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        delta = self._delta[: self._delta_len]
        term = np.concatenate([base_terms, delta[:, 0]])
        doc = remap[np.concatenate([self._post_docs, delta[:, 1]])]
        tf = np.concatenate([self._post_tf, delta[:, 2]])
        live = doc >= 0
        term, doc, tf = term[live], doc[live], tf[live]
        key = term * (len(keep) + 1) + doc  # (term, doc) order; pairs are unique
        if not bool((key[1:] > key[:-1]).all()):  # sorted already after a bulk load's one add
            order = np.argsort(key)
            term, doc, tf = term[order], doc[order], tf[order]
        vocab = max(len(self._vocab), int(term.max()) + 1 if len(term) else 0)
        self._indptr = np.zeros(vocab + 1, dtype=np.int64)  # term t: [indptr[t], indptr[t + 1])
        np.cumsum(np.bincount(term, minlength=vocab), out=self._indptr[1:])
        self._base_terms = vocab
        self._post_docs, self._post_tf = doc, tf
        self._delta = np.zeros((0, 3), dtype=np.int64)
        self._delta_len = 0
        renumbered = len(keep) != n
        if renumbered:  # else uuids, tags and positions stay as they are
            self._uuids = [self._uuids[i] for i in keep]
            self._tags = [self._tags[i] for i in keep]
        self._alive = np.ones(len(keep), dtype=bool)
        self._doc_len = self._doc_len[keep]
        if not renumbered:  # nothing dead: no copy, and the vectors keep their spare rows
            self._has = {k: m[:n] for k, m in self._has.items()}
            self._columns = {k: c[:n] for k, c in self._columns.items()}
        else:
            for store in self._vectors.values():
                store.select(keep)
            self._has = {k: m[keep] for k, m in self._has.items()}
            self._columns = {k: c[keep] for k, c in self._columns.items()}
            self._first_positions()
        self._n = len(keep)
        self._arrange_vectors()

    def _quantize_if_large(self) -> None:
        """int8 rows for a partition of `QUANTIZE_MIN_ROWS` documents or more (lock held)."""
        if self._n >= vectors_mod.QUANTIZE_MIN_ROWS:
            for kind, store in self._vectors.items():
                store.quantize(self._n, self._has[kind])

    def _arrange_vectors(self) -> None:
        """The layout each vector store suits (lock held): int8 from `QUANTIZE_MIN_ROWS`
        documents, else float32, dimension-major for sparse vectors (`Vectors.arrange`)."""
        self._quantize_if_large()
        for kind, store in self._vectors.items():
            store.arrange(self._n, self._has[kind])

    # -- persistence (lcg.search.snapshot) -------------------------------------------------

    def save(self, directory: Path) -> None:
        """Write the partition, compacted first, as arrays and graphs under `directory`."""
        with self._lock:
            if self._delta_len or self._live_docs != self._n:
                self._compact()
            n = self._n
            arrays: dict[str, np.ndarray[Any, Any]] = {
                "doc_len": self._doc_len[:n],
                "indptr": self._indptr,
                "post_docs": self._post_docs,
                "post_tf": self._post_tf,
            }
            for kind in self._kinds:
                arrays[f"has.{kind}"] = self._has[kind][:n]
            for name, col in self._columns.items():
                arrays[f"col.{name}"] = col[:n]
            for name, arr in arrays.items():
                np.save(directory / f"{name}.npy", np.ascontiguousarray(arr))
            stores = {k: v.save(directory, k, n) for k, v in self._vectors.items()}
            (directory / "uuids.json").write_text(json.dumps(self._uuids[:n]))
            (directory / "tags.json").write_text(json.dumps(self._tags[:n]))
            meta = {
                "n": n,
                "live_len": self._live_len,
                "base_terms": self._base_terms,
                "vectors": stores,
            }
            (directory / "partition.json").write_text(json.dumps(meta))
            self.dirty = False

    def load(self, directory: Path) -> None:
        """Replace this (empty) partition's content with one `save` wrote. Arrays are mapped
        copy-on-write: pages are read when searched, and only pages written become private.

        Raises:
            OSError, ValueError, KeyError: a missing or malformed file.
        """
        meta = json.loads((directory / "partition.json").read_text())
        n = int(meta["n"])

        def arr(name: str) -> np.ndarray[Any, Any]:
            out = np.load(directory / f"{name}.npy", mmap_mode="c")
            if name not in ("indptr", "post_docs", "post_tf") and len(out) != n:
                raise ValueError(f"{directory}: {name} has {len(out)} rows, not {n}")
            return cast("np.ndarray[Any, Any]", out)

        uuids = json.loads((directory / "uuids.json").read_text())
        tags = [tuple(t) for t in json.loads((directory / "tags.json").read_text())]
        if len(uuids) != n or len(tags) != n:
            raise ValueError(f"{directory}: {len(uuids)} uuids for {n} documents")
        has = {k: arr(f"has.{k}") for k in self._kinds}
        vectors = {}
        for kind in self._kinds:
            vectors[kind] = Vectors(self._dim)
            vectors[kind].load(directory, kind, n, meta["vectors"][kind])
        columns = {name: arr(f"col.{name}") for name in self._columns}
        with self._lock:
            self._uuids, self._tags = uuids, tags
            self._columns = columns
            self._first_positions()
            self._n = self._live_docs = n
            self._alive = np.ones(n, dtype=bool)
            self._doc_len = arr("doc_len")
            self._live_len = int(meta["live_len"])
            self._base_terms = int(meta["base_terms"])
            self._indptr, self._post_docs, self._post_tf = (
                arr("indptr"),
                arr("post_docs"),
                arr("post_tf"),
            )
            self._vectors, self._has, self._columns = vectors, has, columns
            self._arrange_vectors()
            self.dirty = False
