"""The embedding cache: each (model, text) embedded once, kept across instances, torn tails cut."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np

from lcg.embedding import HashEmbedder
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.embedding.cache import CachedEmbedder
from lcg.embedding.vectors import embed_plan, plan_for_rows
from lcg.models import Entity


class CountingEmbedder:
    def __init__(self) -> None:
        self.inner = HashEmbedder(32)
        self.seen: list[str] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    def embed(self, texts: list[str]) -> Vectors:
        self.seen.extend(texts)
        return self.inner.embed(texts)


def test_each_distinct_text_is_embedded_once_even_across_instances(tmp_path: Path) -> None:
    counting = CountingEmbedder()
    first = CachedEmbedder(counting, tmp_path).embed(["a", "b", "a"])
    again = CachedEmbedder(counting, tmp_path).embed(["b", "c", "a"])
    assert counting.seen == ["a", "b", "c"]
    assert np.array_equal(first, counting.inner.embed(["a", "b", "a"]))
    assert np.array_equal(again, counting.inner.embed(["b", "c", "a"]))


def test_a_torn_final_record_is_cut_and_the_rest_is_kept(tmp_path: Path) -> None:
    counting = CountingEmbedder()
    cache = CachedEmbedder(counting, tmp_path)
    cache.embed(["kept", "torn"])
    with cache.path.open("r+b") as fh:
        fh.truncate(cache.path.stat().st_size - 7)
    counting.seen.clear()
    reopened = CachedEmbedder(counting, tmp_path)
    assert len(reopened) == 1
    assert np.array_equal(reopened.embed(["torn", "kept"]), counting.inner.embed(["torn", "kept"]))
    assert counting.seen == ["torn"]


def test_each_embedder_identity_has_its_own_file(tmp_path: Path) -> None:
    small = CachedEmbedder(HashEmbedder(16), tmp_path)
    large = CachedEmbedder(HashEmbedder(32), tmp_path)
    assert small.embed(["x"]).shape == (1, 16) and large.embed(["x"]).shape == (1, 32)
    assert small.path != large.path


def test_cache_only_plans_never_call_the_model_and_leave_unseen_texts_out(
    tmp_path: Path,
) -> None:
    counting = CountingEmbedder()
    cache = CachedEmbedder(counting, tmp_path)
    cache.embed(["Known name"])
    counting.seen.clear()
    plan = plan_for_rows(
        entities=[
            Entity("e1", "g", "Known name"),
            Entity("e2", "g", "Brand new name", summary="Never embedded."),
        ]
    )
    rows = embed_plan(plan, cache, cache_only=True)
    assert counting.seen == []  # what a caller holding the write lock needs
    assert [(r.kind, r.owner) for r in rows] == [("entity_name", "e1")]
    assert np.array_equal(rows[0].vec, counting.inner.embed(["Known name"])[0])
    assert cache.cached(["Known name", "Brand new name"])[1] is None
    # Without cache_only the same plan embeds what was missing, in one call.
    assert len(embed_plan(plan, cache)) == 3
    assert counting.seen == ["Brand new name", "Never embedded."]


def test_rows_from_the_opened_file_and_appended_since_read_back_together(tmp_path: Path) -> None:
    counting = CountingEmbedder()
    CachedEmbedder(counting, tmp_path).embed([f"old {i}" for i in range(50)])
    cache = CachedEmbedder(counting, tmp_path)
    # Appends past the tail's first allocation (1,024 rows), in several batches.
    for start in range(0, 1500, 500):
        cache.embed([f"new {i}" for i in range(start, start + 500)])
    texts = ["new 1499", "old 3", "missing", "new 0", "old 49", "new 1024"]
    expected = counting.inner.embed(texts)
    got = cache.cached(texts)
    assert got[2] is None
    for i in (0, 1, 3, 4, 5):
        vec = got[i]
        assert vec is not None and np.array_equal(vec, expected[i])
    seen = len(counting.seen)
    assert np.array_equal(cache.embed(texts), expected)
    assert counting.seen[seen:] == ["missing"]
    assert len(CachedEmbedder(counting, tmp_path)) == 50 + 1500 + 1


def test_opening_a_large_cache_holds_no_copy_of_its_vectors(tmp_path: Path) -> None:
    """The opened file is mapped, its hashes kept as 8-byte integers: the search index holds
    the one in-memory copy of the vectors. Reading the file into an array and a
    dict of its hashes cost ~13 MB here (~440 MB at 100k facts)."""
    texts = [f"text number {i}" for i in range(20_000)]
    CachedEmbedder(HashEmbedder(64), tmp_path).embed(texts)
    assert CachedEmbedder(HashEmbedder(64), tmp_path).path.stat().st_size > 5_000_000
    tracemalloc.start()
    try:
        reopened = CachedEmbedder(HashEmbedder(64), tmp_path)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 1_000_000
    probe = ["text number 7", "text number 19999", "never seen"]
    got = reopened.cached(probe)
    expected = HashEmbedder(64).embed(probe)
    assert got[2] is None
    for i in (0, 1):
        vec = got[i]
        assert vec is not None and np.array_equal(vec, expected[i])


def test_appended_vectors_are_read_back_from_the_file_not_held_in_memory(tmp_path: Path) -> None:
    """Vectors embedded through the cache are appended to its file and read back from it: no
    in-memory copy grows with them (it held every vector of a 1M rebuild twice), and
    their hashes are folded into the sorted array once there are many."""
    counting = CountingEmbedder()
    cache = CachedEmbedder(counting, tmp_path)
    texts = [f"appended text {i}" for i in range(70_000)]
    tracemalloc.start()
    try:
        for lo in range(0, len(texts), 10_000):
            cache.embed(texts[lo : lo + 10_000])
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held < 6_000_000  # the vectors alone are 9 MB; the copy held 16.8 MB
    probe = ["appended text 3", "appended text 69999", "appended text 66001", "never"]
    got = cache.cached(probe)
    expected = counting.inner.embed(probe)
    assert got[3] is None
    for i in (0, 1, 2):
        vec = got[i]
        assert vec is not None and np.array_equal(vec, expected[i])
    seen = len(counting.seen)
    assert np.array_equal(cache.embed(probe[:3]), expected[:3])
    assert len(counting.seen) == seen  # all found, none embedded again
    assert len(CachedEmbedder(counting, tmp_path)) == 70_000
