"""The in-process name index: (group, normalised name) -> entities, for exact-name resolution.

Kuzu has no secondary indexes, so resolving a name by scanning a group costs O(entities). This
index is loaded once at open and updated after each commit from the operations committed; raw
Cypher writes make it reload from a full scan.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime

from lcg.errors import InvalidRequestError
from lcg.models import Entity, normalize_name
from lcg.storage.backend import GraphReader

__all__ = ["NameIndex", "Names"]

_EPOCH = datetime.min


class NameIndex:
    """Entities by (group_id, normalised name), each list ordered by (created_at, uuid)."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], list[tuple[datetime, str, bool]]] = defaultdict(list)
        self._key_of: dict[str, tuple[str, str]] = {}
        self.trusted = True

    def load(self, rows: Iterable[tuple[str, str, str, datetime | None, bool]]) -> None:
        self._by_key.clear()
        self._key_of.clear()
        for group, name, uuid, created_at, merged in rows:
            self.put(group, name, uuid, created_at, merged)
        self.trusted = True

    def put(
        self, group: str, name: str, uuid: str, created_at: datetime | None, merged: bool
    ) -> None:
        self.remove(uuid)
        key = (group, normalize_name(name))
        stamp = created_at.replace(tzinfo=None) if created_at else _EPOCH
        entries = self._by_key[key]
        entries.append((stamp, uuid, merged))
        entries.sort()
        self._key_of[uuid] = key

    def remove(self, uuid: str) -> None:
        key = self._key_of.pop(uuid, None)
        if key is not None:
            entries = [e for e in self._by_key[key] if e[1] != uuid]
            if entries:
                self._by_key[key] = entries
            else:
                del self._by_key[key]

    def drop_group(self, group: str) -> None:
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
