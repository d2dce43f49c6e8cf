"""One writing process per WAL root: the lock file `<wal_root>/.lcg-wal.lock`.

A process that opens the WAL for writing takes an exclusive `flock` on that file and writes its
pid into it. The kernel drops the lock when the process exits, however it exits (SIGKILL
included), so a file left behind by a dead process never blocks anyone: the lock, not the pid,
decides; the pid only names the holder in the error.

Within one process, every `Wal` on the same root shares the one lock (reference counted): the
service hands the WAL from a degraded engine to a recovered one while both are briefly open.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import threading
from pathlib import Path

from lcg.errors import ConflictError

__all__ = ["LOCK_FILE", "WalLockedError", "acquire", "release"]

LOCK_FILE = ".lcg-wal.lock"

_guard = threading.Lock()
_held: dict[Path, tuple[int, int]] = {}  # resolved root -> (fd, references)


class WalLockedError(ConflictError):
    """Another process holds the WAL root."""

    def __init__(self, root: Path, holder: str) -> None:
        super().__init__(
            f"the WAL directory {root} is in use by another lcg process ({holder}); "
            "stop it first, or give this one its own LCG_WAL_DIR"
        )
        self.root = root


def _holder(fd: int) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = os.pread(fd, 64, 0).decode().strip()
        if text:
            return f"pid {int(text)}"
    return "pid unknown"


def acquire(root: Path) -> Path:
    """Take (or share, within this process) the lock of `root`; return the key for `release`.

    Raises:
        WalLockedError: another process holds it.
        OSError: the WAL root or the lock file cannot be created.
    """
    root.mkdir(parents=True, exist_ok=True, mode=0o700)
    key = root.resolve()
    with _guard:
        held = _held.get(key)
        if held is not None:
            _held[key] = (held[0], held[1] + 1)
            return key
        fd = os.open(key / LOCK_FILE, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise WalLockedError(root, holder) from None
        except BaseException:
            os.close(fd)
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = (fd, 1)
        return key


def release(key: Path) -> None:
    """Drop one reference to the lock of `key`; the last one unlocks it."""
    with _guard:
        held = _held.get(key)
        if held is None:
            return
        fd, refs = held
        if refs > 1:
            _held[key] = (fd, refs - 1)
            return
        del _held[key]
        with contextlib.suppress(OSError):
            os.ftruncate(fd, 0)
        os.close(fd)  # closing the last descriptor releases the flock
