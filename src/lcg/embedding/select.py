"""Choosing the embedder from the settings (`LCG_EMBEDDER`), once, at an entry point.

- `hash`: the built-in lexical embedder (`LCG_EMBEDDING_DIM`, default 384).
- `http`: an OpenAI-compatible endpoint (`--embedder-uds` / `LCG_EMBEDDING_UDS` wins over
  `--embedder-http` / `LCG_EMBEDDING_URL`), probed at startup.
- `onnx`: a local ONNX model (the extra `lcg[embeddings]`): `LCG_EMBEDDING_MODEL_PATH`, else
  the model `LCG_EMBEDDING_MODEL` (default all-MiniLM-L6-v2-int8, else the only or first model
  cached) in the model cache that `lcg models pull` fills (lcg.embedding.catalog).
- `fastembed`, `sentence-transformers`: a local model (optional extras).
- `auto` (the default): an endpoint if one is configured (its failures are fatal: it was asked
  for); otherwise an ONNX model if onnxruntime is installed and a model is cached (or
  `LCG_EMBEDDING_MODEL_PATH` holds one); otherwise fastembed if it is installed and its model
  loads from local files; otherwise an installed sentence-transformers model; otherwise
  `hash`, with a one-line notice saying how to get semantic search. `auto` never downloads.

An explicit choice that cannot be satisfied is a `ConfigError` naming what failed, raised before
the database is opened. A configured `LCG_EMBEDDING_DIM` is a requirement on any model.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

from lcg.config import Settings
from lcg.embedding.base import Embedder
from lcg.embedding.cache import CachedEmbedder
from lcg.embedding.catalog import DEFAULT_MODEL, cached_model_dir, default_models_dir
from lcg.embedding.fastembed_provider import fastembed_installed, load_fastembed
from lcg.embedding.hashing import HashEmbedder
from lcg.embedding.http import Endpoint, connect_http
from lcg.embedding.onnx_provider import find_model_file, load_onnx, onnx_installed
from lcg.embedding.sentence_transformers_provider import (
    load_sentence_transformer,
    model_package_installed,
    sentence_transformers_installed,
)
from lcg.errors import ConfigError

__all__ = [
    "DEFAULT_HASH_DIM",
    "build_embedder",
    "embedder_for_stamp",
    "models_dir",
    "select_embedder",
]

logger = logging.getLogger(__name__)

DEFAULT_HASH_DIM = 384


def _hash(settings: Settings) -> Embedder:
    return HashEmbedder(settings.embedding_dim or DEFAULT_HASH_DIM)


def _http(settings: Settings) -> Embedder:
    if not (settings.embedding_uds or settings.embedding_url):
        raise ConfigError(
            "LCG_EMBEDDER=http needs an endpoint: --embedder-http URL, --embedder-uds PATH, "
            "LCG_EMBEDDING_URL or LCG_EMBEDDING_UDS"
        )
    endpoint = (
        Endpoint(uds=settings.embedding_uds)
        if settings.embedding_uds
        else Endpoint(url=settings.embedding_url)
    )
    return connect_http(
        endpoint,
        model=settings.embedding_model,
        dim=settings.embedding_dim,
        batch_size=settings.embedding_batch_size,
        timeout_s=settings.embedding_timeout_ms / 1000,
    )


def _checked(embedder: Embedder, settings: Settings) -> Embedder:
    """The embedder, if it produces the configured `LCG_EMBEDDING_DIM` (when one is set)."""
    identity = embedder.identity
    if settings.embedding_dim is not None and identity.dim != settings.embedding_dim:
        raise ConfigError(
            f"LCG_EMBEDDING_DIM={settings.embedding_dim}, but model {identity.model} produces "
            f"{identity.dim}-dimensional vectors; unset LCG_EMBEDDING_DIM or set it to "
            f"{identity.dim}"
        )
    return embedder


def _fastembed(settings: Settings, allow_download: bool = True) -> Embedder:
    loaded = load_fastembed(
        settings.embedding_model,
        settings.embedding_model_path,
        batch_size=settings.embedding_batch_size,
        allow_download=allow_download,
    )
    return _checked(loaded, settings)


def models_dir(settings: Settings) -> Path:
    """The model cache of `lcg models` (`LCG_MODELS_DIR`, default the user's cache dir)."""
    return Path(settings.models_dir) if settings.models_dir else default_models_dir()


def _onnx_dir(settings: Settings) -> Path | None:
    """The ONNX model directory the settings name, or None when none is available."""
    if settings.embedding_model_path:
        return Path(settings.embedding_model_path)
    # No name: the default model if cached, else the only (first) cached one, e.g. a variant.
    return cached_model_dir(models_dir(settings), settings.embedding_model)


def _onnx(settings: Settings) -> Embedder:
    directory = _onnx_dir(settings)
    if directory is None:
        raise ConfigError(
            f"no ONNX model {settings.embedding_model or DEFAULT_MODEL} in "
            f"{models_dir(settings)}: run `lcg models pull`, or set LCG_EMBEDDING_MODEL_PATH "
            "to a model directory"
        )
    name = settings.embedding_model if settings.embedding_model_path else None
    loaded = load_onnx(directory, name, batch_size=settings.embedding_batch_size)
    return _checked(loaded, settings)


def _sentence_transformers(settings: Settings) -> Embedder:
    loaded = load_sentence_transformer(
        settings.embedding_model,
        settings.embedding_model_path,
        batch_size=settings.embedding_batch_size,
    )
    return _checked(loaded, settings)


def _auto(settings: Settings) -> Embedder:
    if settings.embedding_uds or settings.embedding_url:
        return _http(settings)
    candidates: list[tuple[str, Callable[[], Embedder]]] = []
    onnx_dir = _onnx_dir(settings) if onnx_installed() else None
    if onnx_dir is not None and find_model_file(onnx_dir) is not None:
        candidates.append(("onnx", lambda: _onnx(settings)))
    if fastembed_installed():
        candidates.append(("fastembed", lambda: _fastembed(settings, allow_download=False)))
    if sentence_transformers_installed() and (
        settings.embedding_model_path or settings.embedding_model or model_package_installed()
    ):
        candidates.append(("sentence-transformers", lambda: _sentence_transformers(settings)))
    for name, load in candidates:
        try:
            embedder = load()
        except ConfigError as exc:
            logger.warning("LCG_EMBEDDER=auto: %s embedder unavailable: %s", name, exc.message)
            continue
        logger.info("LCG_EMBEDDER=auto: using %s (%s)", name, embedder.identity.model)
        return embedder
    logger.warning(
        "LCG_EMBEDDER=auto: no local embedding model, so lcg uses the lexical-only hash "
        "embedder (search matches spelling, not meaning); for semantic search: "
        "pip install 'lcg[embeddings]' && lcg models pull"
    )
    return _hash(settings)


_CHOICES: dict[str, Callable[[Settings], Embedder]] = {
    "auto": _auto,
    "hash": _hash,
    "onnx": _onnx,
    "http": _http,
    "fastembed": _fastembed,
    "sentence-transformers": _sentence_transformers,
}


def select_embedder(settings: Settings) -> Embedder:
    """The embedder `settings` ask for (see the module docstring), probed or loaded.

    Raises:
        ConfigError: an explicitly chosen embedder (or a configured endpoint) is unavailable.
    """
    choose = _CHOICES.get(settings.embedder)
    if choose is None:
        raise ConfigError(
            f"invalid LCG_EMBEDDER={settings.embedder!r}: must be one of: {', '.join(_CHOICES)}"
        )
    return choose(settings)


def build_embedder(settings: Settings, inner: Embedder | None = None) -> CachedEmbedder:
    """`inner` (default: `select_embedder(settings)`) behind the workspace's embedding cache.

    Raises:
        ConfigError: as `select_embedder`.
    """
    return CachedEmbedder(inner or select_embedder(settings), settings.home / "embeddings")


def embedder_for_stamp(settings: Settings, model: str, dim: int) -> CachedEmbedder | None:
    """The embedder that made vectors stamped (`model`, `dim`), behind the workspace's
    embedding cache, when it can be had here without a download or an endpoint: the hash
    embedder of that dimension, or an ONNX model of that name in the model cache. None
    otherwise (search then cannot answer from the old vectors: it needs the old model for the
    query's vector). Never raises: a model that fails to load is None."""
    inner: Embedder | None = None
    hashed = HashEmbedder(dim) if dim > 0 else None
    if hashed is not None and hashed.identity.model == model:
        inner = hashed
    elif onnx_installed():
        directory = cached_model_dir(models_dir(settings), model)
        if directory is not None and find_model_file(directory) is not None:
            try:
                inner = load_onnx(directory, None, batch_size=settings.embedding_batch_size)
            except ConfigError as exc:
                logger.warning("the stamped embedding model %s does not load: %s", model, exc)
    if inner is None or inner.identity.model != model or inner.identity.dim != dim:
        return None
    return CachedEmbedder(inner, settings.home / "embeddings")
