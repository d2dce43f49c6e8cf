"""The kernel's raw parts, for the admin area only: the write lock and the open database.

Admin passes that work below the commit primitive use them (re-embedding writes vector rows
that no WAL line carries, recovery refuses to wait for a running writer, WAL administration
reads and marks positions while no write can slip in). Every other module goes through
`Engine.read`, `Engine.write`, `Engine.writer` and `Engine.commit_episode`;
tests/unit/test_layering.py fails when a module outside `engine/`, `storage/` and `admin/`
imports this one or touches the lock or the store.
"""

from __future__ import annotations

import threading

from lcg.engine.catchup import CatchUp
from lcg.engine.jobs import JobTable
from lcg.engine.kernel import Engine
from lcg.engine.modes import StorageMode
from lcg.engine.walproblems import WalProblems
from lcg.errors import UnavailableError
from lcg.storage.backend import GraphBackend
from lcg.storage.store import Store

__all__ = [
    "catchup",
    "is_open",
    "jobs",
    "kuzu_store",
    "maybe_checkpoint",
    "mode",
    "set_indices_built",
    "store",
    "wal_problems",
    "write_lock",
]


def write_lock(engine: Engine) -> threading.RLock:
    """The engine's one write lock (reentrant)."""
    return engine._write_lock


def store(engine: Engine) -> GraphBackend:
    """The engine's open database.

    Raises:
        UnavailableError: the engine is degraded (no database open).
    """
    return engine._db


def mode(engine: Engine) -> StorageMode:
    """The engine's storage mode (chosen by `open_engine`), for the admin passes' questions
    whose answer depends on it (the WAL's groups and records, status, clearing the store)."""
    return engine._mode


def kuzu_store(engine: Engine) -> Store:
    """The engine's open Kuzu database (its journal, checkpoints, connection pool).

    Raises:
        UnavailableError: the engine is degraded, or runs on another store than Kuzu.
    """
    backend = engine._db
    store = engine._mode.journal()
    if store is None:
        raise UnavailableError(f"the engine runs on {backend.backend}, not the embedded Kuzu store")
    return store


def catchup(engine: Engine) -> CatchUp:
    """The engine's catch-up machinery (positions, replay, what a replay leaves behind), for a
    rebuild run under the write lock (lcg.admin.rebuild)."""
    return engine._catchup


def jobs(engine: Engine) -> JobTable:
    """The engine's background rebuild jobs (joined when it closes)."""
    return engine._jobs


def is_open(engine: Engine) -> bool:
    """Whether a database is open (False: degraded, or closed)."""
    return engine._store is not None


def maybe_checkpoint(engine: Engine) -> bool:
    """Checkpoint the database's journal now if it is due (as after every commit)."""
    return engine._maybe_checkpoint()


def set_indices_built(engine: Engine, built: bool) -> None:
    """Record whether the search index is loaded for every group (`Engine.state`), for the
    passes that drop and reload it (rebuild, `knowledge_build_indices`, recovery)."""
    engine._indices_built = built


def wal_problems(engine: Engine) -> WalProblems:
    """The engine's record of its WAL's problems (for `knowledge_status` and a rebuild)."""
    return engine._problems
