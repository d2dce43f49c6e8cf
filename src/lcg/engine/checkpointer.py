"""When the engine checkpoints Kuzu's journal, and on which thread.

Kuzu holds the old versions of updated rows in memory until a checkpoint (~300 KB per
one-entity update, bench/results/kuzu-0.11.3.md), so the engine checkpoints every
`_CHECKPOINT_EVERY_COMMITS` commits (or when the journal reaches `checkpoint_wal_bytes`), when
no reader is active; under a steady read load a reader is nearly always active, so once
`_CHECKPOINT_DRAIN_COMMITS` commits are owed the checkpoint drains the readers (new reads wait
for it) instead of waiting for a gap.

A due checkpoint runs on a thread of its own once the commit that made it due has returned, so
the request that happened to be the hundredth does not wait for it (1.3-1.9 s at 100k
entities, 230-550 ms on the 228-article graph). It still takes the write lock, when the running
commit releases it: a commit that arrives meanwhile waits (Kuzu cannot commit during a
checkpoint); with a model in the loop that wait mostly falls inside the next episode's model
call. An overdue checkpoint, or one owed by journal size, still runs in the commit, as before,
so what Kuzu holds until a checkpoint stays bounded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from lcg.errors import StorageError
from lcg.storage.store import Store

__all__ = ["Checkpointer"]

logger = logging.getLogger(__name__)

_CHECKPOINT_EVERY_COMMITS = 100
_CHECKPOINT_DRAIN_COMMITS = 200
_CHECKPOINT_DRAIN_SECONDS = 2.0
# How long the checkpoint thread waits for the write lock before leaving the due checkpoint to
# the next commit (a rebuild may hold the lock for minutes).
_IDLE_WAIT_SECONDS = 5.0


class Checkpointer:
    """One engine's checkpoint policy and thread: `after_commit()` (write lock held) runs an
    overdue checkpoint at once and hands a due one to the thread; `checkpoint_now()` checkpoints
    if due without waiting for the lock; `stop()` joins the thread (before the store closes)."""

    def __init__(
        self, journal: Callable[[], Store | None], lock: threading.RLock, journal_limit: int
    ) -> None:
        # The local database the engine checkpoints (None: degraded, or a server, which
        # checkpoints itself: `StorageMode.journal`).
        self._journal = journal
        self._lock = lock  # the engine's write lock
        self._journal_limit = journal_limit
        self._wake = threading.Event()
        self._stopping = False
        self._guard = threading.Lock()
        self._thread: threading.Thread | None = None

    def after_commit(self) -> None:
        """After a commit, write lock held: an overdue checkpoint (or one owed by journal size)
        now; a due one on the thread, once this commit has released the lock."""
        store = self._journal()
        if store is None:
            return
        limit = self._journal_limit
        if store.commits_since_checkpoint >= _CHECKPOINT_DRAIN_COMMITS or (
            limit > 0 and store.journal_bytes() >= limit
        ):
            self.checkpoint_now()
        elif store.commits_since_checkpoint >= _CHECKPOINT_EVERY_COMMITS:
            self._due()

    def checkpoint_now(self) -> bool:
        """Checkpoint if the journal is large or `_CHECKPOINT_EVERY_COMMITS` commits ran since
        the last one, and no reader is active (drained once overdue); never blocks on the write
        lock. Returns whether it checkpointed."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            store = self._journal()
            if store is None:
                return False
            limit = self._journal_limit
            by_size = limit > 0 and store.journal_bytes() >= limit
            if not by_size and store.commits_since_checkpoint < _CHECKPOINT_EVERY_COMMITS:
                return False
            overdue = store.commits_since_checkpoint >= _CHECKPOINT_DRAIN_COMMITS
            return store.checkpoint(drain=_CHECKPOINT_DRAIN_SECONDS if overdue else 0.0)
        except StorageError as exc:  # the write before it is committed: never fail it
            logger.warning("checkpoint failed, retried after a later commit: %s", exc)
            return False
        finally:
            self._lock.release()

    def _due(self) -> None:
        with self._guard:
            if self._stopping:
                return
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._loop, name="lcg-checkpoint", daemon=True
                )
                self._thread.start()
        self._wake.set()

    def _loop(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            if self._stopping:
                return
            # Wait for the commit that made the checkpoint due to release the write lock.
            if not self._lock.acquire(timeout=_IDLE_WAIT_SECONDS):
                continue  # the next commit hands it over again
            try:
                if not self._stopping:
                    self.checkpoint_now()
            except Exception:  # the commits before it are durable: never let the thread die
                logger.exception("background checkpoint failed; retried after a later commit")
            finally:
                self._lock.release()

    def stop(self) -> None:
        """Stop the thread after the checkpoint it may be running."""
        with self._guard:
            self._stopping = True
            thread, self._thread = self._thread, None
        self._wake.set()
        if thread is not None:
            thread.join()
