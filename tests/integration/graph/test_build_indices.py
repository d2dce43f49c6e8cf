"""`knowledge_build_indices` and the `indices_built` flag (docs/api.md §knowledge_build_indices, §knowledge_status).

lcg keeps no Kuzu full-text or vector index: the method drops and reloads lcg's in-process search
index for every group, and `indices_built` says whether that index is loaded — true after a
load at open, false after `knowledge_clear_all` and after a failed build.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from search_support import indexed

from lcg import Engine, Settings, open_engine
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.embedding.hashing import HashEmbedder
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


class _FailingEmbedder:
    """The hash embedder, failing every call while `failing` is set (the embedding boundary)."""

    def __init__(self) -> None:
        self._inner = HashEmbedder()
        self.failing = False

    @property
    def identity(self) -> EmbedderIdentity:
        return self._inner.identity

    def embed(self, texts: list[str]) -> Vectors:
        if self.failing:
            raise RuntimeError("the embedding model is unavailable")
        return self._inner.embed(texts)


async def _indices_built(engine: Engine) -> bool:
    status = await dispatch(engine, "knowledge_status", {})
    return bool(status["indices_built"])


@pytest.mark.kuzu_only("it asks Kuzu for its indexes (CALL SHOW_INDEXES), a Kuzu procedure")
async def test_build_indices_reloads_the_search_index(engine: Engine) -> None:
    assert await _indices_built(engine)  # loaded at open
    await dispatch(engine, "knowledge_assert_entity", {"name": "Quokka", "group_id": "g1"})
    await dispatch(engine, "knowledge_assert_entity", {"name": "Quokka Two", "group_id": "g2"})
    # No full-text index exists to query (LadybugDB also lists each primary key's hash index).
    with engine.reader() as conn:
        assert [r for r in conn.rows("CALL SHOW_INDEXES() RETURN *") if r[2] != "HASH"] == []

    result = await dispatch(engine, "knowledge_build_indices", {})
    assert result == {"status": "ok", "indices_built": True}
    assert await _indices_built(engine)
    assert len(indexed(engine, "Entity", "quokka")) == 2

    await dispatch(engine, "knowledge_clear_all", {"confirm": True})
    assert not await _indices_built(engine)
    assert await dispatch(engine, "knowledge_build_indices", {}) == {
        "status": "ok",
        "indices_built": True,
    }
    assert await _indices_built(engine)
    assert indexed(engine, "Entity", "quokka") == set()


async def test_a_failed_build_leaves_indices_built_false(settings: Settings) -> None:
    embedder = _FailingEmbedder()
    engine = open_engine(settings, embedder=embedder)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Wombat", "group_id": "g"})
    finally:
        engine.close()
    # Without its embedding cache and its saved copy (lcg.search.snapshot), loading the index
    # must embed the stored texts again.
    shutil.rmtree(Path(settings.home) / "embeddings")
    saved = settings.db_path.parent / "search-index"
    assert saved.is_dir() == (settings.storage == "kuzu")  # server mode saves no local copy
    if saved.is_dir():
        shutil.rmtree(saved)
    embedder.failing = True
    engine = open_engine(settings, embedder=embedder)  # the load at open fails: not fatal
    try:
        assert not await _indices_built(engine)
        with pytest.raises(Exception, match="search index build failed"):
            await dispatch(engine, "knowledge_build_indices", {})
        assert not await _indices_built(engine)

        embedder.failing = False
        result = await dispatch(engine, "knowledge_build_indices", {})
        assert result == {"status": "ok", "indices_built": True}
        assert await _indices_built(engine)
        assert len(indexed(engine, "Entity", "wombat")) == 1
    finally:
        engine.close()
