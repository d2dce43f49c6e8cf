"""The graph store `LCG_STORAGE` names, opened: the one place that picks a backend, so the
engine holds a `GraphBackend` and never asks which one it has."""

from __future__ import annotations

from lcg.config import Settings
from lcg.storage.backend import GraphBackend
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.store import Store

__all__ = ["open_backend", "open_store"]


def open_store(settings: Settings) -> Store:
    """The workspace's embedded database, on the engine `LCG_EMBEDDED_STORE` names.

    Raises:
        EngineMismatchError: the database was written by the other engine
            (`lcg.engine.carryover` moves it aside first).
        StorageError: the database cannot be opened.
    """
    return Store(
        settings.db_path,
        buffer_pool_mb=settings.kuzu_buffer_pool_mb,
        engine=settings.embedded_store,
    )


def open_backend(settings: Settings) -> GraphBackend:
    """Open the configured store: the workspace's embedded database, or the FalkorDB server of
    `LCG_FALKORDB_URL` (its client is imported only then: the `server` extra).

    Raises:
        StorageError: the database cannot be opened or the server cannot be reached.
    """
    if settings.storage == "falkordb":
        from lcg.storage.falkordb.backend import FalkorBackend

        return FalkorBackend.from_settings(settings)
    return KuzuBackend(open_store(settings))
