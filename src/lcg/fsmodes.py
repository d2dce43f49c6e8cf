"""Private file modes for everything lcg creates inside its workspace.

`.lcg` holds the whole graph, the write-ahead log and the embedding cache: like `.lcg` itself,
every directory lcg creates in it is 0700 and every file 0600, whatever the process umask (the
modes are set explicitly after creation, since `mkdir`/`open` only ever narrow by the umask and
`mkdir(parents=True)` ignores the mode for the parents it makes). Files a library writes for
lcg (numpy, Arrow, the embedded database) are narrowed after the fact (`private_tree`), and the
`lcg` commands run under a 077 umask (`private_umask`), so nothing they create is readable by
another local user even where no helper here was called.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "DIR_MODE",
    "FILE_MODE",
    "open_private",
    "private_dir",
    "private_file",
    "private_tree",
    "private_umask",
    "replace_dir",
    "write_private",
]

DIR_MODE = 0o700
FILE_MODE = 0o600


def private_dir(path: Path) -> Path:
    """`mkdir -p path`, each directory this call creates made 0700; existing ones are left as
    they are (the user may have chosen their modes)."""
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        if current.parent == current:
            break
        current = current.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=DIR_MODE)
        except FileExistsError:
            continue
        os.chmod(directory, DIR_MODE)
    return path


def private_file(path: Path) -> None:
    """Make an existing file 0600 (a no-op if it is gone)."""
    with contextlib.suppress(FileNotFoundError):
        os.chmod(path, FILE_MODE)


def open_private(path: Path, flags: int) -> int:
    """`os.open` that creates the file 0600 and also narrows a file created earlier with
    broader modes (an older lcg wrote 0644)."""
    fd = os.open(path, flags, FILE_MODE)
    os.fchmod(fd, FILE_MODE)
    return fd


def write_private(path: Path, data: str | bytes) -> None:
    """Write `data` (text as UTF-8) to `path`, created or narrowed to 0600."""
    raw = data.encode() if isinstance(data, str) else data
    with os.fdopen(open_private(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
        fh.write(raw)


def private_tree(root: Path) -> None:
    """Narrow `root` and everything under it (no symbolic link followed) to 0700 / 0600."""
    if root.is_symlink() or not root.exists():
        return
    if not root.is_dir():
        private_file(root)
        return
    os.chmod(root, DIR_MODE)
    for directory, dirnames, filenames in os.walk(root):
        for name in dirnames:
            path = Path(directory, name)
            if not path.is_symlink():
                os.chmod(path, DIR_MODE)
        for name in filenames:
            path = Path(directory, name)
            if not path.is_symlink():
                private_file(path)


def private_umask() -> None:
    """Make every file and directory this process creates from now on private (umask 077):
    the `lcg` commands call it first, for what third-party code writes (the database's own
    files)."""
    os.umask(0o077)


def replace_dir(where: Path, fill: Callable[[Path], None]) -> None:
    """Replace the directory `where` by one `fill` writes: filled beside it (`<name>.tmp`, a
    private directory), then swapped in by renames, so a reader or a crash sees the old
    directory or the new one whole (at worst `<name>.old` left behind, removed next time)."""
    fresh = where.with_name(where.name + ".tmp")
    shutil.rmtree(fresh, ignore_errors=True)
    private_dir(fresh)
    fill(fresh)
    private_tree(fresh)  # numpy and Arrow create their files under the process umask
    old = where.with_name(where.name + ".old")
    shutil.rmtree(old, ignore_errors=True)
    if where.exists():
        where.rename(old)
    fresh.rename(where)
    shutil.rmtree(old, ignore_errors=True)
