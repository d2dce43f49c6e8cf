"""Giving back the pyarrow table a `COPY` scanned, on an engine that keeps it until the
connection closes (`EngineTraits.copy_keeps_frame`).

LadybugDB 0.22.0 holds the scanned table until its `Connection` is closed (a 1M-row table: 134
MB of Arrow buffers still allocated after the COPY, its commit and a CHECKPOINT; Kuzu frees it
when the COPY returns): a bulk load's tables (~0.8 GB at 1M facts) then all stay alive until
the store reopens the handle after the commit, beside the search partitions the replay builds
meanwhile. What holds it is the binding's implicit prepared-statement cache: `COPY T FROM name`
is rewritten into a parameter and the statement is cached with the table bound to it.
`forget_scans` drops those cached COPY statements after the COPY (nothing else is cached for
them: lcg prepares its own statements). The cache is a private attribute of the binding, so
lcg never depends on it: a binding without it, or whose cache does not hold the COPY statement
where expected, is reported once (a warning) and gets a COPY from a
Parquet file instead (`copy_via_file`, ~20% more CPU for the COPY), which holds nothing once it
returns; the file is written uncompressed beside the database (`.<db>.copy-*.parquet`) and
removed as soon as the COPY ends, whatever the outcome; one a killed process left behind is
removed when the store next opens the database (`remove_stale`, with the database's lock held).
"""

from __future__ import annotations

import contextlib
import logging
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

__all__ = ["copy_via_file", "forget_scans", "holds_scans", "remove_stale"]

logger = logging.getLogger(__name__)

_CACHE = "_pybind_implicit_prepared_cache"  # ladybug.Connection's (0.22.0), a private one
# Whether the binding's cache still behaves as `forget_scans` expects; False once it did not
# (missing, not a dict, no COPY statement in it after a COPY, or an error while dropping): from
# then on `holds_scans` answers False, so every later COPY reads a Parquet file.
_CACHE_USABLE = [True]


def _give_up(why: str) -> None:
    """Stop relying on the binding's statement cache, saying so once per process."""
    if _CACHE_USABLE[0]:
        _CACHE_USABLE[0] = False
        logger.warning(
            "the engine binding's statement cache %s (%s): every COPY now reads a Parquet "
            "file of its table instead (lcg.storage.spool); bench/engine_check.py --only "
            "copy_frame_forgotten re-measures it",
            _CACHE,
            why,
        )


def forget_scans(raw: Any, *, copied: bool = True) -> bool:
    """Drop the COPY statements the binding of `raw` (a `ladybug.Connection`) cached with their
    scanned tables bound; True when it dropped one. Never raises: a cache that is missing or
    does not look as expected (no COPY statement in it although a COPY ran: `copied`) is
    reported once and `holds_scans` answers False from then on (then spool: `copy_via_file`)."""
    try:
        cache = getattr(raw, _CACHE, None)
        if not isinstance(cache, dict):
            _give_up("is missing")
            return False
        lock = getattr(raw, "_prepared_cache_lock", None)
        with lock if lock is not None else contextlib.nullcontext():
            keys = [k for k in cache if isinstance(k, tuple) and str(k[0]).startswith("COPY ")]
            for key in keys:
                cache.pop(key, None)
    except Exception as exc:  # a private attribute of another binding: whatever it does
        _give_up(f"could not be emptied: {exc!r}")
        return False
    if copied and not keys:
        _give_up("held no COPY statement after a COPY")
    return bool(keys)


def holds_scans(raw: Any) -> bool:
    """Whether `forget_scans` can give back what a COPY from a table keeps on `raw`."""
    if not _CACHE_USABLE[0]:
        return False
    if not isinstance(getattr(raw, _CACHE, None), dict):
        _give_up("is missing")
        return False
    return True


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
