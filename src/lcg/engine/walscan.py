"""The checksum pass over the whole WAL after an open, in the background.

An open with an intact database replays nothing, so a line of an applied batch that no longer
passes its checksum (a flipped bit on disk) would only be found by the next rebuild — which
would then lose that batch. `WalScan` reads every group's stream once after the open
(`lcg.wal.reader.iter_records`, which checks each line's CRC-32), without the write lock and
without delaying the open or `health_check`; each batch it finds damaged is recorded in
`wal_problems` (kind `wal_line_damaged`, `WalProblems.record_damaged`, which takes the write
lock only for that write). Cost, measured on a 120,000-line WAL (59 MB): 0.78 s of CPU time
(docs/reliability.md). The pass is paced (`_CHUNK`, `_REST`) to about a quarter of one core:
unpaced, on a 1M-fact workspace (1.6M lines, ~10 s of CPU) it shared the GIL with the first
minute of reads and multiplied their CPU time by 3-4 (bench/scale.py: find_entities 42 ms CPU
p50 against 10-14, an ingested episode 189 ms against 25-40).

Lines appended while the pass reads are read or not; a batch being written is at worst seen
torn at the stream's end, which is not recorded (only batches with an unreadable line).
"""

from __future__ import annotations

import logging
import threading
import time
from contextlib import AbstractContextManager
from typing import Any

from lcg.engine.walproblems import WalProblems
from lcg.wal.reader import LostBatch, ReadStats, iter_records
from lcg.wal.writer import Wal

__all__ = ["WalScan"]

logger = logging.getLogger(__name__)

# Every `_CHUNK` lines the pass sleeps `_REST` times the CPU time it spent on them.
_CHUNK = 2_000
_REST = 3.0


class WalScan(threading.Thread):
    """One pass over every group's stream (started by `start`, ended early by `stop`)."""

    def __init__(self, wal: Wal, problems: WalProblems, lock: AbstractContextManager[Any]) -> None:
        super().__init__(name="wal-scan", daemon=True)
        self._wal, self._problems, self._lock = wal, problems, lock
        self._stopping = threading.Event()
        self.scanned_lines = 0
        self.found: dict[str, list[LostBatch]] = {}

    def run(self) -> None:
        try:
            mark = time.thread_time()
            for group_id in self._wal.groups():
                stats = ReadStats()
                for _ in iter_records(self._wal.directory(group_id), stats=stats):
                    self.scanned_lines += 1
                    if self.scanned_lines % _CHUNK == 0:
                        if self._stopping.wait((time.thread_time() - mark) * _REST):
                            return
                        mark = time.thread_time()
                    elif self._stopping.is_set():
                        return
                if stats.lost:
                    self.found[group_id] = stats.lost
                    directory = self._wal.directory(group_id)
                    with self._lock:
                        if self._stopping.is_set():
                            return
                        # A file gone since it was read (a wipe, a rebuild) is not recorded.
                        lost = [x for x in stats.lost if (directory / x.file).is_file()]
                        if lost:
                            self._problems.record_damaged(group_id, lost)
        except Exception:  # a check, never a failure of the engine
            logger.exception("the background WAL checksum pass failed")

    def stop(self) -> None:
        """End the pass (at the next line) and wait for it."""
        self._stopping.set()
        if self.is_alive():
            self.join()
