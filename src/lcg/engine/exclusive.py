"""The kernel's raw parts, for the admin area only: what its passes below the commit primitive
need and `Engine.writer` does not give.

An admin pass that only needs the write lock held, or reads on the writer connection under it
(a rebuild's plan, WAL marks and dumps, clearing, WAL export and import), takes
`Engine.writer` like any other pass. What remains here, and why:

- `write_lock`: recovery refuses to wait for a running writer (a non-blocking acquire), and
  re-embedding writes vector rows in a transaction of its own (no WAL line carries them);
- `store`: that transaction, the write of a backfilled WAL position outside any commit, a
  checkpoint on demand, the store's own status, and its name in a WAL export's or import's
  result (a degraded engine has none: clearing it is refused);
- `mode`, `aftermath`, `warmup`, `jobs`, `wal_problems`, `is_open`, `set_indices_built`: the
  rebuild, status, re-embedding and recovery drive the storage mode's plan and replay, what a
  replay leaves behind, the search index's load and model, the background jobs and the record
  of the WAL's problems, which no commit touches.

Every other module goes through `Engine.read`, `Engine.write`, `Engine.writer` and
`Engine.commit_episode`; tests/unit/test_layering.py fails when a module outside `engine/`,
`storage/` and `admin/` imports this one or touches the lock or the store.
"""

from __future__ import annotations

import threading

from lcg.engine.aftermath import Aftermath
from lcg.engine.jobs import JobTable
from lcg.engine.kernel import Engine
from lcg.engine.modes import StorageMode
from lcg.engine.walproblems import WalProblems
from lcg.engine.warmup import SearchWarmup
from lcg.storage.backend import GraphBackend

__all__ = [
    "aftermath",
    "is_open",
    "jobs",
    "mode",
    "set_indices_built",
    "store",
    "wal_problems",
    "warmup",
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


def aftermath(engine: Engine) -> Aftermath:
    """What a replay leaves behind (the stamp, the losses, the projections reloaded, the
    cross-group hops, the event), for a rebuild run under the write lock (lcg.admin.rebuild)."""
    return engine._aftermath


def warmup(engine: Engine) -> SearchWarmup:
    """The search index's load and the model it answers with, for a rebuild (lcg.admin.rebuild)
    and a re-embed (lcg.admin.reembed), under the write lock."""
    return engine._warmup


def jobs(engine: Engine) -> JobTable:
    """The engine's background rebuild jobs (joined when it closes)."""
    return engine._jobs


def is_open(engine: Engine) -> bool:
    """Whether a database is open (False: degraded, or closed)."""
    return engine._store is not None


def set_indices_built(engine: Engine, built: bool) -> None:
    """Record whether the search index is loaded for every group (`Engine.state`), for the
    passes that drop and reload it (rebuild, `knowledge_build_indices`, recovery)."""
    engine._indices_built = built


def wal_problems(engine: Engine) -> WalProblems:
    """The engine's record of its WAL's problems (for `knowledge_status` and a rebuild)."""
    return engine._problems
