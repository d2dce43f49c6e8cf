"""Damaged WAL mark files at startup: a checkpoint record or the stream's generation
file that no longer parses must not crash the open nor be dropped in silence. It is found, rebuilt
from what still names its content (the WAL, the damaged text, the database's applied position),
and reported in `knowledge_status.wal_problems` (kind `mark_file_corrupt`).

Real engine, real WAL and Kuzu; the damage is done to the files between two opens.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.wal.layout import GENERATION_FILE, group_dir, read_generation

pytestmark = pytest.mark.anyio

G = "marks"
SETTINGS: dict[str, Any] = {"kuzu_buffer_pool_mb": 128, "embedder": "hash"}


async def _write(engine: Any, name: str) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": G})


async def _marks(engine: Any) -> dict[str, Any]:
    listed = await dispatch(engine, "knowledge_wal_mark_list", {"group_id": G})
    return {m["name"]: m for m in listed["checkpoints"]}


async def _problems(engine: Any) -> list[dict[str, Any]]:
    status = await dispatch(engine, "knowledge_status", {})
    return [p for p in status["wal_problems"] if p["group_id"] == G]


def _damage(path: Path, content: bytes) -> None:
    """Overwrite a file as bit rot would: new bytes, the old modification time."""
    made = path.stat()
    path.write_bytes(content)
    os.utime(path, ns=(made.st_atime_ns, made.st_mtime_ns))


async def test_a_damaged_checkpoint_record_is_rebuilt_from_the_wal_and_reported(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    settings = Settings.for_home(home, **SETTINGS)
    engine = open_engine(settings)
    try:
        for name in ("a", "b", "c"):
            await _write(engine, name)
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "m1", "group_id": G})
        await anyio.sleep(0.05)  # the WAL's timestamps and the file's mtime must tell them apart
        for name in ("d", "e"):
            await _write(engine, name)
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "m2", "group_id": G})
        before = await _marks(engine)
    finally:
        engine.close()
    assert (before["m1"]["seq"], before["m2"]["seq"]) == (2, 4)
    directory = group_dir(settings.wal_dir, G) / ".checkpoints"
    _damage(directory / "m1" / "g1.create.json", b'{"name":"m1","se\x00\x00')  # seq unreadable
    _damage(directory / "m2" / "g1.create.json", b'{"name":"m2","seq":4,"created_at_ms":1')

    sink = ListSink()
    engine = open_engine(settings, events=sink)
    try:
        after = await _marks(engine)
        assert after == before  # both back, as they were
        assert len(sink.of_type("wal_mark_file_corrupt")) == 2
        problems = sorted(await _problems(engine), key=lambda p: p["mark"])
        assert [(p["kind"], p["mark"], p["rebuilt"], p["seq"]) for p in problems] == [
            ("mark_file_corrupt", "m1", True, 2),
            ("mark_file_corrupt", "m2", True, 4),
        ]
        assert problems[0]["file"] == ".checkpoints/m1/g1.create.json"
        kept = sorted(p.name for p in (directory / "m1").iterdir())
        assert kept[0] == "g1.create.json" and kept[1].startswith("g1.create.json.corrupt-")
    finally:
        engine.close()
    engine = open_engine(settings)  # repaired once: still reported, not again repaired
    try:
        assert len(await _problems(engine)) == 2
        assert await _marks(engine) == before
    finally:
        engine.close()


async def test_a_damaged_generation_file_is_restored_and_the_tail_still_caught_up(
    tmp_path: Path,
) -> None:
    home = tmp_path / "ws"
    settings = Settings.for_home(home, **SETTINGS)
    engine = open_engine(settings)
    try:
        await _write(engine, "a")
        generation = read_generation(group_dir(settings.wal_dir, G))
    finally:
        engine.close()
    assert generation is not None
    directory = group_dir(settings.wal_dir, G)
    _damage(directory / GENERATION_FILE, b'{"generation": "')

    engine = open_engine(settings)
    try:
        status = await dispatch(engine, "knowledge_status", {})
        wal = status["wal_groups"][G]
        assert (wal["generation"], wal["generation_status"]) == (generation, "known")
        problems = await _problems(engine)
        assert [(p["kind"], p["file"], p["rebuilt"], p["rebuilt_from"]) for p in problems] == [
            ("mark_file_corrupt", GENERATION_FILE, True, "database_position")
        ]
        await _write(engine, "b")  # writes go on in the same generation
        status = await dispatch(engine, "knowledge_status", {})
        assert status["wal_groups"][G]["hydration_status"] == "hydrated"
    finally:
        engine.close()
    assert read_generation(directory) == generation
