"""A word deep inside a long episode is found by both halves of passage search, at its window.

An embedder reads only the start of a long text (all-MiniLM-L6-v2: 256 word pieces). The
embedder here stands in for such a model: lcg's hash embedder over the first 1,000 characters of
each text (what a model's window holds of English prose), so a sentence 5,000 characters into an
episode is invisible to a vector of the whole episode. The index holds one document and one
vector per window of the episode (lcg.search.windows), so the BM25 list and the vector list each
find the episode, and the hit carries the offsets of the window holding the sentence.

Both storages: server mode (FalkorDB) serves searches from the same in-process index.
"""

from __future__ import annotations

from collections.abc import Iterator

import anyio.to_thread
import numpy as np
import pytest

from lcg import Engine, Episode, EpisodeCommit, Settings, open_engine
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.embedding.hashing import HashEmbedder
from lcg.graph.hybrid import episode_hits
from lcg.search.strategy import LEXICAL_ONLY, VECTOR_ONLY
from lcg.search.windows import WINDOW_CHARS
from lcg.service.registry import dispatch

BOTH_STORAGES = True
pytestmark = pytest.mark.anyio

G = "plant"
DEEP = "The zyxquartz gasket cracked at the northern pumping station during the night shift."
FILLER = (
    "Routine inspection of valves, meters and filters went as planned today. "
    "Crews logged pressure readings and cleaned the intake screens before lunch. "
)


class _FirstWindow:
    """lcg's hash embedder over the first `WINDOW_CHARS` characters of each text."""

    def __init__(self) -> None:
        self._inner = HashEmbedder()
        dim = self._inner.identity.dim
        self._identity = EmbedderIdentity(model=f"hash-first-window-{dim}", dim=dim)

    @property
    def identity(self) -> EmbedderIdentity:
        return self._identity

    def embed(self, texts: list[str]) -> Vectors:
        return self._inner.embed([t[:WINDOW_CHARS] for t in texts])


def _long_text() -> tuple[str, int]:
    """~10,000 characters of paragraphs with `DEEP` about halfway; where `DEEP` starts."""
    paragraphs = [FILLER * 3 for _ in range(30)]
    paragraphs.insert(15, FILLER + DEEP)
    text = "\n\n".join(paragraphs)
    return text, text.index(DEEP)


@pytest.fixture
def windowed(settings: Settings) -> Iterator[Engine]:
    eng = open_engine(settings, embedder=_FirstWindow())
    try:
        yield eng
    finally:
        eng.close()


async def _load(engine: Engine) -> tuple[str, int]:
    text, at = _long_text()
    await engine.commit_episode(EpisodeCommit(G, Episode("ep-long", G, "shift log", text)))
    for i in range(3):
        short = Episode(f"ep-{i}", G, "shift log", FILLER)
        await engine.commit_episode(EpisodeCommit(G, short))
    return text, at


async def test_a_deep_sentence_is_found_by_bm25_and_by_its_windows_vector(
    windowed: Engine,
) -> None:
    text, at = await _load(windowed)
    assert len(text) > 8 * WINDOW_CHARS and at > 4 * WINDOW_CHARS
    for strategy, query, floor in (
        (LEXICAL_ONLY, "zyxquartz", None),
        (VECTOR_ONLY, DEEP, 0.2),
    ):
        hits = await anyio.to_thread.run_sync(
            lambda s=strategy, q=query, f=floor: episode_hits(windowed, q, [G], 5, s, floor=f)
        )
        assert [ep.uuid for ep, _ in hits][:1] == ["ep-long"], strategy.name
        ep, hit = hits[0]
        assert hit.window is not None, strategy.name
        start, end = hit.window
        assert start <= at and at + len(DEEP) <= end, (strategy.name, hit.window, at)
        assert end - start <= WINDOW_CHARS
        assert ep.content[start:end].strip() == ep.content[start:end]
        if strategy is VECTOR_ONLY:
            assert hit.cosine > 0.2
            # The episode's own vector (its first window) is far from the sentence.
            first = np.asarray(_FirstWindow().embed([text])[0], dtype=np.float32)
            query_vec = np.asarray(_FirstWindow().embed([DEEP])[0], dtype=np.float32)
            assert float(first @ query_vec) < 0.2 < hit.cosine


async def test_a_long_episode_is_one_passage_and_its_delete_removes_every_window(
    windowed: Engine, settings: Settings
) -> None:
    await _load(windowed)
    got = await dispatch(
        windowed, "knowledge_search_passages", {"query": "zyxquartz gasket", "group_ids": [G]}
    )
    uuids = [p["uuid"] for p in got["passages"]]
    assert uuids[:1] == ["ep-long"] and len(uuids) == len(set(uuids))
    assert 0.0 < got["passages"][0]["score"] <= 1.0
    # Deleting the episode removes every window of it.
    await dispatch(windowed, "knowledge_delete_episode", {"episode_uuid": "ep-long"})
    got = await dispatch(
        windowed, "knowledge_search_passages", {"query": "zyxquartz", "group_ids": [G]}
    )
    assert got["passages"] == []


def test_windows_come_back_from_the_saved_index(settings: Settings) -> None:
    eng = open_engine(settings, embedder=_FirstWindow())
    try:
        anyio.run(_load, eng)
        eng.parts.search.warm([G])
    finally:
        eng.close()  # saves the index (lcg.search.snapshot)
    eng = open_engine(settings, embedder=_FirstWindow())
    try:
        hits = episode_hits(eng, "zyxquartz", [G], 5, LEXICAL_ONLY)
        _, at = _long_text()
        assert [ep.uuid for ep, _ in hits] == ["ep-long"]
        window = hits[0][1].window
        assert window is not None and window[0] <= at < window[1]
    finally:
        eng.close()


async def test_of_two_equal_windows_the_episode_cut_into_fewer_ranks_first(
    windowed: Engine,
) -> None:
    # An episode ranks by its best window, and one of many windows has more chances at a high
    # score: the count's penalty (lcg.graph.hybrid.WINDOW_PENALTY) breaks the tie. "ep-z" holds
    # only the long episode's best window, word for word (the same BM25 score); on a tie the
    # uuid order would put "ep-long" first.
    text, _ = await _load(windowed)
    hits = await anyio.to_thread.run_sync(
        lambda: episode_hits(windowed, "zyxquartz", [G], 5, LEXICAL_ONLY)
    )
    ep, hit = hits[0]
    assert ep.uuid == "ep-long" and hit.window is not None
    start, end = hit.window
    await windowed.commit_episode(EpisodeCommit(G, Episode("ep-z", G, "note", text[start:end])))
    hits = await anyio.to_thread.run_sync(
        lambda: episode_hits(windowed, "zyxquartz", [G], 5, LEXICAL_ONLY)
    )
    assert [e.uuid for e, _ in hits][:2] == ["ep-z", "ep-long"]
