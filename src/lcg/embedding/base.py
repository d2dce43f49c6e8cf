"""The embedder interface every provider implements."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

__all__ = ["Embedder", "EmbedderIdentity", "Vectors"]

Vectors = npt.NDArray[np.float32]


@dataclass(frozen=True)
class EmbedderIdentity:
    """What produced a vector: vectors of different identities are never compared."""

    model: str
    dim: int
    lexical_only: bool = False


class Embedder(Protocol):
    """Turns texts into L2-normalised float32 rows."""

    @property
    def identity(self) -> EmbedderIdentity: ...

    def embed(self, texts: list[str]) -> Vectors:
        """Return an array of shape (len(texts), identity.dim)."""
        ...
