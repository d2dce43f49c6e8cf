"""`knowledge_build_indices` (docs/api.md §knowledge_build_indices): drop lcg's in-process search
index and load it again for every group, now (it otherwise loads at open and after a rebuild, or
lazily)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from lcg.engine import Engine, exclusive
from lcg.errors import StorageError

__all__ = ["build_indices", "build_search_index"]


def build_search_index(engine: Engine) -> None:
    """Drop the search index and build it again from the database for every group (in a
    worker thread).

    Runs without the write lock, as the load at open does: texts the embedding cache lacks
    may need the model, and loads that race with commits are settled by the index's
    per-group versions. `Engine.state.indices_built` is false from the start and true only once every
    partition loaded.

    Raises:
        StorageError: the load failed (the index then reloads lazily on the next search).
    """
    index = engine.parts.search
    exclusive.set_indices_built(engine, False)
    index.forget_saved()  # a rebuild reads the database, not the copy saved at the last close
    index.reset()
    try:
        index.warm()
    except Exception as exc:
        index.reset()
        raise StorageError(f"search index build failed: {exc}") from exc
    exclusive.set_indices_built(engine, True)


async def build_indices(engine: Engine) -> dict[str, Any]:
    """`knowledge_build_indices`: rebuild lcg's search index eagerly."""
    await anyio.to_thread.run_sync(build_search_index, engine)
    return {"status": "ok", "indices_built": True}
