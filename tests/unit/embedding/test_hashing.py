"""The hash embedder: deterministic, batch-independent, normalised, lexical."""

from __future__ import annotations

import numpy as np
import pytest

from lcg.embedding import HashEmbedder


def test_vectors_are_unit_length_and_empty_text_is_zero() -> None:
    vectors = HashEmbedder(64).embed(["Neil Armstrong", "", "é ü café"])
    assert vectors.shape == (3, 64) and vectors.dtype == np.float32
    assert np.allclose(np.linalg.norm(vectors[[0, 2]], axis=1), 1.0, atol=1e-6)
    assert not vectors[1].any()


def test_a_text_gets_the_same_vector_alone_or_in_any_batch() -> None:
    embedder = HashEmbedder(128)
    texts = [f"apollo {i} lunar module" for i in range(2500)]  # spans several internal chunks
    together = embedder.embed(texts)
    assert np.array_equal(together[1234], embedder.embed([texts[1234]])[0])
    assert np.array_equal(embedder.embed(texts[::-1])[::-1], together)


def test_case_and_spacing_do_not_matter_but_words_do() -> None:
    v = HashEmbedder().embed(
        ["Neil Armstrong", "neil   ARMSTRONG", "Armstrong Neil", "Saturn V rocket"]
    )
    assert v[0] @ v[1] > 0.9
    assert v[0] @ v[2] > 0.8  # same words, other order: only the boundary trigrams differ
    assert abs(v[0] @ v[3]) < 0.2


def test_the_identity_names_the_dimension_and_is_lexical_only() -> None:
    identity = HashEmbedder(96).identity
    assert (identity.model, identity.dim, identity.lexical_only) == ("hash-ngram-v2-96", 96, True)


def test_a_tiny_dimension_is_refused() -> None:
    with pytest.raises(ValueError):
        HashEmbedder(4)


def _reference(texts: list[str], dim: int) -> np.ndarray:
    """The embedder's definition, one text and one token at a time (plain integers)."""
    p1, p2, mask32, mask64 = 0x01000193, 0x9E3779B1, 2**32 - 1, 2**64 - 1
    position = np.random.default_rng(20261130).integers(1, 2**63, size=64, dtype=np.uint64) | 1
    word_byte = set(range(ord("0"), ord("9") + 1)) | set(range(ord("a"), ord("z") + 1))
    word_byte |= {ord("_"), *range(0x80, 0x100)}
    out = np.zeros((len(texts), dim), dtype=np.float64)
    for row, text in enumerate(texts):
        data = f" {text.lower()} ".encode()
        for i in range(len(data) - 2):
            h = (((data[i] * p1 * p1) ^ (data[i + 1] * p1) ^ data[i + 2]) * p2) & mask32
            out[row, (h >> 8) % dim] += 1.0 if h & 1 else -1.0
        i = 0
        while i < len(data):
            if data[i] not in word_byte:
                i += 1
                continue
            j, total = i, 0
            while j < len(data) and data[j] in word_byte:
                if j - i < 64:
                    total = (total + (data[j] + 1) * int(position[j - i])) & mask64
                j += 1
            mixed = ((total ^ (total >> 29)) * 0xBF58476D1CE4E5B9) & mask64
            mixed ^= mixed >> 32
            out[row, mixed % dim] += 2.0 if (mixed >> 40) & 1 else -2.0
            i = j
    vectors = out.astype(np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    np.divide(vectors, norms, out=vectors, where=norms > 0)
    return vectors


@pytest.mark.parametrize("dim", [8, 64, 384])
def test_vectors_equal_the_per_token_definition_bit_for_bit(dim: int) -> None:
    # Cached vectors are keyed by the model name: a faster embedder must give the same bits.
    texts = [
        "Neil Armstrong",
        "",
        " ",
        "a",
        "é ü café — 😀",
        "x" * 130,  # a word longer than the 64 bytes that count
        "Apollo 11's crew: Armstrong, Aldrin & Collins.\nLaunched 1969-07-16.",
        "a_b-c'd 42 ..",
    ]
    assert np.array_equal(HashEmbedder(dim).embed(texts), _reference(texts, dim))
