"""graph.py's writes of rows found by key on a real Kuzu database: several rows per statement
(reads `UNION ALL`, updates one SET per column set), each row still getting exactly its own
changed columns; and the writer's view of Meta rows, emptied whenever something other than
`set_meta` may have changed them (issue 21)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lcg.models import EmbeddingRow, Entity
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


def _entity(n: int, **changes: Any) -> Entity:
    e = Entity(uuid=f"e{n:02d}", group_id="g", name=f"N{n}", summary=f"s{n}", created_at=T0)
    return replace(e, **changes)


def test_updates_write_each_row_its_own_changed_columns_eight_per_statement(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    with store.transaction() as tx:
        graph.upsert_entities(tx, [_entity(n) for n in range(20)])
    updated = (
        [_entity(n, summary=f"new {n}") for n in range(11)]  # summary only: 2 statements
        + [_entity(n, summary="both", attributes='{"k": 1}') for n in range(11, 16)]  # 1
        + [_entity(n, labels=("Person",)) for n in range(16, 18)]  # labels only: 1
        + [_entity(n) for n in range(18, 20)]  # unchanged: none
    )
    with store.transaction() as tx:
        monkeypatch.setattr(tx, "point_limit", lambda *a, **k: 100)  # key by key, as at scale
        ran = _count(tx, monkeypatch)
        graph.upsert_entities(tx, updated)
    sets = [q for q in ran if " SET " in q]
    reads = [q for q in ran if " RETURN " in q]
    assert len(sets) == 4, sets  # one statement a row before
    assert len(reads) == 2, reads  # 20 keys, 16 per statement (one a key before)
    assert all("x0.summary" not in q or "labels" not in q for q in sets)  # own columns only
    with store.read() as r:
        stored = graph.entities_by_uuids(r, [e.uuid for e in updated])
    assert stored == {e.uuid: e for e in updated}


def test_embedding_updates_known_and_unread_rows(
    store: Store, monkeypatch: pytest.MonkeyPatch
) -> None:
    def row(n: int, text_hash: str) -> EmbeddingRow:
        return EmbeddingRow("entity_name", f"e{n}", "g", text_hash, None)

    with store.transaction() as tx:
        graph.put_embeddings(tx, [row(n, "a") for n in range(10)])
    with store.transaction() as tx:
        monkeypatch.setattr(tx, "point_limit", lambda *a, **k: 100)
        ran = _count(tx, monkeypatch)
        graph.put_embeddings(tx, [row(n, "b") for n in range(5)] + [row(5, "a")])  # 5 change
        # Rows the caller says are stored (every stored key among them) are written whole, unread.
        known = [f"entity_name:e{n}" for n in range(6, 9)]
        graph.put_embeddings(tx, [row(n, "c") for n in range(6, 9)], stored=known)
    assert len([q for q in ran if " SET " in q]) == 2
    with store.read() as r:
        hashes = graph.stored_text_hashes(r, [f"entity_name:e{n}" for n in range(10)])
    assert [hashes[f"entity_name:e{n}"] for n in range(10)] == [*"bbbbb", "a", *"ccc", "a"]


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
