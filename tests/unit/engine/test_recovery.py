"""Opening a broken database: degraded engines, moving files aside, rebuilding from the WAL."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lcg.admin import status as admin_status
from lcg.config import Settings
from lcg.engine import open_engine
from lcg.engine.recovery import (
    DEGRADED_DB_OPEN_FAILED,
    degraded_engine,
    is_lock_conflict,
    move_database_aside,
    open_or_degraded,
    rebuild_database,
)
from lcg.errors import StorageError, UnavailableError
from lcg.graph import reads, writes
from lcg.telemetry import ListSink


def test_moving_aside_renames_the_file_and_its_companions(tmp_path: Path) -> None:
    db = tmp_path / "liminis.db"
    for suffix in ("", ".wal", ".lock"):
        Path(f"{db}{suffix}").write_text(suffix or "main")
    moved = move_database_aside(db, stamp="T1")
    assert sorted(p.name for p in moved) == [
        "liminis.db.broken-T1",
        "liminis.db.broken-T1.lock",
        "liminis.db.broken-T1.wal",
    ]
    assert not db.exists() and not Path(f"{db}.wal").exists()
    db.write_text("again")
    assert [p.name for p in move_database_aside(db, stamp="T1")] == ["liminis.db.broken-T1-1"]


def test_a_lock_held_by_another_process_is_not_corruption() -> None:
    assert is_lock_conflict(StorageError("cannot open x: IO exception: Could not set lock on file"))
    assert not is_lock_conflict(StorageError("The file is not a valid Kuzu database file!"))


def test_a_degraded_engine_answers_status_and_health_and_refuses_the_rest(
    settings: Settings,
) -> None:
    engine = degraded_engine(settings, "lbug_wal_corrupt")
    try:
        health = anyio.run(admin_status.health, engine)
        assert health == {
            "ok": False,
            "healthy": False,
            "state": "degraded",
            "reason": "lbug_wal_corrupt",
        }
        status = anyio.run(admin_status.status, engine)
        assert status["degraded"] is True and status["queryable"] is False
        assert "entity_count" not in status and "wal" not in status
        with pytest.raises(UnavailableError):
            anyio.run(reads.list_entities, engine, 10, None)
    finally:
        engine.close()


def test_an_unreadable_database_opens_degraded_then_rebuilds_from_the_wal(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    created = anyio.run(writes.assert_entity, engine, "Katherine", "liminis")
    engine.close()
    settings.db_path.write_bytes(b"not a database at all\n" * 100)

    degraded = open_or_degraded(settings)
    assert degraded.state.degraded_reason == DEGRADED_DB_OPEN_FAILED
    degraded.close()

    events = ListSink()
    fresh = rebuild_database(settings, reason=DEGRADED_DB_OPEN_FAILED, events=events)
    try:
        listed = anyio.run(reads.list_entities, fresh, 10, None)
        assert [n["uuid"] for n in listed["nodes"]] == [created["entity_uuid"]]
    finally:
        fresh.close()
    assert [e["phase"] for e in events.of_type("wal_auto_recovery")] == [
        "started",
        "moved_aside",
        "completed",
    ]
