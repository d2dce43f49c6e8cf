"""The name index saved next to the database (lcg.engine.names): a reopen reads it back instead
of scanning every entity and resolves names as before; a copy older than the database (commits
after it was saved, as after a crash) is never used, and a damaged one (bytes changed, cut
short, unreadable stamp) is a log line and a scan, never a failed open."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.storage import graph

pytestmark = pytest.mark.anyio

GROUP = "liminis"


def forbid_name_scan(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the name index scanned the database instead of its saved copy")

    monkeypatch.setattr(graph, "name_rows", refuse)


async def resolved(engine: Any, name: str) -> str | None:
    entity = await engine.entity_by_name(GROUP, name)
    return None if entity is None else str(entity.name)


async def seeded(settings: Settings) -> Path:
    engine = open_engine(settings)
    try:
        for i in range(6):
            await dispatch(engine, "knowledge_assert_entity", {"name": f"Saturn stage {i}"})
        assert await resolved(engine, "saturn STAGE 3 ") == "Saturn stage 3"
    finally:
        engine.close()
    saved = settings.db_path.parent / "name-index"
    assert (saved / "names.npz").exists() and (saved / "stamp.json").exists()
    return saved


async def test_a_reopen_reads_the_saved_names_and_a_stale_copy_is_not_used(
    settings: Settings, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    saved = await seeded(settings)
    old = settings.home / "old-names"
    shutil.copytree(saved, old)

    with monkeypatch.context() as patch:
        forbid_name_scan(patch)
        engine = open_engine(settings)
        try:
            assert await resolved(engine, "Saturn stage 3") == "Saturn stage 3"
            assert await resolved(engine, "Lunar module") is None
            await dispatch(engine, "knowledge_assert_entity", {"name": "Lunar module"})
            assert await resolved(engine, "lunar module") == "Lunar module"
        finally:
            engine.close()

    # The copy from before "Lunar module": the database moved on since, so it must not be used.
    shutil.rmtree(saved)
    shutil.copytree(old, saved)
    with caplog.at_level(logging.INFO, logger="lcg.engine.names"):
        engine = open_engine(settings)
    try:
        assert "stale" in caplog.text
        assert await resolved(engine, "Lunar module") == "Lunar module"
        assert await resolved(engine, "Saturn stage 5") == "Saturn stage 5"
    finally:
        engine.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "stamp", "missing"])
async def test_a_damaged_copy_is_logged_and_the_names_scanned(
    settings: Settings, caplog: pytest.LogCaptureFixture, damage: str
) -> None:
    saved = await seeded(settings)
    data = saved / "names.npz"
    raw = bytearray(data.read_bytes())
    if damage == "flip":
        raw[len(raw) // 2] ^= 0xFF
        data.write_bytes(bytes(raw))
    elif damage == "truncate":
        data.write_bytes(bytes(raw[: len(raw) // 3]))
    elif damage == "stamp":
        (saved / "stamp.json").write_text('{"format": 1, "digest": ')
    else:
        data.unlink()
    with caplog.at_level(logging.WARNING, logger="lcg.engine.names"):
        engine = open_engine(settings)
    try:
        assert "name index snapshot" in caplog.text
        assert "read from the database" in caplog.text
        assert await resolved(engine, "saturn stage 4") == "Saturn stage 4"
    finally:
        engine.close()
    # Saved again at that close, whole: the next open reads it.
    engine = open_engine(settings)
    try:
        assert len(engine._names) == 6
    finally:
        engine.close()
    assert data.exists()


async def test_a_cleared_workspace_does_not_read_back_the_old_names(settings: Settings) -> None:
    await seeded(settings)
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_clear_all", {"confirm": True})
        assert await resolved(engine, "Saturn stage 1") is None
    finally:
        engine.close()
    engine = open_engine(settings)
    try:
        assert await resolved(engine, "Saturn stage 1") is None
        assert len(engine._names) == 0
    finally:
        engine.close()
