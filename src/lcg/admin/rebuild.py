"""`knowledge_rebuild_from_wal` and `knowledge_rebuild_status` (API.md §2.34-2.35): re-deriving a
group from its WAL, in the foreground or as a background job.

The replay itself is the kernel's (`Engine.rebuild_from_wal` and friends: the same machinery as
startup catch-up, under the write lock); this area adds what a full rebuild owes the other
groups: their cross-group pointers into the re-derived group are re-resolved by name, ignoring
the staleness gate (after a reset or a bounded restore positions are not comparable).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from lcg.curation.pointers import rebind_locked
from lcg.engine import Engine

__all__ = ["rebuild_from_wal", "rebuild_groups", "rebuild_status", "start_rebuild"]

Progress = Callable[[dict[str, Any]], None]


def _rebind(engine: Engine, group_id: str) -> dict[str, int]:
    # Called by the rebuild with the write lock held: entering the writer again only re-enters it.
    with engine.writer() as w:
        return rebind_locked(engine, w, group_id, force=True)


async def rebuild_from_wal(
    engine: Engine,
    group_id: str,
    from_seq: int = 0,
    to_seq: int | None = None,
    dry_run: bool = False,
    force_clear: bool = False,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Replay a group's WAL into the graph now (API.md §2.34, synchronous form)."""
    return await engine.rebuild_from_wal(
        group_id, from_seq, to_seq, dry_run, force_clear, progress, rebind=_rebind
    )


async def rebuild_groups(
    engine: Engine,
    group_ids: Sequence[str],
    *,
    force_clear: bool = True,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> list[dict[str, Any]]:
    """Rebuild several groups from their WALs, under one hold of the write lock."""
    return await engine.rebuild_groups(
        group_ids, force_clear=force_clear, dry_run=dry_run, progress=progress, rebind=_rebind
    )


async def start_rebuild(
    engine: Engine,
    group_id: str,
    from_seq: int = 0,
    to_seq: int | None = None,
    force_clear: bool = False,
) -> dict[str, Any]:
    """Start a real rebuild as a background job (API.md §2.34 step 9); every refusal is raised
    before a job exists."""
    return await engine.start_rebuild(group_id, from_seq, to_seq, force_clear, rebind=_rebind)


def rebuild_status(engine: Engine, job_id: str) -> dict[str, Any]:
    """`knowledge_rebuild_status` (API.md §2.35): a background job's state, from memory."""
    return engine.rebuild_status(job_id)
