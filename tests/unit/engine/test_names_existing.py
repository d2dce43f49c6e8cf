"""`Names.existing`: which uuids are entities, from the name index, or None while it is not
trusted (the caller then asks the store)."""

from __future__ import annotations

from datetime import UTC, datetime

from lcg.engine.names import NameIndex, Names


def test_existing_answers_from_the_index_and_only_while_it_is_trusted() -> None:
    index = NameIndex()
    at = datetime(2026, 1, 1, tzinfo=UTC)
    index.load([("g", "Alice", "e-a", at, False), ("h", "Old Alice", "e-t", at, True)])
    names = Names(index, lambda: None)
    assert names.existing(["e-a", "e-t", "e-missing"]) == {"e-a", "e-t"}
    index.remove("e-a")
    assert names.existing(["e-a"]) == set()
    index.trusted = False
    assert names.existing(["e-t"]) is None
