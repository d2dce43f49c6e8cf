"""Opening a workspace whose database may be broken, and rebuilding it from the WAL.

The WAL is the source of truth (docs/design.md), so a database that cannot be opened is not a
loss: its files are moved aside (never deleted; someone may want to inspect them) and a fresh
database is derived from the WAL by an ordinary open, whose startup catch-up replays every
group into the empty store.

- `open_or_degraded` never raises for a broken database: it returns a degraded `Engine` (no
  store, `Engine.state.degraded_reason` set) that answers status and health but refuses
  everything else.
- `rebuild_database` is the self-recovery: move aside, open fresh, replay. It emits
  `wal_auto_recovery` telemetry with a `phase` of `started`, `moved_aside`, then `completed` or
  `failed`.

A database locked by another process is not broken: that error is re-raised, never "recovered"
(moving a live database aside would fork the graph).
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

from lcg.config import Settings
from lcg.embedding.base import Embedder
from lcg.embedding.select import build_embedder
from lcg.engine import Engine, open_engine
from lcg.engine.modes import EmbeddedMode
from lcg.errors import StorageError
from lcg.storage.store import COMPANION_SUFFIXES
from lcg.telemetry import EventSink, NullSink
from lcg.wal.writer import Wal

__all__ = [
    "DEGRADED_DB_OPEN_FAILED",
    "degraded_engine",
    "is_lock_conflict",
    "move_database_aside",
    "open_or_degraded",
    "rebuild_database",
]

logger = logging.getLogger(__name__)

# The reference's reason for "the database could not be opened, recovery needed"
# (docs/api.md §degraded).
DEGRADED_DB_OPEN_FAILED = "lbug_wal_corrupt"

_DB_SUFFIXES = ("", *COMPANION_SUFFIXES)


def is_lock_conflict(exc: StorageError) -> bool:
    """Whether an open failed because another process holds the database (not corruption)."""
    return "lock" in exc.message.lower()


def degraded_engine(
    settings: Settings,
    reason: str,
    *,
    embedder: Embedder | None = None,
    events: EventSink | None = None,
) -> Engine:
    """An engine with no database open: status and health work, every other call is refused."""
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    wal.lock()  # a degraded engine still writes the WAL (it recovers from it)
    try:
        built = build_embedder(settings, embedder)
    except BaseException:
        wal.unlock()
        raise
    return Engine(settings, EmbeddedMode(None), wal, built, events, degraded_reason=reason)


def open_or_degraded(
    settings: Settings, *, embedder: Embedder | None = None, events: EventSink | None = None
) -> Engine:
    """`open_engine`, or a degraded engine when the database files cannot be opened.

    Raises:
        StorageError: the database is locked by another process.
        ConfigError: a setting is invalid.
    """
    try:
        return open_engine(settings, embedder=embedder, events=events)
    except StorageError as exc:
        if is_lock_conflict(exc):
            raise
        logger.exception("the database at %s cannot be opened; serving degraded", settings.db_path)
        return degraded_engine(settings, DEGRADED_DB_OPEN_FAILED, embedder=embedder, events=events)


def move_database_aside(db_path: Path, stamp: str | None = None) -> list[Path]:
    """Rename the database file and its companions to `<name>.broken-<stamp><suffix>`.

    Returns the new paths (only of files that existed).
    """
    stamp = stamp or time.strftime("%Y%m%dT%H%M%S", time.gmtime())
    moved = []
    for suffix in _DB_SUFFIXES:
        src = Path(f"{db_path}{suffix}")
        if not src.exists():
            continue
        dst = src.with_name(f"{db_path.name}.broken-{stamp}{suffix}")
        n = 1
        while dst.exists():
            dst = src.with_name(f"{db_path.name}.broken-{stamp}-{n}{suffix}")
            n += 1
        src.rename(dst)
        moved.append(dst)
    return moved


def rebuild_database(
    settings: Settings,
    *,
    reason: str,
    embedder: Embedder | None = None,
    events: EventSink | None = None,
) -> Engine:
    """Move the broken database aside and derive a fresh one from the WAL.

    Returns the open, caught-up engine.

    Raises:
        StorageError, WalError: the fresh database could not be built (the broken files stay
            moved aside; the caller keeps serving degraded).
    """
    sink = events or NullSink()
    started = time.perf_counter()
    sink.emit(
        "wal_auto_recovery", phase="started", reason=reason, database_path=str(settings.db_path)
    )
    try:
        moved = move_database_aside(settings.db_path)
        sink.emit("wal_auto_recovery", phase="moved_aside", moved=[str(p) for p in moved])
        engine = open_engine(settings, embedder=embedder, events=events)
    except Exception as exc:
        sink.emit(
            "wal_auto_recovery",
            phase="failed",
            reason=reason,
            error=str(exc),
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        raise
    sink.emit(
        "wal_auto_recovery",
        phase="completed",
        reason=reason,
        moved=[str(p) for p in moved],
        duration_ms=round((time.perf_counter() - started) * 1000, 1),
    )
    return engine
