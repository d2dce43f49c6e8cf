"""`knowledge_clear_all` (docs/api.md §knowledge_clear_all): delete the whole graph (and, unless the
WAL is preserved, the whole WAL) and start empty.

It replaces the database itself, so it works below the commit primitive: under the write lock
(`lcg.engine.exclusive`) it has the kernel reopen the engine in place (`Engine.reopen`) on
emptied files, without a catch-up.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import anyio.to_thread

from lcg.engine import Engine, exclusive
from lcg.engine.replay import write_position
from lcg.errors import InvalidRequestError, LcgError
from lcg.storage.backend import GraphBackend
from lcg.storage.store import delete_database_files
from lcg.wal.lock import LOCK_FILE

__all__ = ["clear_all"]


async def clear_all(engine: Engine, confirm: bool, preserve_wal: bool) -> dict[str, Any]:
    """Delete the whole graph (and, unless `preserve_wal`, the whole WAL); start empty."""
    if not confirm:
        raise InvalidRequestError("Must set 'confirm' to true to clear graph", field="confirm")

    def write() -> dict[str, Any]:
        with engine.writer():
            _clear(engine, preserve_wal)
        return {"success": True, "message": "Graph cleared and reinitialized successfully"}

    return await anyio.to_thread.run_sync(write)


def _clear(engine: Engine, preserve_wal: bool) -> None:
    wal = engine.parts.wal
    marks = (
        {g: (wal.bounds(g).max_seq, wal.generation(g)) for g in wal.groups()}
        if preserve_wal
        else {}
    )
    exclusive.store(engine)  # degraded: unavailable, and nothing is deleted
    exclusive.mode(engine).empty_store(preserve_wal)

    def delete(db_path: Path) -> None:
        try:
            delete_database_files(db_path)
            if not preserve_wal and wal.root.exists():
                # Everything but the lock file, which this process still holds.
                for child in wal.root.iterdir():
                    if child.name == LOCK_FILE:
                        continue
                    if child.is_dir() and not child.is_symlink():
                        shutil.rmtree(child)
                    else:
                        child.unlink()
        except OSError as exc:
            raise InvalidRequestError(f"failed to delete DB or WAL files: {exc}") from exc

    def keep_marks(fresh: GraphBackend) -> None:
        # A preserved WAL is history the user chose to keep but not to show: record each
        # stream as applied so a restart does not resurrect it; an explicit
        # knowledge_rebuild_from_wal brings it back.
        with fresh.transaction() as tx:
            for g, (max_seq, gen) in marks.items():
                if max_seq is not None:
                    write_position(tx, g, max_seq, gen)

    try:
        engine.reopen(delete, failed_reason="unknown", on_open=keep_marks, catch_up=False)
    except InvalidRequestError:
        raise
    except LcgError as exc:
        raise InvalidRequestError(
            f"Graph files deleted but reinitialization failed: {exc}. "
            "Restart the service to recover."
        ) from exc
