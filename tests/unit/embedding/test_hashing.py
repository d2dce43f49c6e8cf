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
