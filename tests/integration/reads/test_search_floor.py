"""The evidence floor of hybrid search (lcg.search.floor): a candidate is ranked only on its own
evidence — a BM25 match, or a vector similarity above the embedder's calibrated floor — so a
query that matches nothing returns nothing instead of ten unrelated items."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from test_search import load_apollo

from lcg import Engine, Settings, open_engine
from lcg.embedding.base import EmbedderIdentity
from lcg.search.floor import DEFAULT_FLOOR, LEXICAL_FLOOR, MODEL_FLOORS, vector_floor
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

STRATEGIES = ("hybrid_rrf", "hybrid_mmr", "lexical", "vector")
NO_ANSWER = ("chocolate cake recipe", "Premier League football results", "photosynthesis")


async def call(engine: Engine, method: str, **params: Any) -> dict[str, Any]:
    return await dispatch(engine, method, params)


@pytest.fixture
async def apollo(engine: Engine) -> Engine:
    await load_apollo(engine)
    return engine


async def test_queries_without_an_answer_return_nothing(apollo: Engine) -> None:
    for query in NO_ANSWER:
        for strategy in STRATEGIES:
            found = await call(
                apollo, "knowledge_find_entities", query=query, search_strategy=strategy
            )
            assert found["nodes"] == [], (query, strategy, [n["name"] for n in found["nodes"]])
            found = await call(
                apollo, "knowledge_find_relationships", query=query, search_strategy=strategy
            )
            assert found["facts"] == [], (query, strategy, [f["fact"] for f in found["facts"]])


async def test_only_items_with_their_own_evidence_are_returned(apollo: Engine) -> None:
    found = await call(apollo, "knowledge_find_entities", query="Neil Armstrong", num_results=10)
    names = [n["name"] for n in found["nodes"]]
    assert names[0] == "Neil Armstrong"
    # Every other hit shares a word with the query (BM25 evidence): no padding.
    for node in found["nodes"]:
        text = f"{node['name']} {node['summary']}".lower()
        assert "neil" in text or "armstrong" in text, names


async def test_a_misspelt_name_still_matches_by_vector(apollo: Engine) -> None:
    # Vector evidence alone: the hash embedder's trigram similarity of a near-spelling clears
    # the lexical floor, and nothing else does.
    found = await call(
        apollo, "knowledge_find_entities", query="Niel Armstrong", search_strategy="vector"
    )
    assert [n["name"] for n in found["nodes"]] == ["Neil Armstrong"]


async def test_status_reports_the_floor_and_the_setting_overrides_it(
    apollo: Engine, settings: Settings
) -> None:
    status = await call(apollo, "knowledge_status")
    assert status["search_vector_floor"] == LEXICAL_FLOOR
    apollo.close()
    # Floor 0: any positive similarity counts again, and the unrelated query is padded.
    engine = open_engine(dataclasses.replace(settings, search_vector_floor=0.0))
    try:
        assert (await call(engine, "knowledge_status"))["search_vector_floor"] == 0.0
        found = await call(engine, "knowledge_find_entities", query="chocolate cake recipe")
        assert found["count"] > 0
    finally:
        engine.close()


def test_the_floor_is_chosen_by_the_embedder() -> None:
    assert vector_floor(EmbedderIdentity("hash-ngram-v2-384", 384, lexical_only=True)) == (
        LEXICAL_FLOOR
    )
    for model, floor in MODEL_FLOORS.items():
        assert vector_floor(EmbedderIdentity(model, 384)) == floor
    assert vector_floor(EmbedderIdentity("some/other-model", 768)) == DEFAULT_FLOOR
    # MiniLM (float32 and int8, bench/relevance.py --floors): above most unrelated pairs.
    for model in ("all-MiniLM-L6-v2", "all-MiniLM-L6-v2-int8"):
        assert vector_floor(EmbedderIdentity(model, 384)) == 0.45
    assert vector_floor(EmbedderIdentity("some/other-model", 768), 0.42) == 0.42
    # A lexical embedder's unrelated texts still share trigrams: its floor is far higher.
    assert max(DEFAULT_FLOOR, *MODEL_FLOORS.values()) < LEXICAL_FLOOR
