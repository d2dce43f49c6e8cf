"""The search index on disk, next to the database: opening a large workspace loads it instead of
rebuilding it from the database (at 1M facts the rebuild read 1.6M rows, tokenised ~30M words,
looked up 2.1M cached vectors and built the vector graphs: minutes).

Layout under `<db dir>/search-index/`:
- `index.json`: the vocabulary (word and stem ids) and the column codes the partitions use;
- `<family>/<group digest>/`: one partition (`Partition.save`) and its `stamp.json`: the group,
  the WAL position the database had applied when it was written (`applied_seq`, generation),
  the embedder identity, the format version (and `LAYOUTS`' layout of its family where it has one)
  and the SHA-256 of each of the partition's files.

`index.json` and every `stamp.json` carry the SHA-256 of their own content (`lcg.search.sealed`).
A partition is loaded only when its stamp matches the database's current position for the
group and the index's embedder and every file still has its recorded digest; anything else (no
stamp, a stale one, a missing or malformed file) builds it from the database as before. Content
that fails its digest is damage, not staleness: it is logged and counted (`damaged`, shown by
`knowledge_status`) before the partition is built from the database. It is derived data: deleting the directory costs
only the rebuild. Written when the engine closes (write lock held, so positions and partitions
agree), for partitions changed since they were loaded; the vocabulary first (a superset of
every term the partitions written after it use), each partition into a fresh directory renamed
over the old one.
"""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from lcg.fsmodes import private_dir, replace_dir, write_private
from lcg.gcpause import no_gc
from lcg.search import sealed
from lcg.search.partition import Partition

__all__ = ["FORMAT", "LAYOUTS", "Snapshots"]

logger = logging.getLogger(__name__)

# 2: vectors as `lcg.search.vectors` stores (int8 in large partitions); 3: an episode partition
# holds one document per window (lcg.search.windows) with window, start and end columns.
FORMAT = 3
# A family's partition layout where it changed within a FORMAT: a saved partition of another
# layout (or none) is rebuilt from the database at the next open while the vocabulary and the
# other families' partitions load. Bumping FORMAT would rebuild them all from the database, and
# on bench/scale.py's 1M workspace the reads of such an open failed with the buffer pool full.
# episode 2: a column of the standing instructions and preferences each window holds
# (lcg.search.standing).
LAYOUTS = {"episode": 2}
# The group's applied WAL position, as the database records it (None: never recorded).
Position = Callable[[str], Any]


def _fill(part: Partition, stamp: dict[str, Any], fresh: Path) -> None:
    """Write one partition's saved files and its stamp (with their digests) into `fresh`."""
    part.save(fresh)
    files = sealed.digests(fresh, "stamp.json")
    (fresh / "stamp.json").write_text(sealed.dumps({**stamp, "files": files}))


class Snapshots:
    """Where the search index is saved and what it must match to be loaded."""

    def __init__(self, directory: Path, position: Position) -> None:
        self.directory = directory
        self._position = position
        # Snapshot files that failed their digest, rebuilt from the database (relative paths).
        self.damaged: list[str] = []

    def _damaged(self, where: Path) -> None:
        name = str(where.relative_to(self.directory))
        logger.warning(
            "search index snapshot %s failed its checksum: rebuilt from the database", where
        )
        if name not in self.damaged:
            self.damaged.append(name)

    def position(self, group: str) -> Any:
        """The group's applied WAL position as the database records it (None: never)."""
        return self._position(group)

    def _dir(self, family: str, group: str) -> Path:
        digest = hashlib.blake2b(group.encode(), digest_size=10).hexdigest()
        return self.directory / family / digest

    def _stamp(self, family: str, group: str, model: str, dim: int) -> dict[str, Any] | None:
        position = self._position(group)
        if position is None:
            return None
        stamp = {
            "format": FORMAT,
            "group": group,
            "position": list(position),
            "model": model,
            "dim": dim,
        }
        if family in LAYOUTS:
            stamp["layout"] = LAYOUTS[family]
        return stamp

    def read_index(self) -> dict[str, Any] | None:
        """The saved vocabulary and codes, None when absent, unreadable or damaged."""
        path = self.directory / "index.json"
        with no_gc():
            saved, damaged = sealed.read(path)
        if damaged:
            self._damaged(path)
        if saved is None or saved.get("format") != FORMAT:
            return None
        return saved

    def load(self, family: str, group: str, part: Partition, model: str, dim: int) -> bool:
        """Fill the empty `part` from its snapshot if that matches the database; whether it did."""
        where = self._dir(family, group)
        stamp, damaged = sealed.read(where / "stamp.json")
        if damaged:
            self._damaged(where)
        if stamp is None:
            return False
        files = stamp.pop("files", None)
        wanted = self._stamp(family, group, model, dim)
        if wanted is None or stamp != wanted:
            return False
        if not sealed.intact(where, files):
            self._damaged(where)
            return False
        try:
            with no_gc():  # millions of objects, none of them garbage (lcg.gcpause)
                part.load(where)
        except (OSError, ValueError, KeyError, TypeError, RuntimeError):
            logger.warning("search index snapshot %s unreadable: rebuilt from the database", where)
            return False
        return True

    def save(
        self,
        index: dict[str, Any],
        parts: list[tuple[str, str, Partition]],
        model: str,
        dim: int,
    ) -> int:
        """Write `index` (vocabulary, codes) then each changed partition (an unchanged one, only
        its stamp: an installed partition is current, whatever other families' commits moved
        the position); how many partitions were written. The caller holds the write lock."""
        private_dir(self.directory)
        tmp = self.directory / "index.json.tmp"
        write_private(tmp, sealed.dumps({"format": FORMAT, **index}))
        tmp.replace(self.directory / "index.json")
        written = 0
        for family, group, part in parts:
            stamp = self._stamp(family, group, model, dim)
            if stamp is None:
                continue
            where = self._dir(family, group)
            if not part.dirty and (where / "partition.json").exists():
                # Its files are those it was loaded from (checked then): their digests stay.
                kept, _ = sealed.read(where / "stamp.json")
                files = kept.get("files") if kept is not None else None
                if files:
                    write_private(where / "stamp.json", sealed.dumps({**stamp, "files": files}))
                    continue
            replace_dir(where, functools.partial(_fill, part, stamp))
            written += 1
        return written
