"""One writer per WAL, held by the kernel: deleting the lock file lets no second writer in, and a
damaged bounds cache never hands a seq out twice (even with the database gone)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files
from lcg.wal.layout import BOUNDS_FILE, group_dir, ordered_files, read_bounds
from lcg.wal.lock import LOCK_FILE
from lcg.wal.reader import parse_line

pytestmark = pytest.mark.anyio

GROUP = "lock"


def _open_elsewhere(home: Path, wal_dir: Path) -> str:
    """In a new process, open an engine with its own database on `wal_dir` and write one
    entity: "LOCKED <message>" or "WROTE"."""
    script = textwrap.dedent(
        f"""
        import asyncio
        from pathlib import Path
        from lcg import Settings, open_engine
        from lcg.service.registry import dispatch
        from lcg.wal.lock import WalLockedError
        settings = Settings.for_home(Path({str(home)!r}), wal_dir=Path({str(wal_dir)!r}))
        try:
            engine = open_engine(settings)
        except WalLockedError as exc:
            print("LOCKED", exc)
        else:
            params = {{"name": "Intruder", "group_id": {GROUP!r}}}
            asyncio.run(dispatch(engine, "knowledge_assert_entity", params))
            engine.close()
            print("WROTE")
        """
    )
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=True
    ).stdout


def _seqs(wal_dir: Path) -> list[int]:
    seqs = []
    for path in ordered_files(group_dir(wal_dir, GROUP)):
        for raw in path.read_bytes().split(b"\n"):
            record = parse_line(raw) if raw.strip() else None
            if record is not None:
                seqs.append(record.seq)
    return seqs


async def test_deleting_the_lock_file_lets_no_second_writer_in(
    settings: Settings, tmp_path: Path
) -> None:
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": GROUP})
        (settings.wal_dir / LOCK_FILE).unlink()
        out = _open_elsewhere(tmp_path / "other", settings.wal_dir)
        assert out.startswith("LOCKED"), out
        await dispatch(engine, "knowledge_assert_entity", {"name": "Bob", "group_id": GROUP})
    finally:
        engine.close()
    assert sorted(Counter(_seqs(settings.wal_dir)).values()) == [1, 1]
    assert _open_elsewhere(tmp_path / "other", settings.wal_dir).startswith("WROTE")


async def test_a_bit_flipped_in_the_bounds_cache_never_reuses_a_seq(settings: Settings) -> None:
    """The cache says the stream ends earlier than it does, and no database remembers better:
    the next write still takes a fresh seq (the bounds are checked against the WAL)."""
    engine = open_engine(settings)
    try:
        for name in ("Ada", "Bob", "Cy", "Dee"):
            await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": GROUP})
    finally:
        engine.close()
    directory = group_dir(settings.wal_dir, GROUP)
    top = read_bounds(directory).max_seq  # what a status read leaves behind: a fresh cache
    assert top == 3
    raw = (directory / BOUNDS_FILE).read_bytes()
    at = raw.index(b'"max_seq": 3') + len(b'"max_seq": ')
    damaged = bytearray(raw)
    damaged[at] ^= 0b1  # "3" -> "2": still valid JSON, a smaller seq
    (directory / BOUNDS_FILE).write_bytes(bytes(damaged))
    assert json.loads(damaged)["max_seq"] == 2
    delete_database_files(settings.db_path)

    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Eve", "group_id": GROUP})
    finally:
        engine.close()
    seqs = _seqs(settings.wal_dir)
    assert seqs == [0, 1, 2, 3, 4]
