"""A deterministic, dependency-free embedder: feature-hashed character trigrams and words.

It is lexical, not semantic: texts that share spelling fragments land near each other, which is
enough for fuzzy name matching and for tests and first runs with no model installed. It is
reported as lexical-only wherever the embedder is shown. Same text, same vector, on any machine.

Everything is vectorised over a batch (a rebuild embeds tens of thousands of texts): the texts'
UTF-8 bytes are concatenated, every byte trigram is hashed at once, and every word (a run of
ASCII letters, digits, `_` or non-ASCII bytes) is hashed as a position-weighted sum of its bytes
reduced per word with `np.add.reduceat`. No per-word Python code runs.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from lcg.embedding.base import EmbedderIdentity, Vectors

__all__ = ["HashEmbedder"]

_P1, _P2 = np.uint32(0x01000193), np.uint32(0x9E3779B1)  # odd multipliers for trigram hashing
_CHUNK = 1024  # texts per batch: keeps the scratch arrays small
_MAX_WORD = 64  # bytes of a word that count towards its hash
# One fixed odd 64-bit multiplier per position in a word (a seeded generator: same on every machine).
_POSITION = np.random.default_rng(20261130).integers(1, 2**63, size=_MAX_WORD, dtype=np.uint64) | 1
_WORD_BYTE = np.zeros(256, dtype=bool)
_WORD_BYTE[
    [*range(ord("0"), ord("9") + 1), *range(ord("a"), ord("z") + 1), ord("_"), *range(0x80, 0x100)]
] = True


class HashEmbedder:
    """Feature hashing of byte trigrams (weight 1) and whole words (weight 2), L2-normalised."""

    def __init__(self, dim: int = 384) -> None:
        if dim < 8:
            raise ValueError("dim must be >= 8")
        self._identity = EmbedderIdentity(model=f"hash-ngram-v2-{dim}", dim=dim, lexical_only=True)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        dim = self._identity.dim
        out = np.zeros((len(texts), dim), dtype=np.float32)
        for start in range(0, len(texts), _CHUNK):
            out[start : start + _CHUNK] = self._embed_chunk(texts[start : start + _CHUNK])
        return out

    def _embed_chunk(self, texts: list[str]) -> Vectors:
        dim = self._identity.dim
        n = len(texts)
        # Each text becomes " text " so words and trigrams never run across two texts.
        encoded = [f" {t.lower()} ".encode() for t in texts]
        lengths = np.fromiter((len(b) for b in encoded), dtype=np.int64, count=n)
        raw = np.frombuffer(b"".join(encoded), dtype=np.uint8)
        row_of = np.repeat(np.arange(n, dtype=np.int64), lengths)

        index_parts: list[npt.NDArray[np.int64]] = []
        weight_parts: list[npt.NDArray[np.float64]] = []

        # Trigrams: every window of three bytes inside one text.
        data = raw.astype(np.uint32)
        with np.errstate(over="ignore"):
            h = ((data[:-2] * _P1 * _P1) ^ (data[1:-1] * _P1) ^ data[2:]) * _P2
        inside = row_of[:-2] == row_of[2:]
        h = h[inside]
        index_parts.append(
            row_of[:-2][inside] * dim + ((h >> np.uint32(8)) % np.uint32(dim)).astype(np.int64)
        )
        weight_parts.append(np.where(h & np.uint32(1), 1.0, -1.0))

        # Words: maximal runs of word bytes, hashed as sum(byte * multiplier[position]).
        is_word = _WORD_BYTE[raw]
        if is_word.any():
            edges = np.diff(is_word.astype(np.int8), prepend=np.int8(0), append=np.int8(0))
            starts = np.flatnonzero(edges == 1)
            word_of = (
                np.cumsum(edges[:-1] == 1) - 1
            )  # word number of each byte (valid where is_word)
            position = np.arange(len(raw)) - starts[np.clip(word_of, 0, None)]
            in_word = is_word & (position < _MAX_WORD)
            contrib = np.zeros(len(raw), dtype=np.uint64)
            with np.errstate(over="ignore"):
                contrib[in_word] = (raw[in_word].astype(np.uint64) + np.uint64(1)) * _POSITION[
                    position[in_word]
                ]
            sums = np.add.reduceat(contrib, starts) if len(starts) else np.zeros(0, np.uint64)
            with np.errstate(over="ignore"):
                mixed = (sums ^ (sums >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
                mixed ^= mixed >> np.uint64(32)
            index_parts.append(row_of[starts] * dim + (mixed % np.uint64(dim)).astype(np.int64))
            weight_parts.append(np.where((mixed >> np.uint64(40)) & np.uint64(1), 2.0, -2.0))

        flat = np.bincount(
            np.concatenate(index_parts), weights=np.concatenate(weight_parts), minlength=n * dim
        )
        out = flat.reshape(n, dim).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
