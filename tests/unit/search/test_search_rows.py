"""RowCache (lcg.search.rows): rows are served until a forget names them (their uuid or their
group), a read that a forget overtook caches nothing it named, whole groups are read only while
they fit, and the least recently used rows go first."""

from __future__ import annotations

from dataclasses import dataclass

from lcg.search import rows as rows_mod
from lcg.search.rows import RowCache


@dataclass(frozen=True)
class Row:
    uuid: str
    group_id: str
    text: str


def items(*rows: Row) -> list[tuple[str, Row]]:
    return [(r.uuid, r) for r in rows]


A1, B1, C1 = Row("a", "g1", "a1"), Row("b", "g1", "b1"), Row("c", "g2", "c1")


def test_rows_are_served_until_a_forget_names_them() -> None:
    cache: RowCache[Row] = RowCache()
    cache.put(cache.version, items(A1, B1, C1))
    assert cache.get(["a", "b", "c", "x"]) == {"a": A1, "b": B1, "c": C1}
    cache.forget(["a"])
    assert cache.get(["a", "b", "c"]) == {"b": B1, "c": C1}
    cache.forget([], ["g1"])
    assert cache.get(["a", "b", "c"]) == {"c": C1}
    cache.clear()
    assert cache.get(["c"]) == {} and len(cache) == 0


def test_a_read_overtaken_by_a_forget_caches_nothing_the_forget_named() -> None:
    cache: RowCache[Row] = RowCache()
    version = cache.version  # a search takes the version, then reads the database ...
    cache.forget(["a"])  # ... while a commit that rewrote `a` lands and forgets it
    cache.put(version, items(A1, B1))  # the read may hold the old `a`: it is not cached
    assert cache.get(["a", "b"]) == {"b": B1}
    version = cache.version
    cache.forget([], ["g1"])
    cache.put(version, items(A1, B1, C1))
    assert cache.get(["a", "b", "c"]) == {"c": C1}
    version = cache.version
    cache.clear()
    cache.put(version, items(C1))
    assert cache.get(["c"]) == {}
    # A read taken after the forgets caches everything.
    cache.put(cache.version, items(A1, B1))
    assert cache.get(["a", "b"]) == {"a": A1, "b": B1}


def test_a_read_older_than_the_forget_log_caches_nothing() -> None:
    cache: RowCache[Row] = RowCache()
    version = cache.version
    for i in range(rows_mod._LOG + 1):
        cache.forget([f"other-{i}"])
    cache.put(version, items(A1))
    assert cache.get(["a"]) == {}
    version = cache.version
    for i in range(rows_mod._LOG):
        cache.forget([f"other-{i}"])
    cache.put(version, items(A1))  # the log still reaches back to `version`
    assert cache.get(["a"]) == {"a": A1}


def test_whole_groups_are_read_only_while_they_fit() -> None:
    cache: RowCache[Row] = RowCache(capacity=10)
    assert cache.wants_whole("g1", 5)
    assert not cache.wants_whole("g1", 6)  # more than half the capacity
    cache.put(cache.version, items(A1, B1), whole="g1")
    assert not cache.wants_whole("g1", 2)  # read whole already
    assert cache.wants_whole("g2", 5)
    cache.put(cache.version, [(f"x{i}", Row(f"x{i}", "g2", "")) for i in range(5)], whole="g2")
    assert not cache.wants_whole("g3", 4)  # 2 + 5 + 4 > 10
    assert cache.wants_whole("g3", 3)
    cache.forget([], ["g1"])  # forgotten whole: read whole again next time
    assert cache.wants_whole("g1", 2)
    # A whole read that a forget of its group overtook does not count as whole.
    version = cache.version
    cache.forget([], ["g1"])
    cache.put(version, items(A1, B1), whole="g1")
    assert cache.wants_whole("g1", 2)


def test_least_recently_used_rows_are_dropped_beyond_the_lru_bound() -> None:
    cache: RowCache[Row] = RowCache(lru=2)
    cache.put(cache.version, items(A1, B1))
    assert cache.get(["a"]) == {"a": A1}  # a is now the most recently used
    cache.put(cache.version, items(C1))  # drops b
    assert len(cache) == 2
    assert cache.get(["a", "b", "c"]) == {"a": A1, "c": C1}


def test_rows_outside_whole_groups_keep_to_the_lru_bound() -> None:
    cache: RowCache[Row] = RowCache(capacity=10, lru=2)
    cache.put(cache.version, items(A1, B1, C1))
    assert len(cache) == 2  # no whole group: the LRU bound
    cache.put(cache.version, [(f"x{i}", Row(f"x{i}", "g3", "")) for i in range(5)], whole="g3")
    cache.put(cache.version, items(A1, B1, C1))
    assert len(cache) == 7  # the whole group's 5 rows beside 2 others
    assert set(cache.get([f"x{i}" for i in range(5)])) == {f"x{i}" for i in range(5)}
