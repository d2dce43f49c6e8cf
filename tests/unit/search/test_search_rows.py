"""RowCache (lcg.search.rows): rows are served only under the stamp they were read with, only
the missing ones are read, and the least recently used go first."""

from __future__ import annotations

from collections.abc import Mapping

from lcg.search.rows import RowCache


class Store:
    """Rows by uuid, and the reads the cache asked for."""

    def __init__(self, rows: dict[str, str]) -> None:
        self.rows = rows
        self.reads: list[list[str]] = []

    def read(self, uuids: list[str]) -> Mapping[str, str]:
        self.reads.append(list(uuids))
        return {u: self.rows[u] for u in uuids if u in self.rows}


def test_only_missing_rows_are_read_and_a_new_stamp_reads_again() -> None:
    store = Store({"a": "a1", "b": "b1"})
    cache: RowCache[str] = RowCache()
    assert cache.get([("a", (0, 0)), ("b", (0, 0))], store.read) == {"a": "a1", "b": "b1"}
    store.rows["a"] = "a2"
    # Same stamp (no write to the group since): served from memory, no read.
    assert cache.get([("a", (0, 0)), ("b", (0, 0))], store.read) == {"a": "a1", "b": "b1"}
    assert store.reads == [["a", "b"]]
    # The group's stamp moved (a commit): the row is read again, and cached under the new one.
    assert cache.get([("a", (0, 1)), ("b", (0, 0))], store.read) == {"a": "a2", "b": "b1"}
    assert store.reads[-1] == ["a"]
    assert cache.get([("a", (0, 1))], store.read) == {"a": "a2"}
    assert len(store.reads) == 2


def test_missing_rows_stay_absent_and_are_not_cached() -> None:
    store = Store({"a": "a1"})
    cache: RowCache[str] = RowCache()
    assert cache.get([("a", (0, 0)), ("gone", (0, 0))], store.read) == {"a": "a1"}
    store.rows["gone"] = "back"
    assert cache.get([("gone", (0, 0))], store.read) == {"gone": "back"}
    assert store.reads == [["a", "gone"], ["gone"]]


def test_least_recently_used_rows_are_dropped_beyond_capacity() -> None:
    store = Store({k: k.upper() for k in "abcd"})
    cache: RowCache[str] = RowCache(capacity=2)
    stamp = (0, 0)
    cache.get([("a", stamp), ("b", stamp)], store.read)
    cache.get([("a", stamp)], store.read)  # a is now the most recently used
    cache.get([("c", stamp)], store.read)  # drops b
    assert len(cache) == 2
    store.reads.clear()
    assert cache.get([("a", stamp), ("b", stamp), ("c", stamp)], store.read) == {
        "a": "A",
        "b": "B",
        "c": "C",
    }
    assert store.reads == [["b"]]
    cache.clear()
    assert len(cache) == 0
