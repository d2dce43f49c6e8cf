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
        for row, text in enumerate(texts):
            lowered = text.lower()
            data = np.frombuffer(f" {lowered} ".encode(), dtype=np.uint8).astype(np.uint32)
            if data.size >= 3:
                with np.errstate(over="ignore"):
                    h = (data[:-2] * _P1 * _P1) ^ (data[1:-1] * _P1) ^ data[2:]
                    h = h * _P2
                buckets = (h >> np.uint32(8)) % np.uint32(dim)
                signs = np.where(h & np.uint32(1), 1.0, -1.0)
                out[row] = np.bincount(buckets, weights=signs, minlength=dim)
            for word in _WORD.findall(lowered):
                code = zlib.crc32(word.encode())
                out[row, code % dim] += 2.0 if code & 0x100 else -2.0
            norm = float(np.linalg.norm(out[row]))
            if norm > 0:
                out[row] /= norm
        return out
