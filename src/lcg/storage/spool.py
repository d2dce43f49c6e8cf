"""`COPY` from a Parquet file written beside the database, for an engine that keeps every
pyarrow table a `COPY` scanned until the connection closes (`EngineTraits.copy_keeps_frame`).

LadybugDB 0.22.0 holds a reference to the scanned table until its `Connection` is closed (a
1M-row table: 134 MB of Arrow buffers still allocated after the COPY, its commit and a
CHECKPOINT; Kuzu frees it when the COPY returns): a bulk load's tables (~0.8 GB at 1M facts)
then all stay alive until the store reopens the handle after the commit, beside the search
partitions the replay builds meanwhile. A COPY from a file holds nothing once it returns;
the file is written uncompressed beside the database (`.<db>.copy-*.parquet`) and removed as
soon as the COPY ends, whatever the outcome; one a killed process left behind is removed when
the store next opens the database (`remove_stale`, with the database's lock held).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

__all__ = ["copy_via_file", "remove_stale"]


def _prefix(database: Path) -> str:
    return f".{database.name}.copy-"


def remove_stale(database: Path) -> None:
    """Remove the spool files of `database` a killed process left (its lock must be held)."""
    for leftover in database.parent.glob(f"{_prefix(database)}*.parquet"):
        with contextlib.suppress(OSError):
            leftover.unlink()


def copy_via_file(
    run: Callable[[str], Any], table: str, frame: Any, options: str, database: Path
) -> bool:
    """`COPY <table> FROM '<file>'<options>` of `frame` spooled to a private Parquet file
    beside `database`; False (nothing run) when the file's path cannot be a plain Cypher
    literal."""
    fd, name = tempfile.mkstemp(prefix=_prefix(database), suffix=".parquet", dir=database.parent)
    try:
        if "'" in name or "\\" in name:
            return False
        with os.fdopen(fd, "wb") as fh:
            fd = -1
            pq.write_table(frame, fh, compression="none")
        run(f"COPY {table} FROM '{name}'{options}")
        return True
    finally:
        if fd >= 0:
            os.close(fd)
        with contextlib.suppress(OSError):
            Path(name).unlink()
