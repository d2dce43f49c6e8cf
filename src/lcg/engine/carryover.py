"""Carrying a workspace over to the selected embedded engine (`LCG_EMBEDDED_STORE`).

LadybugDB and Kuzu cannot open each other's files, and the database is derived from the WAL
(docs/design.md, "Rebuild"). So when the workspace's database was written by the other engine
(`lcg.storage.store.database_engine`: its stamp, or no stamp, which means Kuzu), `move_aside`
renames its files into `<db>.<engine>-old/` before the store opens; the ordinary open then
finds an empty database and its startup catch-up replays every group into it (the one rebuild
path). `settle` runs after every open: once each group's applied position has reached the end
of its WAL, the old files are removed; until then they stay, so an interrupted carry-over is
finished by the next open (its catch-up goes on from the positions the new database holds).

What happened is kept on the storage mode and shown in `knowledge_status` as
`storage.carry_over` (`CarryOver.status`), and emitted as `embedded_store_carry_over` events
with a `phase` of `moved_aside`, then `completed` or `kept_old_files`.
"""

from __future__ import annotations

import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lcg.config import Settings
from lcg.storage.backend import GraphReader
from lcg.storage.store import COMPANION_SUFFIXES, ENGINES, database_engine
from lcg.telemetry import EventSink

__all__ = ["CarryOver", "move_aside", "old_directories", "settle"]

logger = logging.getLogger(__name__)


@dataclass
class CarryOver:
    """One workspace's move from one embedded engine to the other."""

    source: str  # the engine that wrote the old files
    target: str  # the engine the workspace now runs on
    old_files: Path  # `<db>.<source>-old/`
    started: float = field(default_factory=time.time)
    state: str = "rebuilding"  # then "completed" (old files removed) or "kept_old_files"
    groups: int = 0  # groups whose WAL the rebuild replayed
    detail: str | None = None  # why the old files were kept

    def status(self) -> dict[str, Any]:
        return {
            "from": self.source,
            "to": self.target,
            "state": self.state,
            "old_files": str(self.old_files) if self.state != "completed" else None,
            "groups": self.groups,
            "seconds": round(time.time() - self.started, 3) if self.state == "rebuilding" else None,
            "detail": self.detail,
        }


def _aside(db_path: Path, engine: str) -> Path:
    return db_path.with_name(f"{db_path.name}.{engine}-old")


def old_directories(db_path: Path) -> list[Path]:
    """The old-engine directories beside `db_path` that a carry-over has not removed yet."""
    return [p for p in (_aside(db_path, e) for e in ENGINES) if p.is_dir()]


def move_aside(settings: Settings, events: EventSink) -> CarryOver | None:
    """Before the store opens: if the workspace's database was written by another engine than
    the selected one, move its files into `<db>.<engine>-old/` and return the carry-over; else
    None. A carry-over an earlier open began and did not settle is returned again."""
    if settings.storage != "kuzu":  # the embedded store (LCG_STORAGE=kuzu names it)
        return None
    db_path = settings.db_path
    target = settings.embedded_store
    found = database_engine(db_path)
    if found is None or found == target:
        pending = [p for p in old_directories(db_path) if p != _aside(db_path, target)]
        if found == target and pending:
            source = pending[0].name.rsplit(".", 1)[1].removesuffix("-old")
            return CarryOver(source, target, pending[0])
        return None
    aside = _aside(db_path, found)
    n = 1
    while aside.exists():  # an earlier carry-over's leftovers: never overwritten
        aside = db_path.with_name(f"{db_path.name}.{found}-old-{n}")
        n += 1
    aside.mkdir(mode=0o700)
    moved = []
    for suffix in ("", *COMPANION_SUFFIXES):
        src = Path(f"{db_path}{suffix}")
        if src.exists():
            src.rename(aside / src.name)
            moved.append(src.name)
    logger.warning(
        "the database %s was written by %s, and LCG_EMBEDDED_STORE is %s: its files are "
        "kept in %s and the database is rebuilt from the WAL",
        db_path,
        found,
        target,
        aside,
    )
    events.emit(
        "embedded_store_carry_over",
        phase="moved_aside",
        source=found,
        target=target,
        old_files=str(aside),
        moved=moved,
    )
    return CarryOver(found, target, aside)


def settle(carry: CarryOver, conn: GraphReader, wal_states: Any, events: EventSink) -> None:
    """After the open's catch-up: remove the old files once every group is hydrated (its
    applied position at the end of its WAL); else keep them and say why."""
    default, groups = wal_states(conn)
    behind = sorted(
        g
        for g, state in {"": default, **groups}.items()
        if state.get("hydration_status") not in ("hydrated", "not_applicable")
    )
    carry.groups = len(groups)
    if behind:
        carry.state = "kept_old_files"
        carry.detail = f"groups not yet rebuilt from the WAL: {', '.join(behind)}"
        logger.warning("carry-over to %s not verified: %s", carry.target, carry.detail)
    else:
        shutil.rmtree(carry.old_files, ignore_errors=True)
        carry.state = "completed"
        logger.info(
            "carry-over from %s to %s completed: %d groups rebuilt from the WAL",
            carry.source,
            carry.target,
            carry.groups,
        )
    events.emit(
        "embedded_store_carry_over",
        phase=carry.state,
        source=carry.source,
        target=carry.target,
        groups=carry.groups,
        detail=carry.detail,
    )
