"""The two halves of hybrid search each carry their weight, over a real engine.

- The vector list is fused in: a misspelt query shares no term with any document, so BM25 finds
  nothing and only the cosine list (the hash embedder's character trigrams) can surface the hit.
  A hybrid search that dropped its vector list would return nothing. The vector floor (the
  hash embedder's 0.6, tests/integration/reads/test_search_floor.py) is lowered here to 0.05, so that
  a misspelling's trigram evidence counts and this test checks the fusion, not the calibration.
- The BM25 list is fused in: one rare word in a long text is a strong BM25 match and a weak
  vector one (a cosine near 0.2 with the hash embedder), so with the floor set back to the hash
  embedder's 0.6 only BM25 can surface the hit, and a hybrid search that passed only its vector
  list to the fusion would return nothing. The test goes through the wire methods with
  `search_strategy` named and the floor set explicitly, so it holds whatever the defaults.
- BM25 statistics (document count, document frequencies, average length) are summed over every
  searched group, so scores from different groups are comparable: splitting a collection into
  groups must not change its ranking. Statistics taken from one group only reverse the order
  below, where a word that is rare overall is common in the first (small) group. With the
  correct statistics, "rocket" alone carries under a third of the query's idf weight, so the
  lexical floor keeps only the "saturn" documents; with first-group statistics the two words
  swap rarity and the floor keeps the "rocket" documents instead.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from lcg import Engine, Episode, EpisodeCommit, Settings, open_engine
from lcg.graph.hybrid import search_entities, search_episodes, search_facts
from lcg.search.strategy import HYBRID_RRF, LEXICAL_ONLY
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio
SETTINGS_OVERRIDES = {"search_vector_floor": 0.05}

G = "crew"
PEOPLE = [
    ("Neil Armstrong", "Commander of Apollo 11 and the first person to walk on the Moon."),
    ("Buzz Aldrin", "Lunar module pilot of Apollo 11."),
    ("Michael Collins", "Command module pilot who stayed in lunar orbit."),
    ("Jim Lovell", "Commander of Apollo 13, which returned safely after an oxygen tank failed."),
]


async def call(engine: Engine, method: str, **params: Any) -> dict[str, Any]:
    return await dispatch(engine, method, params)


async def load_crew(engine: Engine) -> None:
    for name, summary in PEOPLE:
        await call(engine, "knowledge_assert_entity", name=name, summary=summary, group_id=G)
    await call(
        engine,
        "knowledge_assert_relationship",
        source_name="Neil Armstrong",
        predicate="COMMANDED",
        target_name="Buzz Aldrin",
        fact="Neil Armstrong commanded the crew that included Buzz Aldrin.",
        group_id=G,
    )
    episode = Episode("ep-crew", G, "notes", "Armstrong stepped onto the lunar surface first.")
    await engine.commit_episode(EpisodeCommit(G, episode))


async def test_only_the_vector_list_finds_a_misspelt_name(engine: Engine) -> None:
    await load_crew(engine)
    query = "Armstorng"  # no document holds this word: BM25 has nothing to offer
    for search in (search_entities, search_facts, search_episodes):
        assert await search(engine, query, group_ids=None, strategy=LEXICAL_ONLY) == []
    entities = await search_entities(engine, query, group_ids=None, strategy=HYBRID_RRF)
    assert [e.name for e, _ in entities][:1] == ["Neil Armstrong"]
    facts = await search_facts(engine, query, group_ids=None, strategy=HYBRID_RRF)
    assert facts and "Neil Armstrong" in facts[0][0].fact
    episodes = await search_episodes(engine, query, group_ids=None, strategy=HYBRID_RRF)
    assert [ep.uuid for ep, _ in episodes][:1] == ["ep-crew"]
    # The default strategy over the wire is the hybrid one: the same hit reaches a client.
    found = await call(engine, "knowledge_find_entities", query=query, num_results=3)
    assert found["nodes"] and found["nodes"][0]["name"] == "Neil Armstrong"


# One rare word ("heliogyro") in a long summary and a long fact sentence, among documents
# without it.
SAIL = (
    "A solar sail spacecraft studied at the laboratory in the nineteen seventies for a "
    "rendezvous with a comet, built as a heliogyro of twelve long thin blades unrolled from "
    "spools and spun slowly so that their own rotation kept them flat and taut in the sunlight"
)


async def test_only_the_bm25_list_finds_a_rare_word_in_a_long_text(
    settings: Settings,
) -> None:
    calibrated = dataclasses.replace(settings, search_vector_floor=0.6)
    engine = open_engine(calibrated)
    try:
        await load_crew(engine)
        await call(engine, "knowledge_assert_entity", name="Halley Sail", summary=SAIL, group_id=G)
        await call(
            engine,
            "knowledge_assert_relationship",
            source_name="Halley Sail",
            predicate="STUDIED_FOR",
            target_name="Jim Lovell",
            fact=f"{SAIL}, was briefed to Jim Lovell.",
            group_id=G,
        )
        query = "heliogyro"

        async def found(strategy: str) -> tuple[list[str], list[str]]:
            nodes = await call(
                engine, "knowledge_find_entities", query=query, search_strategy=strategy
            )
            facts = await call(
                engine, "knowledge_find_relationships", query=query, search_strategy=strategy
            )
            return [n["name"] for n in nodes["nodes"]], [f["name"] for f in facts["facts"]]

        assert await found("vector") == ([], [])  # the vector list has nothing to offer
        assert await found("lexical") == (["Halley Sail"], ["STUDIED_FOR"])
        for strategy in ("hybrid_rrf", "hybrid_mmr"):
            assert await found(strategy) == (["Halley Sail"], ["STUDIED_FOR"]), strategy
    finally:
        engine.close()


# A collection where "saturn" is rare overall (3 of 23 documents) and "rocket" is common (11),
# but in group "a-small" (first in group order) "saturn" is common (2 of 3) and "rocket" rare
# (1 of 3). Documents are all three words long, so lengths do not tip the balance.
SMALL = [
    ("Rocket Q", "rocket"),
    ("Saturn S1", "saturn"),
    ("Saturn S2", "saturn"),
]
LARGE = [
    ("Saturn P", "saturn"),
    *[(f"Rocket R{i}", "rocket") for i in range(10)],
    *[(f"Filler F{i}", "filler") for i in range(10)],
]


async def assert_docs(engine: Engine, docs: list[tuple[str, str]], group: str) -> None:
    for name, word in docs:
        await call(
            engine,
            "knowledge_assert_entity",
            name=name,
            summary=f"{word} {word} {word}",
            group_id=group,
        )


async def lexical_order(engine: Engine, groups: list[str] | None) -> list[str]:
    found = await search_entities(
        engine, "saturn rocket", group_ids=groups, limit=30, strategy=LEXICAL_ONLY
    )
    return [e.name for e, _ in found]


async def test_bm25_statistics_span_every_searched_group(engine: Engine) -> None:
    await assert_docs(engine, SMALL, "a-small")
    await assert_docs(engine, LARGE, "b-large")
    await assert_docs(engine, SMALL + LARGE, "c-merged")  # the same documents in one group
    word = dict(SMALL + LARGE)
    split = await lexical_order(engine, ["a-small", "b-large"])
    merged = await lexical_order(engine, ["c-merged"])
    # Documents of one word score alike (ties break by uuid, which differ between the copies):
    # compare the rankings by the word each document holds.
    assert [word[n] for n in split] == [word[n] for n in merged]
    # "saturn" is the rarer word overall: every saturn document matches, whichever group it
    # lives in, and no document holding only the common "rocket" does.
    assert sorted(split) == ["Saturn P", "Saturn S1", "Saturn S2"], split
    # Every group searched (None) adds the merged copies, and the same holds.
    every = await lexical_order(engine, None)
    assert [word[n] for n in every] == ["saturn"] * 6, every
