"""`knowledge_recover` and `knowledge_recover_full`: recovery on demand
(docs/api.md §knowledge_recover, §knowledge_recover_full).

lcg's database is derived from the WAL (docs/design.md), so every strategy ends the same way: the
database files are put into some state, the database is opened again and the ordinary startup
catch-up applies whatever the WAL holds beyond the positions recorded in it. The open database
is replaced in place (`Engine.reopen`), so the service keeps the same Engine object and
needs no swap.

- `drop_lbug_wal`: quarantine Kuzu's own journal `<db>.wal` as
  `<db>.wal.corrupt-YYYYMMDD-HHMMSS` (UTC) and reopen at the last checkpoint; the catch-up then
  replays the WAL tail the journal held.
- `rebuild_from_workspace_wal`: move the database files aside (`lcg.engine.recovery`, never deleted)
  and derive a fresh database from every group's WAL.
- `restore_from_backup`: move the database files aside, copy the newest `*.pre-*-backup` of the
  database directory over the database path, reopen and catch up from the positions the backup
  recorded.

Both methods take the write lock without waiting: if any write (or another recovery) holds it
they fail at once with `Recovery already in progress` (§1.10). A strategy that fails answers
`success: false` (§1.6); the engine is then left degraded if its database was already closed.
"""

from __future__ import annotations

import contextlib
import logging
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio.to_thread

from lcg.admin.indices import build_search_index
from lcg.engine import Engine, exclusive
from lcg.engine.recovery import DEGRADED_DB_OPEN_FAILED, is_lock_conflict, move_database_aside
from lcg.engine.replay import ReplayReport
from lcg.errors import ConflictError, StorageError
from lcg.storage.backend import GraphBackend, GraphReader

__all__ = [
    "DID_NOT_REOPEN",
    "STRATEGIES",
    "find_backup",
    "quarantine_journal",
    "recover",
    "recover_full",
]

logger = logging.getLogger(__name__)

STRATEGIES = ("drop_lbug_wal", "rebuild_from_workspace_wal", "restore_from_backup")
DID_NOT_REOPEN = "Recovery operation succeeded but DB did not reopen"


class _StrategyFailed(Exception):
    """A strategy cannot run or its file operation failed: a `success: false` result."""


@contextlib.contextmanager
def _exclusive(engine: Engine) -> Iterator[None]:
    """Hold the write lock, or fail at once if anyone holds it (docs/api.md §concurrency)."""
    if not exclusive.write_lock(engine).acquire(blocking=False):
        raise ConflictError("Recovery already in progress")
    try:
        yield
    finally:
        exclusive.write_lock(engine).release()


def _stamp() -> str:
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime())


def quarantine_journal(db_path: Path, stamp: str | None = None) -> Path | None:
    """Rename `<db>.wal` to `<db>.wal.corrupt-<stamp>` (a free name); None if there is none."""
    journal = Path(f"{db_path}.wal")
    if not journal.exists():
        return None
    base = f"{journal.name}.corrupt-{stamp or _stamp()}"
    target = journal.with_name(base)
    n = 1
    while target.exists():
        target = journal.with_name(f"{base}-{n}")
        n += 1
    journal.rename(target)
    return target


def find_backup(db_path: Path) -> Path | None:
    """The newest entry of the database directory named `*.pre-*-backup`, or None."""
    if not db_path.parent.is_dir():
        return None
    found = [
        p for p in db_path.parent.iterdir() if ".pre-" in p.name and p.name.endswith("-backup")
    ]
    return max(found, key=lambda p: p.stat().st_mtime) if found else None


def _copy_backup(backup: Path, db_path: Path) -> None:
    if backup.is_dir():
        shutil.copytree(backup, db_path)
    else:
        shutil.copy2(backup, db_path)


def _ensure_indexes(engine: Engine) -> None:
    """Make sure the search index loaded (write lock held); a failure fails the recovery.

    The reopening's startup already loaded it; only if that failed is it built again here,
    to report why.
    """
    if not engine.state.indices_built:
        build_search_index(engine)


def _episode_count(conn: GraphReader) -> int:
    return int(conn.counts()["episodes"] or 0)


def _reopen(
    engine: Engine,
    prepare: Callable[[Path], object],
    on_open: Callable[[GraphBackend], object] | None = None,
) -> list[ReplayReport]:
    """`engine.reopen`, telling a failed file operation from a failed reopen.

    Raises:
        _StrategyFailed: `prepare` failed (its message) or the database did not reopen.
    """
    prepared = False

    def step(db_path: Path) -> None:
        nonlocal prepared
        try:
            prepare(db_path)
        except OSError as exc:
            raise _StrategyFailed(str(exc)) from exc
        prepared = True

    try:
        reports = engine.reopen(step, failed_reason=DEGRADED_DB_OPEN_FAILED, on_open=on_open)
    except _StrategyFailed:
        raise
    except Exception as exc:
        logger.exception("recovery: the database at %s did not reopen", engine.settings.db_path)
        if not prepared:
            raise _StrategyFailed(str(exc)) from exc
        raise _StrategyFailed(DID_NOT_REOPEN) from exc
    try:
        _ensure_indexes(engine)
    except StorageError as exc:  # the database is open (healthy) but without its indexes
        exclusive.set_indices_built(engine, False)
        raise _StrategyFailed(f"Failed to build indexes: {exc}") from exc
    return reports


def _run_strategy(engine: Engine, strategy: str) -> None:
    """Run one strategy (write lock held).

    Raises:
        _StrategyFailed: the `error` of a `success: false` result.
    """
    db_path = engine.settings.db_path
    if strategy == "drop_lbug_wal":
        # Checked before anything is closed: a refusal leaves a healthy engine healthy.
        if not db_path.exists():
            raise _StrategyFailed(
                f"drop_lbug_wal requires an existing checkpoint file; none found at {db_path}"
            )
        _reopen(engine, quarantine_journal)
    elif strategy == "rebuild_from_workspace_wal":
        _reopen(engine, move_database_aside)
    elif strategy == "restore_from_backup":
        backup = find_backup(db_path)
        if backup is None:
            raise _StrategyFailed("No backup file found")

        def restore(path: Path) -> None:
            move_database_aside(path)
            _copy_backup(backup, path)

        _reopen(engine, restore)
    else:  # the params model admits only STRATEGIES
        raise _StrategyFailed(f"Unknown strategy: {strategy}")


def _recover(engine: Engine, strategy: str) -> dict[str, Any]:
    with _exclusive(engine):
        started = time.perf_counter()
        engine.parts.events.emit("knowledge_recover", phase="started", strategy=strategy)
        try:
            _run_strategy(engine, strategy)
        except _StrategyFailed as exc:
            engine.parts.events.emit(
                "knowledge_recover",
                phase="failed",
                strategy=strategy,
                error=str(exc),
                duration_ms=round((time.perf_counter() - started) * 1000, 1),
            )
            if engine.state.degraded_reason is not None:
                engine.parts.events.emit(
                    "service_state", state="degraded", reason=engine.state.degraded_reason
                )
            return {
                "strategy": strategy,
                "success": False,
                "error": str(exc),
                "restart_required": False,
            }
        engine.parts.events.emit(
            "knowledge_recover",
            phase="completed",
            strategy=strategy,
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        engine.parts.events.emit("service_state", state="healthy", recovered_by=strategy)
    return {"strategy": strategy, "success": True, "restart_required": False}


async def recover(engine: Engine, strategy: str) -> dict[str, Any]:
    """Run one named recovery strategy (docs/api.md §knowledge_recover), on a healthy or a degraded
    engine.

    Raises:
        ConflictError: `Recovery already in progress` (the write lock is held).
    """
    return await anyio.to_thread.run_sync(_recover, engine, strategy)


def _recover_full(engine: Engine) -> dict[str, Any]:
    with _exclusive(engine):
        before = 0

        def count(store: GraphBackend) -> None:
            nonlocal before
            with store.read() as conn:
                before = _episode_count(conn)

        started = time.perf_counter()
        engine.parts.events.emit("knowledge_recover", phase="started", strategy="full")
        try:
            try:
                reports = _reopen(engine, quarantine_journal, on_open=count)
            except _StrategyFailed as exc:
                cause = exc.__cause__
                if isinstance(cause, StorageError) and is_lock_conflict(cause):
                    raise  # another process holds the database: it is not broken
                logger.warning("recover_full: reopening at the checkpoint failed (%s)", exc)
                before = 0
                reports = _reopen(engine, move_database_aside)
            with engine.reader() as conn:
                after = _episode_count(conn)
        except Exception as exc:
            engine.parts.events.emit(
                "knowledge_recover", phase="failed", strategy="full", error=str(exc)
            )
            if engine.state.degraded_reason is not None:
                engine.parts.events.emit(
                    "service_state", state="degraded", reason=engine.state.degraded_reason
                )
            return {"success": False, "error": str(exc)}
        engine.parts.events.emit(
            "knowledge_recover",
            phase="completed",
            strategy="full",
            duration_ms=round((time.perf_counter() - started) * 1000, 1),
        )
        engine.parts.events.emit("service_state", state="healthy", recovered_by="full")
    return {
        "success": True,
        "recovery_needed": True,
        "episodes_before": before,
        "mutations_replayed": sum(r.mutations_replayed for r in reports),
        "episodes_after": after,
        "indexes_rebuilt": True,
    }


def _full(engine: Engine) -> dict[str, Any]:
    if engine.state.degraded_reason is None:
        # Healthy: a no-op that takes no lock (a database error here is a JSON-RPC error).
        with engine.reader() as conn:
            n = _episode_count(conn)
        return {
            "success": True,
            "recovery_needed": False,
            "episodes_before": n,
            "mutations_replayed": 0,
            "episodes_after": n,
            "indexes_rebuilt": False,
        }
    return _recover_full(engine)


async def recover_full(engine: Engine) -> dict[str, Any]:
    """One-call recovery (docs/api.md §knowledge_recover_full): a no-op on a healthy engine; on a
    degraded one, reopen at the last checkpoint without Kuzu's journal and catch up from the WAL,
    falling back to a full rebuild from the WAL.

    Raises:
        ConflictError: `Recovery already in progress` (the write lock is held).
        StorageError: the healthy no-op could not count episodes.
    """
    return await anyio.to_thread.run_sync(_full, engine)
