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

from lcg.engine.kernel import Engine
from lcg.storage.store import Store

__all__ = ["store", "write_lock"]


def write_lock(engine: Engine) -> threading.RLock:
    """The engine's one write lock (reentrant)."""
    return engine._write_lock


def store(engine: Engine) -> Store:
    """The engine's open database.

    Raises:
        UnavailableError: the engine is degraded (no database open).
    """
    return engine._db
