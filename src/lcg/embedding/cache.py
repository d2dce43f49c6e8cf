"""The on-disk embedding cache: vectors keyed by (model, text), so no text is embedded twice.

One append-only file per embedder identity, `<dir>/<model>-<dim>.f32`, of fixed-size records
(16-byte text hash, `dim` little-endian float32). It is derived data: losing it costs only
re-embedding. A torn final record (a crash mid-append) is cut off when the file is opened.

This is also where vectors are kept: the graph stores, per owner and kind, only the hash of the
text it embedded (`Embedding.text_hash`). Writing 45k 384-d vectors through Kuzu cost 3-5 s
(COPY plus commit) and reading them back 2 s; appending them here costs one sequential write,
and a rebuild after the database is deleted finds every vector already cached.

Memory: the file is memory-mapped, never read in (rows appended later included: they are read
back through a new map), and its hashes are held as one sorted array of 64-bit integers (8 bytes
a vector, against ~150 bytes for a dict entry; recent appends sit in a dict until it is merged).
The search index keeps the one in-memory copy of the vectors it serves; the cache's pages are
read when a vector is looked up and handed back to the page cache after large reads, so a
workspace's vectors are never resident twice (opening the 203k vectors of bench/scale.py's 100k-fact workspace:
3.9 s and 326 MB of RSS when the file was read into an array and a dict; 0.4 s and 6 MB now).
"""

from __future__ import annotations

import hashlib
import mmap
import os
import re
import threading
from pathlib import Path

import numpy as np
import numpy.typing as npt

from lcg.embedding.base import Embedder, EmbedderIdentity, Vectors
from lcg.fsmodes import open_private, private_dir

__all__ = ["CachedEmbedder", "text_hash"]

# Hex digit value of each byte (text hashes are 16 lowercase hex digits).
_NIBBLE = np.zeros(256, dtype=np.uint64)
for _i, _c in enumerate(b"0123456789abcdef"):
    _NIBBLE[_c] = _i
# Reads of at least this many mapped rows give their pages back afterwards (MADV_DONTNEED):
# the page cache keeps them, this process's resident set does not.
_RELEASE_ROWS = 4096


_HEX = np.zeros(256, dtype=bool)
_HEX[np.frombuffer(b"0123456789abcdef", dtype=np.uint8)] = True
# Rows whose hashes `_load` reads at a time: their pages are handed back after each step, so an
# open never has the whole file resident (at 1M facts, 3.1 GB: the open's high-water mark).
_LOAD_ROWS = 65_536


def _as_u64(hexes: npt.NDArray[np.bytes_]) -> npt.NDArray[np.uint64]:
    """The 64-bit integers that 16-hex-digit hashes (an `S16` array) spell."""
    raw = np.ascontiguousarray(hexes).view(np.uint8).reshape(len(hexes), 16)
    if _HEX[raw].all():  # the usual case: one C pass instead of 16 over the digits
        return np.frombuffer(bytes.fromhex(raw.tobytes().decode()), dtype=">u8").astype(np.uint64)
    digits = _NIBBLE[raw]
    out = np.zeros(len(hexes), dtype=np.uint64)
    for col in range(16):
        out = (out << np.uint64(4)) | digits[:, col]
    return out


def text_hash(model: str, text: str) -> str:
    """16 hex characters identifying (model, text)."""
    return hashlib.blake2b(f"{model}\0{text}".encode(), digest_size=8).hexdigest()


class CachedEmbedder:
    """Wraps an embedder: texts already embedded by this identity come from the cache file."""

    def __init__(self, inner: Embedder, directory: Path) -> None:
        self.inner = inner
        identity = inner.identity
        self._dim = identity.dim
        self._record = np.dtype([("h", "S16"), ("v", "<f4", (identity.dim,))])
        slug = re.sub(r"[^A-Za-z0-9_.-]+", "_", identity.model)
        private_dir(directory)
        self.path = directory / f"{slug}-{identity.dim}.f32"
        self._lock = threading.Lock()
        # Every row is read from the file, mapped: rows [0, len(_mapped)) are the current map,
        # remapped when a row appended since is read. Hashes: of the rows merged so far in
        # `_sorted` (row numbers in `_sorted_rows`), of rows appended since in `_index`. An
        # in-memory copy of the appended rows held every vector a rebuild embedded a second
        # time (2.4 GB at 1M facts).
        self._index: dict[bytes, int] = {}
        self._map: mmap.mmap | None = None
        self._sorted: npt.NDArray[np.uint64] = np.zeros(0, dtype=np.uint64)
        self._sorted_rows: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self._mapped: Vectors = np.zeros((0, identity.dim), dtype=np.float32)
        self._count = 0
        self.hits = 0
        self.misses = 0
        self._load()

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    def _load(self) -> None:
        if not self.path.exists():
            return
        size = self.path.stat().st_size
        whole = size - size % self._record.itemsize
        if whole != size:  # a torn record from a crash mid-append
            with self.path.open("r+b") as fh:
                fh.truncate(whole)
        if not whole:
            return
        self._count = whole // self._record.itemsize
        data = self._remap()
        keys = np.empty(self._count, dtype=np.uint64)
        size, page = self._record.itemsize, mmap.PAGESIZE
        for lo in range(0, self._count, _LOAD_ROWS):
            hi = min(self._count, lo + _LOAD_ROWS)
            keys[lo:hi] = _as_u64(data["h"][lo:hi])
            start = lo * size // page * page
            if self._map is not None:
                self._map.madvise(mmap.MADV_DONTNEED, start, hi * size - start)
        order = np.argsort(keys, kind="stable")
        self._sorted = keys[order]
        self._sorted_rows = order.astype(np.int64, copy=False)

    def _remap(self) -> npt.NDArray[np.void]:
        """Map the file's `_count` records (lock held, or still in `__init__`)."""
        with self.path.open("rb") as fh:
            self._map = mmap.mmap(
                fh.fileno(), self._count * self._record.itemsize, access=mmap.ACCESS_READ
            )
        data = np.frombuffer(self._map, dtype=self._record)
        self._mapped = data["v"]
        return data

    def _merge(self) -> None:
        """Fold the appended rows' hashes into the sorted array (lock held): a dict entry costs
        ~150 bytes, a sorted one 16."""
        keys = _as_u64(np.array(list(self._index), dtype="S16"))
        rows = np.fromiter(self._index.values(), dtype=np.int64, count=len(self._index))
        merged = np.concatenate([self._sorted, keys])
        order = np.argsort(merged, kind="stable")
        self._sorted = merged[order]
        self._sorted_rows = np.concatenate([self._sorted_rows, rows])[order]
        self._index = {}

    def _release(self) -> None:
        """Hand the mapped pages read so far back to the page cache (not resident here)."""
        if self._map is not None:
            self._map.madvise(mmap.MADV_DONTNEED)

    def _find(self, keys: list[bytes]) -> list[int | None]:
        """The cache row of each hash, None where absent (lock held)."""
        return [None if row < 0 else row for row in self._find_rows(keys).tolist()]

    def _find_rows(self, keys: list[bytes]) -> npt.NDArray[np.int64]:
        """`_find` as one array, -1 where absent (lock held): no Python step per found key
        (a rebuild looks up ~2.6M vectors at 1M facts)."""
        out = np.full(len(keys), -1, dtype=np.int64)
        if len(self._sorted) and keys:
            wanted = _as_u64(np.array(keys, dtype="S16"))
            at = np.minimum(np.searchsorted(self._sorted, wanted), len(self._sorted) - 1)
            hit = self._sorted[at] == wanted
            out[hit] = self._sorted_rows[at[hit]]
        if self._index:
            for i in np.flatnonzero(out < 0).tolist():
                row = self._index.get(keys[i])
                if row is not None:
                    out[i] = row
        return out

    def _rows(self, at: list[int] | npt.NDArray[np.int64]) -> Vectors:
        """The vectors of cache rows `at` (lock held)."""
        idx = np.asarray(at, dtype=np.int64)
        if len(idx) and int(idx.max()) >= len(self._mapped):
            self._remap()
        out: Vectors = self._mapped[idx]
        if len(idx) >= _RELEASE_ROWS:
            self._release()
        return out

    def __len__(self) -> int:
        return self._count

    def holds(self, hashes: list[str]) -> npt.NDArray[np.bool_]:
        """Whether each `text_hash` (of this identity's model) has a cached vector, reading no
        vector: a bulk replay asks this of every text before embedding only the others."""
        with self._lock:
            return self._find_rows([h.encode() for h in hashes]) >= 0

    def cached(self, texts: list[str]) -> list[Vectors | None]:
        """Each text's cached vector, or None where this identity never embedded it. Never
        calls the model: safe while the engine's write lock is held."""
        model = self.identity.model
        with self._lock:
            at = self._find([text_hash(model, t).encode() for t in texts])
            rows = iter(self._rows([i for i in at if i is not None]))
            return [None if i is None else next(rows) for i in at]

    def embed(self, texts: list[str]) -> Vectors:
        """Vectors for `texts`, embedding (in one batch) and caching only the unseen ones."""
        model = self.identity.model
        keys = [text_hash(model, t).encode() for t in texts]
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        with self._lock:
            at = self._find_rows(keys)
            hit = at >= 0
            if hit.all():
                out = np.ascontiguousarray(self._rows(at), dtype=np.float32)
            elif hit.any():
                out[hit] = self._rows(at[hit])
            for row in np.flatnonzero(~hit).tolist():
                missing.setdefault(keys[row], []).append(row)
        self.hits += len(texts) - sum(len(v) for v in missing.values())
        if not missing:
            return out
        keys_missing = list(missing)
        fresh = np.asarray(
            self.inner.embed([texts[missing[k][0]] for k in keys_missing]), dtype=np.float32
        )
        self.misses += len(keys_missing)
        targets, sources = [], []
        for j, key in enumerate(keys_missing):
            for row in missing[key]:
                targets.append(row)
                sources.append(j)
        if len(targets) == len(texts) and len(sources) == len(keys_missing):
            out = fresh  # every text was new and distinct, in order
        else:
            out[targets] = fresh[sources]
        with self._lock:
            # Another thread may have won (the mapped rows cannot have changed).
            new = [j for j, at in enumerate(self._find(keys_missing)) if at is None]
            if new:
                vectors = fresh if len(new) == len(keys_missing) else fresh[new]
                hashes = np.frombuffer(b"".join(keys_missing[j] for j in new), dtype=np.uint8)
                blob = np.concatenate(
                    [hashes.reshape(len(new), 16), vectors.view(np.uint8).reshape(len(new), -1)],
                    axis=1,
                )
                # No fsync: the cache is derived data, and a crash can only lose or tear the
                # last records, which `_load` cuts off (lookups are by text hash, so a lost
                # record just means embedding that text again).
                flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT
                with os.fdopen(open_private(self.path, flags), "ab") as fh:
                    fh.write(blob.tobytes())
                for i, j in enumerate(new):
                    self._index[keys_missing[j]] = self._count + i
                self._count += len(new)
                if len(self._index) > max(65_536, len(self._sorted) // 2):
                    self._merge()
        return out
