"""The per-group embedder stamp: written with a group's first vectors, reported by
knowledge_status, and healed by a rebuild (or a backfill) after the embedder changed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lcg import Engine, Settings, open_engine
from lcg.embedding import stamp
from lcg.engine import exclusive
from lcg.service.registry import Context, dispatch
from lcg.storage.store import delete_database_files

pytestmark = pytest.mark.anyio


def hash_settings(tmp_path: Path, dim: int) -> Settings:
    return Settings.for_home(
        tmp_path / ".lcg", kuzu_buffer_pool_mb=256, embedder="hash", embedding_dim=dim
    )


async def status(engine: Engine) -> dict[str, Any]:
    return await dispatch(engine, "knowledge_status", {})


async def write_group(engine: Engine, group: str, names: list[str]) -> None:
    for name in names:
        await dispatch(
            engine,
            "knowledge_assert_entity",
            {"name": name, "summary": f"About {name}.", "group_id": group},
        )


async def test_a_group_is_stamped_with_the_embedder_of_its_first_vectors(tmp_path: Path) -> None:
    engine = open_engine(hash_settings(tmp_path, 384))
    try:
        assert (await status(engine))["embedding_model_status"] == "ok"  # nothing to compare
        await write_group(engine, "g1", ["Apollo 13", "Jim Lovell"])
        result = await status(engine)
    finally:
        engine.close()
    assert result["embedding_model"] == "hash-ngram-v2-384" and result["embedding_dim"] == 384
    assert result["embedding_model_status"] == "ok"
    assert result["embedding_groups"] == {
        "g1": {"model": "hash-ngram-v2-384", "dim": 384, "vectors": 4, "status": "ok"}
    }


async def test_another_embedder_is_a_mismatch_that_a_rebuild_heals(tmp_path: Path) -> None:
    engine = open_engine(hash_settings(tmp_path, 384))
    try:
        await write_group(engine, "g1", ["Apollo 13", "Jim Lovell", "Fred Haise"])
    finally:
        engine.close()

    engine = open_engine(hash_settings(tmp_path, 256))
    try:
        before = await status(engine)
        assert before["embedding_model"] == "hash-ngram-v2-256"
        assert before["embedding_model_status"] == "mismatch"
        assert before["embedding_groups"]["g1"]["model"] == "hash-ngram-v2-384"
        assert before["embedding_groups"]["g1"]["status"] == "mismatch"

        # A new group written now is stamped with the embedder in use; g1 stays mismatched.
        await write_group(engine, "g2", ["Apollo 11"])
        mixed = await status(engine)
        assert mixed["embedding_groups"]["g2"]["status"] == "ok"
        assert mixed["embedding_model_status"] == "mismatch"

        # Writing more into g1 with the new embedder does not hide the mismatch.
        await write_group(engine, "g1", ["Jack Swigert"])
        assert (await status(engine))["embedding_groups"]["g1"]["status"] == "mismatch"

        frames: list[dict[str, Any]] = []
        rebuilt = await dispatch(  # with progress: synchronous, not a background job
            engine,
            "knowledge_rebuild_from_wal",
            {"group_id": "g1", "force_clear": True},
            Context(progress=frames.append),
        )
        assert rebuilt["success"] is True
        after = await status(engine)
    finally:
        engine.close()
    assert after["embedding_model_status"] == "ok"
    assert after["embedding_groups"]["g1"] == {
        "model": "hash-ngram-v2-256",
        "dim": 256,
        "vectors": 8,
        "status": "ok",
    }


async def test_a_database_rebuilt_from_the_wal_at_open_is_stamped_with_the_current_embedder(
    tmp_path: Path,
) -> None:
    engine = open_engine(hash_settings(tmp_path, 384))
    try:
        await write_group(engine, "g1", ["Apollo 13"])
    finally:
        engine.close()
    settings = hash_settings(tmp_path, 128)
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        result = await status(engine)
    finally:
        engine.close()
    assert result["embedding_model_status"] == "ok"
    assert result["embedding_groups"]["g1"]["model"] == "hash-ngram-v2-128"


async def test_a_purged_group_loses_its_stamp_and_takes_the_next_embedders(tmp_path: Path) -> None:
    engine = open_engine(hash_settings(tmp_path, 384))
    try:
        await write_group(engine, "g1", ["Apollo 13"])
    finally:
        engine.close()
    engine = open_engine(hash_settings(tmp_path, 64))
    try:
        await dispatch(engine, "knowledge_delete_by_group", {"group_ids": ["g1"], "confirm": True})
        assert "g1" not in (await status(engine))["embedding_groups"]
        await write_group(engine, "g1", ["Apollo 14"])
        result = await status(engine)
    finally:
        engine.close()
    assert result["embedding_groups"]["g1"]["model"] == "hash-ngram-v2-64"
    assert result["embedding_model_status"] == "ok"


async def test_vectors_without_a_stamp_are_reported_and_never_stamped_by_a_guess(
    engine: Engine,
) -> None:
    await write_group(engine, "g1", ["Apollo 13"])
    with exclusive.write_lock(engine), exclusive.store(engine).transaction() as tx:
        stamp.clear_stamp(tx, "g1")  # as a database written before stamps existed
    await write_group(engine, "g1", ["Apollo 14"])
    result = await status(engine)
    assert result["embedding_model_status"] == "unstamped"
    assert result["embedding_groups"]["g1"]["model"] is None
    await dispatch(engine, "knowledge_backfill_summary_embeddings", {"group_ids": ["g1"]})
    assert (await status(engine))["embedding_model_status"] == "ok"
