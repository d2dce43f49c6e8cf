"""Giving back the pyarrow table a `COPY` scanned, on an engine that keeps it until the
connection closes (`EngineTraits.copy_keeps_frame`).

LadybugDB 0.22.0 holds the scanned table until its `Connection` is closed (a 1M-row table: 134
MB of Arrow buffers still allocated after the COPY, its commit and a CHECKPOINT; Kuzu frees it
when the COPY returns): a bulk load's tables (~0.8 GB at 1M facts) then all stay alive until
the store reopens the handle after the commit, beside the search partitions the replay builds
meanwhile. What holds it is the binding's implicit prepared-statement cache: `COPY T FROM name`
is rewritten into a parameter and the statement is cached with the table bound to it.
`forget_scans` drops those cached COPY statements after the COPY (nothing else is cached for
them: lcg prepares its own statements). A binding without that cache gets a COPY from a
Parquet file instead (`copy_via_file`, ~20% more CPU for the COPY), which holds nothing once it
returns; the file is written uncompressed beside the database (`.<db>.copy-*.parquet`) and
removed as soon as the COPY ends, whatever the outcome; one a killed process left behind is
removed when the store next opens the database (`remove_stale`, with the database's lock held).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

__all__ = ["copy_via_file", "forget_scans", "holds_scans", "remove_stale"]

_CACHE = "_pybind_implicit_prepared_cache"  # ladybug.Connection's (0.22.0)


def forget_scans(raw: Any) -> bool:
    """Drop the COPY statements the binding of `raw` (a `ladybug.Connection`) cached with their
    scanned tables bound; False when it has no such cache (then spool: `copy_via_file`)."""
    cache = getattr(raw, _CACHE, None)
    if not isinstance(cache, dict):
        return False
    lock = getattr(raw, "_prepared_cache_lock", None)
    with lock if lock is not None else contextlib.nullcontext():
        for key in [k for k in cache if isinstance(k, tuple) and str(k[0]).startswith("COPY ")]:
            del cache[key]
    return True


def holds_scans(raw: Any) -> bool:
    """Whether `forget_scans` can give back what a COPY from a table keeps on `raw`."""
    return isinstance(getattr(raw, _CACHE, None), dict)


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
