"""Embedders: the one-method seam `embed(texts) -> ndarray[n, dim]` and its implementations."""

from lcg.embedding.base import Embedder, EmbedderIdentity
from lcg.embedding.hashing import HashEmbedder

__all__ = ["Embedder", "EmbedderIdentity", "HashEmbedder"]
