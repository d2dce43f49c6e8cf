"""The on-disk embedding cache: vectors keyed by (model, text), so no text is embedded twice.

One append-only file per embedder identity, `<dir>/<model>-<dim>.f32`, of fixed-size records
(16-byte text hash, `dim` little-endian float32). It is derived data: losing it costs only
re-embedding. A torn final record (a crash mid-append) is cut off when the file is opened.

This is also where vectors are kept: the graph stores, per owner and kind, only the hash of the
text it embedded (`Embedding.text_hash`). Writing 45k 384-d vectors through Kuzu cost 3-5 s
(COPY plus commit) and reading them back 2 s; appending them here costs one sequential write,
and a rebuild after the database is deleted finds every vector already cached.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path

import numpy as np

from lcg.embedding.base import Embedder, EmbedderIdentity, Vectors
from lcg.fsmodes import open_private, private_dir

__all__ = ["CachedEmbedder", "text_hash"]


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
        self._index: dict[bytes, int] = {}
        # Rows [0, len(_loaded)) are the file as opened; later ones are in `_tail`, which grows
        # by doubling. Growing one matrix instead copied the whole cache into one twice its
        # size at the first new text after opening (bench/embeddings.py, 300k vectors: 73-79 ms
        # and ~460 MB more, against ~1 ms now).
        self._loaded: Vectors = np.zeros((0, identity.dim), dtype=np.float32)
        self._tail: Vectors = np.zeros((0, identity.dim), dtype=np.float32)
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
        data = np.fromfile(self.path, dtype=self._record)
        self._index = {h: i for i, h in enumerate(data["h"].tolist())}
        self._loaded = np.ascontiguousarray(data["v"])
        self._count = len(data)

    def _append(self, vectors: Vectors) -> None:
        used = self._count - len(self._loaded)
        need = used + len(vectors)
        if need > len(self._tail):
            grown = np.zeros((max(need, 2 * len(self._tail), 1024), self._dim), dtype=np.float32)
            grown[:used] = self._tail[:used]
            self._tail = grown
        self._tail[used:need] = vectors
        self._count += len(vectors)

    def _rows(self, at: list[int]) -> Vectors:
        """The vectors of cache rows `at` (lock held)."""
        idx = np.asarray(at, dtype=np.int64)
        old = idx < len(self._loaded)
        if old.all():
            return self._loaded[idx]
        out = np.empty((len(idx), self._dim), dtype=np.float32)
        out[old] = self._loaded[idx[old]]
        out[~old] = self._tail[idx[~old] - len(self._loaded)]
        return out

    def __len__(self) -> int:
        return self._count

    def cached(self, texts: list[str]) -> list[Vectors | None]:
        """Each text's cached vector, or None where this identity never embedded it. Never
        calls the model: safe while the engine's write lock is held."""
        model = self.identity.model
        with self._lock:
            at = [self._index.get(text_hash(model, t).encode()) for t in texts]
            rows = iter(self._rows([i for i in at if i is not None]))
            return [None if i is None else next(rows) for i in at]

    def embed(self, texts: list[str]) -> Vectors:
        """Vectors for `texts`, embedding (in one batch) and caching only the unseen ones."""
        model = self.identity.model
        keys = [text_hash(model, t).encode() for t in texts]
        out = np.empty((len(texts), self._dim), dtype=np.float32)
        missing: dict[bytes, list[int]] = {}
        rows, found = [], []
        with self._lock:
            for row, key in enumerate(keys):
                at = self._index.get(key)
                if at is None:
                    missing.setdefault(key, []).append(row)
                else:
                    rows.append(row)
                    found.append(at)
            if found:
                out[rows] = self._rows(found)
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
            new = [
                j for j, key in enumerate(keys_missing) if key not in self._index
            ]  # another thread may have won
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
                self._append(vectors)
        return out
