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

from lcg.embedding.base import EmbedderIdentity, Vectors

__all__ = ["HashEmbedder"]

_P1, _P2 = np.uint32(0x01000193), np.uint32(0x9E3779B1)  # odd multipliers for trigram hashing
_CHUNK = 1024  # texts per batch: keeps the scratch arrays small
_MAX_WORD = 64  # bytes of a word that count towards its hash
# One fixed odd 64-bit multiplier per position in a word (a seeded generator: same on every machine).
_POSITION = np.random.default_rng(20261130).integers(1, 2**63, size=_MAX_WORD, dtype=np.uint64) | 1
# Per byte value, its trigram factors when first and second of a window (uint32 arithmetic wraps,
# so b * P1 * P1 is one table lookup).
with np.errstate(over="ignore"):
    _TRI_SECOND = np.arange(256, dtype=np.uint32) * _P1
    _TRI_FIRST = _TRI_SECOND * _P1
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
        rows = np.arange(n, dtype=np.int64) * dim  # each text's first cell in the flat output

        # Trigrams: every window of three bytes inside one text (a text of k bytes has k - 2;
        # the two windows starting at a text's last two bytes would cross into the next).
        ends = np.cumsum(lengths)
        inside = np.ones(len(raw) - 2, dtype=bool)
        inside[ends[:-1] - 2] = False
        inside[ends[:-1] - 1] = False
        h = (_TRI_FIRST[raw[:-2]] ^ _TRI_SECOND[raw[1:-1]] ^ raw[2:]) * _P2
        h = h[inside]
        tri_index = np.repeat(rows, lengths - 2) + ((h >> np.uint32(8)) % np.uint32(dim)).astype(
            np.int64
        )
        tri_weight = np.where(h & np.uint32(1), 1.0, -1.0)

        # Words: maximal runs of word bytes, hashed as sum(byte * multiplier[position]) over
        # their first _MAX_WORD bytes. A text starts and ends with a space, so every run lies
        # inside one text and starts after, and ends before, a non-word byte.
        is_word = _WORD_BYTE[raw]
        starts = np.flatnonzero(is_word[1:] > is_word[:-1]) + 1
        if not len(starts):
            word_index = np.zeros(0, dtype=np.int64)
            word_weight = np.zeros(0, dtype=np.float64)
        else:
            stops = np.flatnonzero(is_word[:-1] > is_word[1:]) + 1
            counted = np.minimum(stops - starts, _MAX_WORD)  # bytes of each word hashed
            offsets = np.zeros(len(starts), dtype=np.int64)
            np.cumsum(counted[:-1], out=offsets[1:])
            position = np.arange(int(offsets[-1] + counted[-1])) - np.repeat(offsets, counted)
            at = np.repeat(starts, counted) + position
            with np.errstate(over="ignore"):
                contrib = (raw[at].astype(np.uint64) + np.uint64(1)) * _POSITION[position]
                sums = np.add.reduceat(contrib, offsets)
                mixed = (sums ^ (sums >> np.uint64(29))) * np.uint64(0xBF58476D1CE4E5B9)
                mixed ^= mixed >> np.uint64(32)
            text_of = np.searchsorted(ends, starts, side="right")
            word_index = rows[text_of] + (mixed % np.uint64(dim)).astype(np.int64)
            word_weight = np.where((mixed >> np.uint64(40)) & np.uint64(1), 2.0, -2.0)

        flat = np.bincount(
            np.concatenate([tri_index, word_index]),
            weights=np.concatenate([tri_weight, word_weight]),
            minlength=n * dim,
        )
        out = flat.reshape(n, dim).astype(np.float32)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out
