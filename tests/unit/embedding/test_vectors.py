"""Embedding plans turned into vector rows: the bulk path embeds in bounded chunks."""

from __future__ import annotations

from pathlib import Path

from lcg.embedding import HashEmbedder
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.embedding.cache import CachedEmbedder, text_hash
from lcg.embedding.vectors import embed_for_bulk, embed_plan, plan_for_rows
from lcg.models import Entity, Episode, Fact


class CallRecorder:
    def __init__(self) -> None:
        self.inner = HashEmbedder(32)
        self.calls: list[list[str]] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    def embed(self, texts: list[str]) -> Vectors:
        self.calls.append(list(texts))
        return self.inner.embed(texts)


def test_bulk_rows_match_embed_plan_and_every_text_is_cached_in_bounded_calls(
    tmp_path: Path,
) -> None:
    plan = plan_for_rows(
        entities=[Entity("e1", "g", "Ada", summary="A mathematician."), Entity("e2", "g", "Bo")],
        facts=[Fact("f1", "g", "e1", "e2", "KNOWS", "Ada knows Bo")],
        episodes=[Episode("ep1", "g", "n", "Ada met Bo.")],
    )
    recorder = CallRecorder()
    cache = CachedEmbedder(recorder, tmp_path)
    rows = embed_for_bulk(plan, cache, chunk=2)
    assert [len(c) for c in recorder.calls] == [2, 2, 1]  # never more than `chunk` at once
    expected = embed_plan(plan, CachedEmbedder(HashEmbedder(32), tmp_path / "other"))
    assert [(r.kind, r.owner, r.group_id, r.text_hash) for r in rows] == [
        (r.kind, r.owner, r.group_id, r.text_hash) for r in expected
    ]
    assert all(r.vec is None for r in rows)  # the vectors stay in the cache only
    texts = [item[3] for item in plan.wanted]
    assert all(v is not None for v in cache.cached(texts))


def test_bulk_embeds_only_texts_the_cache_lacks_and_the_rows_are_the_same(tmp_path: Path) -> None:
    plan = plan_for_rows(
        entities=[Entity("e1", "g", "Ada", summary="A mathematician."), Entity("e2", "g", "Bo")],
        facts=[Fact("f1", "g", "e1", "e2", "KNOWS", "Ada knows Bo")],
        episodes=[Episode("ep1", "g", "n", "Ada met Bo.")],
    )
    CachedEmbedder(HashEmbedder(32), tmp_path).embed(["Ada", "Ada knows Bo"])  # a kept cache
    recorder = CallRecorder()
    cache = CachedEmbedder(recorder, tmp_path)
    rows = embed_for_bulk(plan, cache)
    assert recorder.calls == [["A mathematician.", "Bo", "Ada met Bo."]]  # the others reused
    assert cache.hits == 0  # ... without reading their vectors back (they are not needed)
    fresh = embed_for_bulk(plan, CachedEmbedder(HashEmbedder(32), tmp_path / "empty"))
    assert rows == fresh  # same rows whether vectors were reused or embedded
    again = CallRecorder()
    assert embed_for_bulk(plan, CachedEmbedder(again, tmp_path)) == rows
    assert again.calls == []  # everything cached now: nothing embedded, nothing read


def test_holds_answers_by_text_hash_for_the_file_and_for_new_vectors(tmp_path: Path) -> None:
    CachedEmbedder(HashEmbedder(32), tmp_path).embed(["old"])
    cache = CachedEmbedder(HashEmbedder(32), tmp_path)  # "old" is in the mapped file
    cache.embed(["new"])  # "new" only in this process's tail
    model = cache.identity.model
    hashes = [text_hash(model, t) for t in ("old", "new", "never")]
    assert cache.holds(hashes).tolist() == [True, True, False]
    assert cache.holds([]).tolist() == []
