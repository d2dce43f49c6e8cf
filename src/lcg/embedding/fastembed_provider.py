"""fastembed (ONNX Runtime, local, no torch): the optional extra `lcg[fastembed]`.

The model is a fastembed model name (default `BAAI/bge-small-en-v1.5`), loaded from fastembed's
cache (`FASTEMBED_CACHE_PATH`) or from a local directory (`LCG_EMBEDDING_MODEL_PATH`, a
`model.onnx` with its tokenizer files). `allow_download=False` (what auto-selection uses) never
touches the network, so an offline machine fails fast instead of hanging. Loaded models are
kept per process: reopening an engine does not load the model again.
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from typing import Any

import numpy as np

from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.errors import ConfigError

__all__ = ["DEFAULT_FASTEMBED_MODEL", "FastembedEmbedder", "fastembed_installed", "load_fastembed"]

DEFAULT_FASTEMBED_MODEL = "BAAI/bge-small-en-v1.5"


def fastembed_installed() -> bool:
    return importlib.util.find_spec("fastembed") is not None


# One inference at a time in the process: ONNX Runtime already uses every core.
_INFERENCE = threading.Lock()


@functools.lru_cache(maxsize=4)
def _load(model: str, model_path: str | None, allow_download: bool) -> Any:
    from fastembed import TextEmbedding

    kwargs: dict[str, Any] = {"local_files_only": not allow_download}
    if model_path is not None:
        kwargs["specific_model_path"] = model_path
    return TextEmbedding(model_name=model, **kwargs)


class FastembedEmbedder:
    """A loaded fastembed `TextEmbedding`; rows are L2-normalised float32."""

    def __init__(self, model: Any, name: str, batch_size: int) -> None:
        self._model = model
        self.batch_size = batch_size
        dim = int(self._encode(["dimension probe"]).shape[1])
        self._identity = EmbedderIdentity(model=name, dim=dim)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def _encode(self, texts: list[str]) -> Vectors:
        with _INFERENCE:
            rows = list(self._model.embed(texts, batch_size=self.batch_size))
        out = np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.divide(out, norms, out=out, where=norms > 0)
        return out

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.empty((0, self._identity.dim), dtype=np.float32)
        return self._encode(texts)


def load_fastembed(
    model: str | None, model_path: str | None, *, batch_size: int, allow_download: bool
) -> FastembedEmbedder:
    """Load a fastembed model.

    Raises:
        ConfigError: fastembed is not installed, or the model cannot be loaded (not in the
            cache and downloads not allowed or impossible); the message names the model.
    """
    if not fastembed_installed():
        raise ConfigError(
            "the fastembed embedder needs the fastembed package: pip install 'lcg[fastembed]'"
        )
    name = model or DEFAULT_FASTEMBED_MODEL
    try:
        loaded = _load(name, model_path, allow_download)
        return FastembedEmbedder(loaded, name, batch_size)
    except Exception as exc:  # fastembed raises ValueError, OSError, onnxruntime errors, ...
        where = f" from {model_path}" if model_path else ""
        raise ConfigError(f"fastembed could not load model {name}{where}: {exc}") from exc
