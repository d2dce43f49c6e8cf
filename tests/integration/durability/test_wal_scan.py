"""The background checksum pass after an open: a line of an applied batch that no longer
passes its checksum is found without a rebuild (the database is intact, nothing replays) and
recorded in `wal_problems`; a batch a replay already reported is not recorded twice."""

from __future__ import annotations

import pytest
from wal_faults import commit_episode, lines, problems

from lcg import Engine, Settings, open_engine
from lcg.service.registry import dispatch
from lcg.storage.store import delete_database_files

pytestmark = pytest.mark.anyio


async def _written(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        for n in range(3):
            await commit_episode(engine, n, [3 * n + 1, 3 * n + 2, 3 * n + 3])
    finally:
        engine.close()


def _flip_a_line_of_the_second_batch(settings: Settings) -> None:
    path, index, raw = lines(settings)[10]  # seqs 8..15 are the second episode's batch
    middle = len(raw) // 2
    content = path.read_bytes().split(b"\n")
    content[index] = raw[:middle] + bytes([raw[middle] ^ 0x01]) + raw[middle + 1 :]
    path.write_bytes(b"\n".join(content))


def _scanned(engine: Engine) -> None:
    engine._scan.join(timeout=60)
    assert not engine._scan.is_alive()


async def test_a_damaged_line_of_an_applied_batch_is_found_after_an_open(
    settings: Settings,
) -> None:
    await _written(settings)
    _flip_a_line_of_the_second_batch(settings)
    engine = open_engine(settings)  # the database holds every batch: nothing is replayed
    try:
        assert (await dispatch(engine, "health_check", {}))["state"] == "healthy"
        _scanned(engine)
        (found,) = await problems(engine)
        assert (found["kind"], found["first_seq"], found["last_seq"]) == (
            "wal_line_damaged",
            8,
            15,
        )
    finally:
        engine.close()
    engine = open_engine(settings)  # found again at the next open: recorded once
    try:
        _scanned(engine)
        assert [p["kind"] for p in await problems(engine)] == ["wal_line_damaged"]
    finally:
        engine.close()


async def test_a_batch_a_replay_reported_is_not_recorded_again(settings: Settings) -> None:
    await _written(settings)
    _flip_a_line_of_the_second_batch(settings)
    delete_database_files(settings.db_path)
    engine = open_engine(settings)
    try:
        _scanned(engine)
        assert [p["kind"] for p in await problems(engine)] == ["batch_not_applied"]
    finally:
        engine.close()
