"""The in-process name index: (group, normalised name) -> entities, for exact-name resolution.

Kuzu has no secondary indexes, so resolving a name by scanning a group costs O(entities). This
index is loaded once at open and updated after each commit from the operations committed; raw
Cypher writes make it reload from a full scan.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from datetime import datetime

from lcg.models import normalize_name

__all__ = ["NameIndex"]

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
