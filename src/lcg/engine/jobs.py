"""Background rebuild jobs (docs/api.md §knowledge_rebuild_from_wal, the background job,
§knowledge_rebuild_status): an in-memory table of replay threads.

A non-streaming, non-dry-run `knowledge_rebuild_from_wal` is validated by the caller, then its
replay runs in a thread of its own registered here; `knowledge_rebuild_status` polls it. At most
one job runs at a time (a second request while one runs gets the running job back).

Jobs live only in this process's memory: they are lost on restart. A job cannot be interrupted
half-way (the replay commits per batch and holds the engine's write lock); `JobTable.join` waits
for the running one, which is what `Engine.close` does before closing the store.
"""

from __future__ import annotations

import threading
import time
import uuid as uuidlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from lcg.errors import LcgError
from lcg.timeutil import now, to_iso_z

__all__ = ["JobTable", "RebuildJob"]

# Finished jobs kept for polling; older finished ones are forgotten first.
_KEEP_FINISHED = 100


@dataclass
class RebuildJob:
    """One background replay; its counters move while it runs (under `lock`)."""

    job_id: str
    group_id: str
    wal_files_total: int
    start_time: str = field(default_factory=lambda: to_iso_z(now()))
    started: float = field(default_factory=time.monotonic)
    finished: float | None = None
    status: str = "running"
    mutations_replayed: int = 0
    wal_files_processed: int = 0
    error: str | None = None
    result: dict[str, Any] | None = None
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    thread: threading.Thread | None = field(default=None, repr=False)

    def progress(self, frame: dict[str, Any]) -> None:
        """A replay progress frame (docs/api.md §progress shape): copy its counters."""
        with self.lock:
            self.mutations_replayed = int(frame.get("mutations_replayed_so_far", 0))
            self.wal_files_processed = int(frame.get("files_processed_so_far", 0))
            total = frame.get("files_total")
            if isinstance(total, int) and total > 0:
                self.wal_files_total = total

    def _finish(self, result: dict[str, Any] | None, error: str | None) -> None:
        with self.lock:
            self.finished = time.monotonic()
            if result is not None:
                self.status = "completed"
                self.result = result
                self.mutations_replayed = int(result.get("mutations_replayed", 0))
                self.wal_files_processed = int(result.get("wal_files_processed", 0))
                self.wal_files_total = max(self.wal_files_total, self.wal_files_processed)
            else:
                self.status = "failed"
                self.error = error

    def to_wire(self) -> dict[str, Any]:
        """The `knowledge_rebuild_status` answer for this job
        (docs/api.md §knowledge_rebuild_status)."""
        with self.lock:
            end = self.finished if self.finished is not None else time.monotonic()
            return {
                "job_id": self.job_id,
                "status": self.status,
                "mutations_replayed": self.mutations_replayed,
                "wal_files_processed": self.wal_files_processed,
                "wal_files_total": self.wal_files_total,
                "start_time": self.start_time,
                "elapsed_seconds": round(end - self.started, 3),
                "error": self.error,
                "result": dict(self.result) if self.result is not None else None,
            }


class JobTable:
    """The process's background rebuild jobs, by id."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: dict[str, RebuildJob] = {}

    def get(self, job_id: str) -> RebuildJob | None:
        with self._lock:
            return self._jobs.get(job_id)

    def running(self) -> RebuildJob | None:
        with self._lock:
            return self._running()

    def _running(self) -> RebuildJob | None:
        for job in self._jobs.values():
            if job.status == "running":
                return job
        return None

    def start(
        self,
        group_id: str,
        wal_files_total: int,
        work: Callable[[RebuildJob], dict[str, Any]],
    ) -> tuple[RebuildJob, bool]:
        """Start `work(job)` in a new thread, unless a job is running: then return that one.

        Returns the job and whether it was started by this call. `work` returns the job's
        result; an exception fails the job with its message.
        """
        with self._lock:
            current = self._running()
            if current is not None:
                return current, False
            job = RebuildJob(str(uuidlib.uuid4()), group_id, wal_files_total)
            self._forget_old()
            self._jobs[job.job_id] = job
            job.thread = threading.Thread(
                target=_run, args=(job, work), name=f"lcg-rebuild-{job.job_id}", daemon=True
            )
            job.thread.start()
            return job, True

    def _forget_old(self) -> None:
        finished = [j for j in self._jobs.values() if j.status != "running"]
        for job in finished[: max(0, len(finished) - _KEEP_FINISHED + 1)]:
            del self._jobs[job.job_id]

    def join(self, timeout: float | None = None) -> None:
        """Wait for every job thread to end (the caller must not hold the engine's write lock)."""
        with self._lock:
            threads = [j.thread for j in self._jobs.values() if j.thread is not None]
        for thread in threads:
            if thread is not threading.current_thread():
                thread.join(timeout)


def _run(job: RebuildJob, work: Callable[[RebuildJob], dict[str, Any]]) -> None:
    try:
        result = work(job)
    except LcgError as exc:
        job._finish(None, exc.wire_message())
    except BaseException as exc:  # a crash: reported, never raised into the thread machinery
        job._finish(None, f"Task panicked: {type(exc).__name__}: {exc}")
    else:
        job._finish(result, None)
