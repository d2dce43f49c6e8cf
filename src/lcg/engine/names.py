"""The in-process name index: (group, normalised name) -> entities, for exact-name resolution.

Kuzu has no secondary indexes, so resolving a name by scanning a group costs O(entities). This
index is loaded once at open and updated after each commit from the operations committed; raw
Cypher writes make it reload from a full scan.

Saved next to the database (`<db dir>/name-index/`, written when the engine closes) so that an
open reads it back instead of scanning every entity (at 500k entities the scan and the Python
objects per row were ~40% of an open). The copy is used only when its stamp equals
what the database says now (every group's recorded WAL position and the entity count, as the
caller computes it) and its files and stamp pass their SHA-256 digests (`lcg.search.sealed`, as
the search snapshot and the temporal rows); anything else is a log line and the scan, and a copy
that failed its digests is counted (`NameIndex.damaged`, `knowledge_status.derived_indexes`).
"""

from __future__ import annotations

import io
import json
import logging
import os
import zipfile
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from lcg.engine.replay import position_key
from lcg.errors import InvalidRequestError
from lcg.fsmodes import open_private, private_dir, write_private
from lcg.gcpause import no_gc
from lcg.models import Entity, normalize_name
from lcg.search import sealed
from lcg.storage.backend import GraphReader

__all__ = ["NameIndex", "NameRow", "Names", "name_rows_of", "names_stamp"]

logger = logging.getLogger(__name__)

FORMAT = 2  # 2: sealed (lcg.search.sealed) stamp and files; 1 carried the data's blake2b
_NO_TIME = -(2**63)  # the order key of an entity without created_at: before every other
_UNIX = datetime(1970, 1, 1)  # naive on purpose: created_at is compared without its zone


def names_stamp(conn: GraphReader) -> dict[str, Any]:
    """What a saved name index must match to be used: every group's recorded WAL position (the
    raw meta values) and the entity count."""
    positions = conn.meta_with_prefix(position_key(""))
    return {"positions": dict(sorted(positions.items())), "entities": conn.counts()["entities"]}


# (group_id, name, uuid, created_at, is_merged): `GraphReader.name_rows`' rows, `NameIndex.load`'s.
NameRow = tuple[str, str, str, datetime | None, bool]


def name_rows_of(entities: Iterable[Entity]) -> list[NameRow]:
    """The name index's rows of entities a bulk replay loaded, as the database returns them
    (`GraphReader.name_rows`: no name is "", created_at in UTC, merged is the "Merged" label),
    so the index is made without reading every entity back (lcg.engine.namekeeper)."""
    return [
        (
            e.group_id,
            e.name or "",
            e.uuid,
            e.created_at
            if e.created_at is None or e.created_at.tzinfo is UTC
            else e.created_at.astimezone(UTC),
            "Merged" in e.labels,
        )
        for e in entities
    ]


def _order(created_at: datetime | None) -> int:
    """An entity's place in its name's list: created_at (naive, as microseconds), else first."""
    if created_at is None:
        return _NO_TIME
    return (created_at.replace(tzinfo=None) - _UNIX) // timedelta(microseconds=1)


def _pack(texts: Sequence[str]) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.int64]]:
    """Strings as one UTF-8 blob and each one's end (in characters of the decoded blob)."""
    ends = np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts)))
    return np.frombuffer("".join(texts).encode(), dtype=np.uint8), ends


def _unpack(blob: npt.NDArray[np.uint8], ends: npt.NDArray[np.int64]) -> list[str]:
    """`_pack`'s inverse.

    Raises:
        ValueError: the blob is not UTF-8 or the ends do not fit it.
    """
    text = blob.tobytes().decode()
    if len(ends) and (int(ends[-1]) != len(text) or bool((np.diff(ends) < 0).any())):
        raise ValueError("string ends do not fit their blob")
    if not len(ends):
        if text:
            raise ValueError("string ends do not fit their blob")
        return []
    starts = [0, *ends[:-1].tolist()]
    return [text[a:b] for a, b in zip(starts, ends.tolist(), strict=True)]


class NameIndex:
    """Entities by (group_id, normalised name), each list ordered by (created_at, uuid)."""

    def __init__(self) -> None:
        # Each list ordered by (created_at as `_order`, uuid).
        self._by_key: dict[tuple[str, str], list[tuple[int, str, bool]]] = defaultdict(list)
        self._key_of: dict[str, tuple[str, str]] = {}
        self.trusted = True
        self.changed = True  # since the last `save` or `restore` (a saved copy is current)
        self.damaged = 0  # saved copies that failed their digests (`restore`), rebuilt

    def load(self, rows: Iterable[NameRow]) -> None:
        """Replace the index with `rows`: the same result as `put` of each row in turn (a later
        row of a uuid replaces its earlier one), but each list is sorted once, not per row."""
        with no_gc():
            latest: dict[str, tuple[tuple[str, str], tuple[int, str, bool]]] = {}
            for group, name, uuid, created_at, merged in rows:
                latest[uuid] = ((group, normalize_name(name)), (_order(created_at), uuid, merged))
            by_key: dict[tuple[str, str], list[tuple[int, str, bool]]] = defaultdict(list)
            for key, entry in latest.values():
                by_key[key].append(entry)
            for entries in by_key.values():
                entries.sort()
            self._by_key = by_key
            self._key_of = {uuid: key for uuid, (key, _) in latest.items()}
        self.trusted = True
        self.changed = True

    def put(
        self, group: str, name: str, uuid: str, created_at: datetime | None, merged: bool
    ) -> None:
        self.remove(uuid)
        key = (group, normalize_name(name))
        entries = self._by_key[key]
        entries.append((_order(created_at), uuid, merged))
        entries.sort()
        self._key_of[uuid] = key
        self.changed = True

    def remove(self, uuid: str) -> None:
        key = self._key_of.pop(uuid, None)
        if key is not None:
            self.changed = True
            entries = [e for e in self._by_key[key] if e[1] != uuid]
            if entries:
                self._by_key[key] = entries
            else:
                del self._by_key[key]

    def drop_group(self, group: str) -> None:
        self.changed = True
        for key in [k for k in self._by_key if k[0] == group]:
            for _, uuid, _ in self._by_key.pop(key):
                self._key_of.pop(uuid, None)

    def lookup(self, group: str, name: str) -> list[tuple[str, bool]]:
        """(uuid, is_merged) of the entities with this name in the group, earliest first."""
        return [
            (uuid, merged)
            for _, uuid, merged in self._by_key.get((group, normalize_name(name)), [])
        ]

    def __len__(self) -> int:
        return len(self._key_of)

    def __contains__(self, uuid: object) -> bool:
        return uuid in self._key_of

    # -- the saved copy ----------------------------------------------------------------------

    def save(self, directory: Path, stamp: dict[str, Any]) -> None:
        """Write the index under `directory` with `stamp` (what the database says now; the
        caller holds the write lock, so no commit moves it meanwhile). Unchanged since the
        last save or restore: only the stamp is rewritten. An untrusted index is not saved
        (and a saved copy is removed)."""
        data, meta = directory / "names.npz", directory / "stamp.json"
        if not self.trusted:
            meta.unlink(missing_ok=True)
            return
        private_dir(directory)
        if self.changed or not data.exists():
            rows = [(key, entry) for key, entries in self._by_key.items() for entry in entries]
            groups = sorted({key[0] for key, _ in rows})
            number = {g: i for i, g in enumerate(groups)}
            arrays: dict[str, npt.NDArray[Any]] = {
                "group": np.fromiter(
                    (number[key[0]] for key, _ in rows), dtype=np.int32, count=len(rows)
                ),
                "order": np.fromiter((e[0] for _, e in rows), dtype=np.int64, count=len(rows)),
                "merged": np.fromiter((e[2] for _, e in rows), dtype=bool, count=len(rows)),
            }
            for field, texts in (
                ("groups", groups),
                ("name", [key[1] for key, _ in rows]),
                ("uuid", [e[1] for _, e in rows]),
            ):
                arrays[f"{field}_blob"], arrays[f"{field}_ends"] = _pack(texts)
            meta.unlink(missing_ok=True)  # no stamp pairs the old data with new positions
            tmp = directory / "names.npz.tmp"
            with os.fdopen(open_private(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC), "wb") as fh:
                np.savez(fh, **arrays)  # type: ignore[arg-type]  # numpy's stub: str keys
            tmp.replace(data)
        files = sealed.digests(directory, "stamp.json")
        tmp_meta = directory / "stamp.json.tmp"
        write_private(tmp_meta, sealed.dumps({"format": FORMAT, **stamp, "files": files}))
        tmp_meta.replace(meta)
        self.changed = False

    def restore(self, directory: Path, stamp: dict[str, Any]) -> bool:
        """Replace the index with the copy under `directory` if its stamp is `stamp` and its
        files are the ones saved (`lcg.search.sealed`); whether it did (else the index is
        unchanged). A copy that fails its digests, or that passes them and still does not
        read, is counted in `damaged` (a copy merely stale, or missing, is not)."""
        saved, damaged = sealed.read(directory / "stamp.json")
        if damaged:
            return self._damaged(directory, "its stamp fails its digest")
        if saved is None or saved.get("format") != FORMAT:
            return False
        files = saved.pop("files", None)
        saved.pop("format")
        if saved != stamp:
            logger.info("name index snapshot is stale: read from the database")
            return False
        if not sealed.intact(directory, files):
            return self._damaged(directory, "a file fails its digest")
        try:
            raw = (directory / "names.npz").read_bytes()
            with no_gc():
                by_key, key_of = _read_saved(raw)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            return self._damaged(directory, str(exc))
        self._by_key, self._key_of = by_key, key_of
        self.trusted = True
        self.changed = False
        return True

    def _damaged(self, directory: Path, why: str) -> bool:
        logger.warning(
            "name index snapshot %s unusable (%s): read from the database", directory, why
        )
        self.damaged += 1
        return False


def _read_saved(
    raw: bytes,
) -> tuple[defaultdict[tuple[str, str], list[tuple[int, str, bool]]], dict[str, tuple[str, str]]]:
    """The index in `raw`, a file `NameIndex.save` wrote (rows in list order, lists sorted).

    Raises:
        OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile: a missing or malformed file.
    """
    with np.load(io.BytesIO(raw), allow_pickle=False) as saved:
        arrays = {name: saved[name] for name in saved.files}
    groups = _unpack(arrays["groups_blob"], arrays["groups_ends"])
    names = _unpack(arrays["name_blob"], arrays["name_ends"])
    uuids = _unpack(arrays["uuid_blob"], arrays["uuid_ends"])
    group, order, merged = arrays["group"], arrays["order"], arrays["merged"]
    n = len(uuids)
    if not len(names) == len(group) == len(order) == len(merged) == n:
        raise ValueError("columns of different lengths")
    if n and not 0 <= int(group.min()) <= int(group.max()) < len(groups):
        raise ValueError("a row's group is not one of the groups")
    keys = [(groups[g], name) for g, name in zip(group.tolist(), names, strict=True)]
    by_key: defaultdict[tuple[str, str], list[tuple[int, str, bool]]] = defaultdict(list)
    for key, entry in zip(
        keys, zip(order.tolist(), uuids, merged.tolist(), strict=True), strict=True
    ):
        by_key[key].append(entry)
    key_of = dict(zip(uuids, keys, strict=True))
    if len(key_of) != n:
        raise ValueError("a uuid appears twice")
    return by_key, key_of


class Names:
    """Name resolution (`Engine.names`): exact names to entities over the name index, with
    Merged tombstones followed to the live entity."""

    def __init__(self, index: NameIndex, reload: Callable[[], None]) -> None:
        self._index = index
        self._reload = reload

    @property
    def trusted(self) -> bool:
        """Whether the name index is complete (raw Cypher writes make it fall back to scans)."""
        return self._index.trusted

    @property
    def damaged(self) -> int:
        """Saved copies that failed their digests at an open (each rebuilt from the store)."""
        return self._index.damaged

    def lookup(self, group_id: str, name: str) -> list[tuple[str, bool]]:
        """(uuid, is_merged) of the entities with this name in the group, earliest first."""
        return self._index.lookup(group_id, name)

    def existing(self, uuids: Iterable[str]) -> set[str] | None:
        """Which of the uuids are entities (of any group), tombstones included; None while the
        index is not trusted (the caller asks the store)."""
        if not self._index.trusted:
            return None
        return {u for u in uuids if u in self._index}

    def resolve(self, conn: GraphReader, group_id: str, name: str) -> Entity | None:
        """Exact (trimmed, case-insensitive) name in the group, earliest first, tombstones followed."""
        hits = self._index.lookup(group_id, name)
        if not hits:
            return None
        entity = conn.entity_by_uuid(hits[0][0])
        if entity is None:  # index out of date: trust the database
            self._reload()
            hits = self._index.lookup(group_id, name)
            entity = conn.entity_by_uuid(hits[0][0]) if hits else None
            if entity is None:
                return None
        return self.follow_merged(conn, entity, f"name '{name}'")

    def follow_merged(self, conn: GraphReader, entity: Entity, what: str) -> Entity:
        """Follow `merged_into` from a tombstone to the live entity (InvalidRequestError if none)."""
        seen = {entity.uuid}
        current = entity
        while "Merged" in current.labels:
            target_uuid = current.merged_into or json.loads(current.attributes or "{}").get(
                "merged_into"
            )
            target = conn.entity_by_uuid(target_uuid) if isinstance(target_uuid, str) else None
            if target is None or target.group_id != entity.group_id or target.uuid in seen:
                raise InvalidRequestError(
                    f"{what} resolves to a Merged tombstone whose merged_into chain is missing, "
                    f"dangling, cyclic or crosses groups; refusing to guess"
                )
            seen.add(target.uuid)
            current = target
        return current
