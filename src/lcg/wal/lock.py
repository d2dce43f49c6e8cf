"""One writing process per WAL root: an exclusive `flock` on the WAL root directory itself.

A process that opens the WAL for writing opens the root directory and takes an exclusive,
non-blocking `flock` on that descriptor, held for as long as it writes. The lock belongs to the
directory's inode, not to a name: deleting or replacing any file in it (the pid file below
included) lets no second writer in. It also takes the same lock on `<wal_root>/.lcg-wal.lock`,
which versions before the directory lock used (so one of those is refused too, and refuses
this one), and writes its pid into that file. The kernel drops both locks when the process
exits, however it exits (SIGKILL included), so a file left behind by a dead process never
blocks anyone: the lock, not the pid, decides; the pid only names the holder in the error.

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
_held: dict[Path, tuple[int, int, int]] = {}  # resolved root -> (dir fd, file fd, references)


class WalLockedError(ConflictError):
    """Another process holds the WAL root."""

    def __init__(self, root: Path, holder: str) -> None:
        super().__init__(
            f"the WAL directory {root} is in use by another lcg process ({holder}); "
            "stop it first, or give this one its own LCG_WAL_DIR"
        )
        self.root = root


def _holder(path: Path) -> str:
    with contextlib.suppress(OSError, ValueError):
        text = path.read_text(encoding="utf-8").strip()
        if text:
            return f"pid {int(text)}"
    return "pid unknown"


def _lock(path: Path, flags: int) -> int:
    """An open descriptor of `path` holding its exclusive `flock`.

    Raises:
        BlockingIOError: another open file description holds it.
    """
    fd = os.open(path, flags | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


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
            _held[key] = (held[0], held[1], held[2] + 1)
            return key
        try:
            dir_fd = _lock(key, os.O_RDONLY | os.O_DIRECTORY)
        except BlockingIOError:
            raise WalLockedError(root, _holder(key / LOCK_FILE)) from None
        try:
            file_fd = _lock(key / LOCK_FILE, os.O_RDWR | os.O_CREAT)
        except BlockingIOError:
            os.close(dir_fd)
            raise WalLockedError(root, _holder(key / LOCK_FILE)) from None
        except BaseException:
            os.close(dir_fd)
            raise
        with contextlib.suppress(OSError):
            os.ftruncate(file_fd, 0)
            os.pwrite(file_fd, f"{os.getpid()}\n".encode(), 0)
        _held[key] = (dir_fd, file_fd, 1)
        return key


def release(key: Path) -> None:
    """Drop one reference to the lock of `key`; the last one unlocks it."""
    with _guard:
        held = _held.get(key)
        if held is None:
            return
        dir_fd, file_fd, refs = held
        if refs > 1:
            _held[key] = (dir_fd, file_fd, refs - 1)
            return
        del _held[key]
        with contextlib.suppress(OSError):
            os.ftruncate(file_fd, 0)
        os.close(file_fd)  # closing the last descriptor releases a flock
        os.close(dir_fd)
