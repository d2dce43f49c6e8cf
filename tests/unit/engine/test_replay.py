"""Bulk replay: the cyclic collector is paused while it folds and loads, then restored."""

from __future__ import annotations

import gc
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lcg.embedding import HashEmbedder
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.engine.replay import replay_group
from lcg.models import Entity, Fact
from lcg.storage import graph
from lcg.storage.kuzu_backend import KuzuBackend
from lcg.storage.store import Store
from lcg.wal.records import Op, entity_op, fact_op
from lcg.wal.writer import Wal


class GcWatcher:
    """An embedder that notes whether the collector ran while it was called."""

    def __init__(self) -> None:
        self.inner = HashEmbedder(16)
        self.enabled_during: list[bool] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    def embed(self, texts: list[str]) -> Vectors:
        self.enabled_during.append(gc.isenabled())
        return self.inner.embed(texts)


def _wal(tmp_path: Path) -> Path:
    wal = Wal(tmp_path / "wal", 1 << 20, 1000)
    at = datetime(2024, 1, 1, tzinfo=UTC)
    wal.append(
        "g",
        [
            entity_op(Entity("a", "g", "Ada", created_at=at)),
            entity_op(Entity("b", "g", "Bo", created_at=at)),
            fact_op(Fact("f", "g", "a", "b", "KNOWS", "Ada knows Bo", valid_at=at, created_at=at)),
        ],
    )
    wal.close()
    return tmp_path / "wal" / "g"


@pytest.mark.parametrize("enabled", [True, False])
def test_bulk_replay_pauses_the_collector_and_restores_its_state(
    tmp_path: Path, enabled: bool
) -> None:
    directory = _wal(tmp_path)
    store = Store(tmp_path / "db" / "g.db")
    watcher = GcWatcher()
    was = gc.isenabled()
    if not enabled:
        gc.disable()
    try:
        report = replay_group(
            KuzuBackend(store), directory, "g", watcher, generation=None, bulk_load=True
        )
        assert gc.isenabled() is enabled
    finally:
        if was:
            gc.enable()
    try:
        assert report.mode == "bulk" and report.mutations_replayed == 3
        assert watcher.enabled_during and not any(watcher.enabled_during)
        with store.read() as conn:
            assert graph.group_counts(conn, "g")["edges"] == 1
    finally:
        store.close()


def test_a_stream_with_a_raw_statement_is_read_again_and_replayed_op_by_op(
    tmp_path: Path,
) -> None:
    directory = _wal(tmp_path)
    wal = Wal(tmp_path / "wal", 1 << 20, 1000)
    query = "MATCH (e:Entity {uuid: 'a'}) SET e.summary = 'set by Cypher'"
    wal.append("g", [Op("cypher.exec", {"query": query})])
    wal.close()
    store = Store(tmp_path / "db" / "g.db")
    try:
        report = replay_group(
            KuzuBackend(store), directory, "g", HashEmbedder(16), generation=None, bulk_load=True
        )
        assert report.mode == "incremental"  # a fold cannot know a statement's effect
        assert report.mutations_replayed == 4 and report.failed_lines == 0
        assert report.wal_files_processed == report.wal_files_total == 2  # each file once
        with store.read() as conn:
            assert graph.entities_by_uuids(conn, ["a"])["a"].summary == "set by Cypher"
            assert graph.group_counts(conn, "g")["edges"] == 1
    finally:
        store.close()


def test_prebuilt_partitions_are_installed_unless_discarded(tmp_path: Path) -> None:
    """A bulk load that fails discards what was built beside it (`Loaded.discard`): nothing is
    installed, even when the build finishes after the discard."""
    from lcg.engine.warmup import PrebuiltSearch
    from lcg.search.index import FAMILIES, SearchIndex
    from lcg.wal.fold import fold
    from lcg.wal.reader import iter_records

    def no_reads(fn: object) -> object:
        raise AssertionError("no partition is loaded from the database here")

    folded = fold("g", iter_records(_wal(tmp_path)))
    for discard_first in (False, True):
        index = SearchIndex(no_reads, HashEmbedder(16))
        index.invalidate(["g"])
        prebuilt = PrebuiltSearch(index)
        if discard_first:
            prebuilt.discard()
        prebuilt.build(folded)
        prebuilt.install("g")
        if discard_first:
            with pytest.raises(AssertionError, match="no partition is loaded"):
                index.views("entity", ["g"])
        else:
            assert {f: len(index.views(f, ["g"])[0][1].uuids) for f in FAMILIES} == {
                "entity": 2,
                "fact": 1,
                "episode": 0,
            }
