"""A deterministic, dependency-free embedder: feature-hashed character n-grams and words.

It is lexical, not semantic: texts that share spelling fragments land near each other, which is
enough for fuzzy name matching and for tests and first runs with no model installed. It is
reported as lexical-only wherever the embedder is shown. Same text, same vector, on any machine.
"""

from __future__ import annotations

import re
import zlib

import numpy as np

from lcg.embedding.base import EmbedderIdentity, Vectors

__all__ = ["HashEmbedder"]

_WORD = re.compile(r"\w+")
# Odd multipliers for a polynomial rolling hash over byte trigrams (mod 2**32).
_P1, _P2 = np.uint32(0x01000193), np.uint32(0x9E3779B1)
_CHUNK = 512


class HashEmbedder:
    """Feature hashing of byte 3-grams (weight 1) and whole words (weight 2), L2-normalised."""

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError("dim must be >= 8")
        self._identity = EmbedderIdentity(model=f"hash-ngram-v1-{dim}", dim=dim, lexical_only=True)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        dim = self._identity.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for start in range(0, len(texts), _CHUNK):  # chunks keep the scratch arrays in cache
            out[start : start + _CHUNK] = self._embed_chunk(texts[start : start + _CHUNK])
        return out

    def _embed_chunk(self, texts: list[str]) -> Vectors:
        dim = self._identity.dim
        n = len(texts)
        lowered = [t.lower() for t in texts]
        # Byte trigrams of every text at once: concatenate " text " per row, hash each window,
        # and drop the windows that straddle two rows.
        encoded = [f" {t} ".encode() for t in lowered]
        lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=n)
        data = np.frombuffer(b"".join(encoded), dtype=np.uint8).astype(np.uint32)
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)
        with np.errstate(over="ignore"):
            h = (data[:-2] * _P1 * _P1) ^ (data[1:-1] * _P1) ^ data[2:]
            h = h * _P2
        pos = np.arange(len(h), dtype=np.int64)
        valid = row_of[: len(h)] == row_of[2:]  # all three bytes in the same row
        valid &= pos >= starts[row_of[: len(h)]]
        buckets = (h[valid] >> np.uint32(8)) % np.uint32(dim)
        signs = np.where(h[valid] & np.uint32(1), 1.0, -1.0)
        flat = row_of[: len(h)][valid] * dim + buckets.astype(np.int64)
        # Whole words, weight 2.
        word_idx, word_w = [], []
        for row, text in enumerate(lowered):
            for word in _WORD.findall(text):
                code = zlib.crc32(word.encode())
                word_idx.append(row * dim + code % dim)
                word_w.append(2.0 if code & 0x100 else -2.0)
        index = np.concatenate((flat, np.asarray(word_idx, dtype=np.int64)))
        weights = np.concatenate((signs, np.asarray(word_w, dtype=np.float64)))
        out = np.bincount(index, weights=weights, minlength=n * dim).reshape(n, dim).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
