"""The writer connection's view of Meta rows on a real Kuzu database: served without a
statement, emptied whenever something other than `set_meta` may have changed them (a ROLLBACK,
raw Cypher), never kept by readers."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lcg.storage import graph
from lcg.storage.store import Conn, Store

T0 = datetime(2024, 1, 1, tzinfo=UTC)


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    s = Store(tmp_path / "db", buffer_pool_mb=128)
    try:
        yield s
    finally:
        s.close()


def _count(conn: Conn, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The statements `conn` runs from now on (the real ones still run)."""
    ran: list[str] = []
    real = conn.run

    def run(query: str, params: dict[str, Any] | None = None) -> Any:
        ran.append(query)
        return real(query, params)

    monkeypatch.setattr(conn, "run", run)
    return ran


def test_writer_meta_view_is_served_and_dropped_with_the_epoch(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.transaction() as tx:
        graph.set_meta(tx, "k", "one")
    with store.writer() as w:
        ran = _count(w, monkeypatch)
        assert graph.get_meta(w, "k") == "one"
        assert graph.get_meta(w, "absent") is None
        assert graph.get_meta(w, "absent") is None
    assert len(ran) == 1  # "k" was written by the writer; "absent" read once
    monkeypatch.undo()
    # A transaction that fails after set_meta: its ROLLBACK empties the view.
    with pytest.raises(RuntimeError), store.transaction() as tx:
        graph.set_meta(tx, "k", "two")
        raise RuntimeError("boom")
    with store.writer() as w:
        assert graph.get_meta(w, "k") == "one"
    # Raw Cypher (cypher.exec) may write Meta: it empties the view too.
    with store.transaction() as tx:
        tx.run("MATCH (m:Meta {key: 'k'}) SET m.value = 'raw'")
    with store.writer() as w:
        assert graph.get_meta(w, "k") == "raw"
    with store.transaction() as tx:
        graph.set_meta(tx, "k", None)
        graph.set_meta(tx, "k", "three")  # recreated after a delete: a MERGE, not a SET
    with store.read() as r:
        assert graph.get_meta(r, "k") == "three"
        assert r.meta() is None  # readers keep no view


def test_a_raw_deletion_of_a_known_meta_row_makes_the_next_write_merge(store: Store) -> None:
    """A stale view would update a row that is gone (writing nothing); the raw statement
    empties it, so the write merges."""
    with store.transaction() as tx:
        graph.set_meta(tx, "k", "one")
    with store.transaction() as tx:
        tx.run("MATCH (m:Meta {key: 'k'}) DELETE m")
        graph.set_meta(tx, "k", "two")
    with store.read() as r:
        assert graph.get_meta(r, "k") == "two"
