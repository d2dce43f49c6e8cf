"""The search methods over a real engine: relevance on a hand-made Apollo graph, and the index
kept in step with every write path (asserts, supersession, deletes, purges, clear_all, raw
Cypher, rebuild, reopen), group filters per docs/api.md §parameters, and refused parameters."""

from __future__ import annotations

import importlib.util
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest
from apollo_search_fixture import ENTITIES, ENTITY_QUERIES, FACT_QUERIES, FACTS
from rebuild_jobs import rebuild_and_wait

from lcg import Engine, Episode, EpisodeCommit, Fact, Invalidation, Settings, open_engine
from lcg.errors import InvalidRequestError, NotFoundError
from lcg.graph.hybrid import search_entities, search_episodes, search_facts
from lcg.search.strategy import HYBRID_MMR, LEXICAL_ONLY, VECTOR_ONLY
from lcg.service.registry import dispatch
from lcg.timefilter import TimeFilter

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


async def call(engine: Engine, method: str, **params: Any) -> dict[str, Any]:
    return await dispatch(engine, method, params)


async def load_apollo(engine: Engine, group: str = "liminis") -> None:
    for name, labels, summary in ENTITIES:
        await call(
            engine,
            "knowledge_assert_entity",
            name=name,
            labels=labels,
            summary=summary,
            group_id=group,
        )
    for source, predicate, target, fact in FACTS:
        await call(
            engine,
            "knowledge_assert_relationship",
            source_name=source,
            predicate=predicate,
            target_name=target,
            fact=fact,
            group_id=group,
        )


async def names(engine: Engine, query: str, **params: Any) -> list[str]:
    found = await call(engine, "knowledge_find_entities", query=query, **params)
    assert found["count"] == len(found["nodes"])
    return [n["name"] for n in found["nodes"]]


async def facts(engine: Engine, query: str, **params: Any) -> list[str]:
    found = await call(engine, "knowledge_find_relationships", query=query, **params)
    assert found["count"] == len(found["facts"])
    return [f["fact"] for f in found["facts"]]


def fact_text(key: tuple[str, str, str]) -> str:
    return next(f for s, p, t, f in FACTS if (s, p, t) == key)


@pytest.fixture
async def apollo(engine: Engine) -> Engine:
    await load_apollo(engine)
    return engine


async def test_apollo_relevance_with_the_hash_embedder(apollo: Engine) -> None:
    status = await call(apollo, "knowledge_status")
    assert status["embedding_lexical_only"] is True
    for query, expected in ENTITY_QUERIES:
        top = await names(apollo, query, num_results=3)
        assert expected in top, (query, top)
    for query, key in FACT_QUERIES:
        top = await facts(apollo, query, num_results=3)
        assert fact_text(key) in top, (query, top)


@pytest.mark.skipif(
    not any(importlib.util.find_spec(m) for m in ("fastembed", "sentence_transformers")),
    reason="no local embedding model package (fastembed / sentence-transformers) is installed",
)
async def test_apollo_relevance_with_a_real_model(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        if engine.parts.embedder.identity.lexical_only:
            pytest.skip("an embedding package is installed but no model could be loaded offline")
        await load_apollo(engine)
        for query, expected in ENTITY_QUERIES:
            assert expected in await names(engine, query, num_results=3), query
        for query, key in FACT_QUERIES:
            assert fact_text(key) in await facts(engine, query, num_results=3), query
    finally:
        engine.close()


async def test_result_shapes_and_rank_order(apollo: Engine) -> None:
    found = await call(apollo, "knowledge_find_entities", query="Apollo 13", num_results=2)
    assert found["count"] == 2
    node = found["nodes"][0]
    assert node["name"] == "Apollo 13"
    assert set(node) == {
        "uuid", "name", "group_id", "labels", "created_at", "summary", "attributes",
        "episode_uuids", "source_descriptions",
    }  # fmt: skip
    assert node["episode_uuids"] == [] and node["source_descriptions"] == []
    rel = await call(apollo, "knowledge_find_relationships", query="Jim Lovell commanded")
    edge = rel["facts"][0]
    assert edge["fact"] == "Jim Lovell commanded Apollo 13."
    assert edge["created_at"] == "" and edge["name"] == "COMMANDED"
    assert (await call(apollo, "knowledge_find_entities", query="Apollo", num_results=0)) == {
        "nodes": [],
        "count": 0,
    }


async def test_writes_are_visible_to_the_next_search(apollo: Engine) -> None:
    assert "Zorbulon Quux" not in await names(apollo, "zorbulon")
    created = await call(apollo, "knowledge_assert_entity", name="Zorbulon Quux", summary="x")
    assert (await names(apollo, "zorbulon"))[0] == "Zorbulon Quux"
    await call(
        apollo,
        "knowledge_assert_entity",
        name="Frobnitz Quux",
        entity_uuid=created["entity_uuid"],
        summary="renamed",
    )
    assert "Zorbulon Quux" not in await names(apollo, "zorbulon", search_strategy="lexical")
    assert (await names(apollo, "frobnitz"))[0] == "Frobnitz Quux"
    await call(
        apollo,
        "knowledge_assert_relationship",
        source_name="Frobnitz Quux",
        predicate="ORBITS",
        target_name="Saturn V",
        fact="Frobnitz Quux orbits the xylophonic rocket",
    )
    assert (await facts(apollo, "xylophonic"))[0] == "Frobnitz Quux orbits the xylophonic rocket"


async def test_superseded_facts_follow_the_time_filter(apollo: Engine) -> None:
    lovell = await apollo.entity_by_name("liminis", "Jim Lovell")
    found = await search_facts(apollo, "Jim Lovell commanded Apollo 13", group_ids=None, limit=1)
    old = found[0][0]
    assert old.name == "COMMANDED" and old.source_uuid == lovell.uuid  # type: ignore[union-attr]
    ended = datetime(1970, 4, 17, tzinfo=UTC)
    episode = Episode("ep-1", "liminis", "note", "Lovell retired from command.", created_at=ended)
    await apollo.commit_episode(
        EpisodeCommit(
            "liminis",
            episode,
            invalidations=[Invalidation(old.uuid, ended, datetime.now(UTC))],
        )
    )
    text = "Jim Lovell commanded Apollo 13."
    assert text not in await facts(apollo, "Lovell commanded")
    assert text in await facts(apollo, "Lovell commanded", include_invalidated=True)
    before = (ended - timedelta(days=1)).isoformat()
    assert text in await facts(apollo, "Lovell commanded", as_of=before)
    assert text not in await facts(apollo, "Lovell commanded", as_of=ended.isoformat())
    hits = await search_facts(
        apollo, "Lovell commanded", group_ids=None, time=TimeFilter(include_invalidated=True)
    )
    assert all(isinstance(f, Fact) and s > 0 for f, s in hits)


async def test_deletes_purges_and_clear_all_disappear(engine: Engine) -> None:
    for i, group in enumerate(("g1", "g2")):
        await load_apollo(engine, group)
        ep = Episode(
            f"ep-{group}",
            group,
            "chunk",
            f"The quokkaship {group} splashed down in the Pacific Ocean.",
            created_at=datetime(2020, 1, 1 + i, tzinfo=UTC),
        )
        await engine.commit_episode(EpisodeCommit(group, ep))
    passages = await call(engine, "knowledge_search_passages", query="quokkaship splashed down")
    assert {p["uuid"] for p in passages["passages"]} == {"ep-g1", "ep-g2"}
    assert all(0.5 <= p["score"] <= 1.0 for p in passages["passages"])
    await call(engine, "knowledge_delete_episode", episode_uuid="ep-g1")
    passages = await call(engine, "knowledge_search_passages", query="quokkaship splashed down")
    assert [p["uuid"] for p in passages["passages"]] == ["ep-g2"]

    await call(engine, "knowledge_delete_by_group", group_ids=["g2"], confirm=True)
    found = await call(engine, "knowledge_find_entities", query="Apollo 13")
    assert {n["group_id"] for n in found["nodes"]} == {"g1"}
    assert (await call(engine, "knowledge_search_passages", query="quokkaship"))["count"] == 0

    await call(engine, "knowledge_clear_all", confirm=True)
    assert (await call(engine, "knowledge_find_entities", query="Apollo 13"))["count"] == 0
    assert (await call(engine, "knowledge_find_relationships", query="commanded"))["count"] == 0
    await load_apollo(engine, "g3")
    assert (await names(engine, "Apollo 13"))[0] == "Apollo 13"


@pytest.mark.kuzu_only(
    "raw Cypher mutations are logged as Kuzu statements (cypher.exec) and refused on FalkorDB"
)
async def test_raw_cypher_mutations_are_searched(apollo: Engine) -> None:
    await call(
        apollo,
        "knowledge_query_cypher",
        query="MATCH (e:Entity) WHERE e.name = 'Eagle' SET e.summary = 'the wombatian lander'",
    )
    assert (await names(apollo, "wombatian"))[0] == "Eagle"


QUERIES = [q for q, _ in ENTITY_QUERIES]


async def snapshot(engine: Engine) -> list[list[str]]:
    out = [await names(engine, q, num_results=5) for q in QUERIES]
    out += [await facts(engine, q, num_results=5) for q, _ in FACT_QUERIES]
    return out


async def test_same_results_after_rebuild_and_reopen(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        await load_apollo(engine)
        before = await snapshot(engine)
        result = await rebuild_and_wait(engine, {"group_id": "liminis", "force_clear": True})
        assert result["success"] is True
        assert await snapshot(engine) == before
    finally:
        engine.close()
    engine = open_engine(settings)
    try:
        assert await snapshot(engine) == before
    finally:
        engine.close()


@pytest.fixture
async def two_groups(engine: Engine) -> Engine:
    for group in ("g1", "g2"):
        await call(engine, "knowledge_assert_entity", name="Apollo 13", group_id=group)
        ep = Episode(f"ep-{group}", group, "c", "Apollo 13 splashed down safely.")
        await engine.commit_episode(EpisodeCommit(group, ep))
    return engine


@pytest.mark.parametrize(
    ("group_ids", "entity_groups", "passage_groups"),
    [
        (None, {"g1", "g2"}, {"g1", "g2"}),
        ([], set(), {"g1", "g2"}),  # variant A: no results; variant B: every group
        (["g1"], {"g1"}, {"g1"}),
        ("g2", {"g2"}, {"g2"}),
        (["nope"], set(), set()),
    ],
)
async def test_group_filters(
    two_groups: Engine, group_ids: Any, entity_groups: set[str], passage_groups: set[str]
) -> None:
    extra = {} if group_ids is None else {"group_ids": group_ids}
    found = await call(two_groups, "knowledge_find_entities", query="Apollo 13", **extra)
    assert {n["group_id"] for n in found["nodes"]} == entity_groups
    assert found["count"] == len(entity_groups)
    rel = await call(two_groups, "knowledge_find_relationships", query="Apollo", **extra)
    assert rel == {"facts": [], "count": 0}
    passages = await call(
        two_groups, "knowledge_search_passages", query="Apollo 13 splashed", min_score=0, **extra
    )
    assert {p["group_id"] for p in passages["passages"]} == passage_groups


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("knowledge_find_entities", {"query": "x", "num_results": "5"}, "num_results"),
        ("knowledge_find_entities", {"query": "x", "num_results": -1}, "num_results"),
        ("knowledge_find_entities", {"query": 5}, "query"),
        ("knowledge_find_entities", {"query": "x", "group_ids": [1]}, "group_ids"),
        ("knowledge_find_entities", {"query": "x", "search_strategy": "best"}, "search_strategy"),
        ("knowledge_find_entities", {"query": "x", "labels": "Person"}, "labels"),
        ("knowledge_find_relationships", {"query": "x", "as_of": "yesterday"}, "as_of"),
        ("knowledge_find_relationships", {"query": "x", "include_invalidated": "true"}, "include_invalidated"),
        ("knowledge_search_passages", {}, "query"),
        ("knowledge_search_passages", {"query": "  "}, "query"),
        ("knowledge_search_passages", {"query": "x", "min_score": "0.2"}, "min_score"),
    ],
)  # fmt: skip
async def test_bad_params_are_refused(
    apollo: Engine, method: str, params: dict[str, Any], field: str
) -> None:
    before = await call(apollo, "knowledge_status")
    with pytest.raises(InvalidRequestError) as err:
        await dispatch(apollo, method, params)
    assert err.value.field == field
    if method == "knowledge_search_passages" and field == "query":
        assert err.value.message == "query is required and must be non-empty"
    after = await call(apollo, "knowledge_status")
    assert after["entity_count"] == before["entity_count"]
    assert after["wal"]["max_seq"] == before["wal"]["max_seq"]


async def test_passages_clamp_and_min_score(two_groups: Engine) -> None:
    one = await call(
        two_groups, "knowledge_search_passages", query="Apollo", num_results=0, min_score=-3
    )
    assert one["count"] == 1  # 0 -> 1, min_score -> 0.0
    none = await call(two_groups, "knowledge_search_passages", query="Apollo 13", min_score=7)
    assert none["count"] == 0  # clamped to 1.0: only an identical text could reach it


async def test_labels_center_node_and_strategies(apollo: Engine) -> None:
    craft = await call(
        apollo, "knowledge_find_entities", query="Apollo lunar module", labels=["Spacecraft"]
    )
    assert craft["count"] > 0 and all("Spacecraft" in n["labels"] for n in craft["nodes"])
    lovell = await apollo.entity_by_name("liminis", "Jim Lovell")
    assert lovell is not None
    near = await search_entities(
        apollo, "Apollo mission", group_ids=None, limit=3, center_node_uuid=lovell.uuid
    )
    # Lovell himself (0 hops, his summary names Apollo 13), then his mission (1 hop); the
    # other missions are farther away.
    assert [e.name for e, _ in near[:2]] == ["Jim Lovell", "Apollo 13"]
    assert [s for _, s in near] == sorted((s for _, s in near), reverse=True)
    rel = await call(
        apollo, "knowledge_find_relationships", query="crew", center_node_uuid=lovell.uuid,
        relation_types=None, predicates=["CREW_OF"],
    )  # fmt: skip
    assert rel["count"] > 0 and all(f["name"] == "CREW_OF" for f in rel["facts"])
    assert "Apollo 13" in rel["facts"][0]["fact"]
    for strategy in (HYBRID_MMR, LEXICAL_ONLY, VECTOR_ONLY):
        top = await search_entities(apollo, "Saturn V", group_ids=["liminis"], strategy=strategy)
        assert top[0][0].name == "Saturn V", strategy
    with pytest.raises(NotFoundError):
        await search_entities(apollo, "x", group_ids=None, center_node_uuid="missing")
    episodes = await search_episodes(apollo, "anything", group_ids=None)
    assert episodes == []


async def test_searches_run_concurrently_with_writes(engine: Engine) -> None:
    """Readers in worker threads while a writer commits; each write is seen by the writer's
    next search, and no reader fails or sees a torn index."""
    done = anyio.Event()
    seen: list[int] = []

    async def reader() -> None:
        while not done.is_set():
            found = await call(engine, "knowledge_find_entities", query="quasar", num_results=50)
            assert all(n["name"].startswith("Quasar") for n in found["nodes"][:1])
            seen.append(found["count"])

    async def writer() -> None:
        for i in range(40):
            await call(engine, "knowledge_assert_entity", name=f"Quasar {i}", summary="a quasar")
            assert f"Quasar {i}" in await names(engine, f"Quasar {i}", num_results=3)
            if i % 10 == 9:  # a group-wide reload racing the readers
                engine.parts.search.invalidate(["liminis"])
        done.set()

    async with anyio.create_task_group() as tg:
        for _ in range(3):
            tg.start_soon(reader)
        tg.start_soon(writer)
    assert seen and max(seen) <= 40
    assert len(await names(engine, "quasar", num_results=100)) == 40


async def test_strategies_over_the_wire(apollo: Engine) -> None:
    ep = Episode("ep-x", "liminis", "c", "The Saturn V rocket launched Apollo 11 from Florida.")
    await apollo.commit_episode(EpisodeCommit("liminis", ep))
    for strategy in ("hybrid_rrf", "hybrid_mmr", "lexical", "vector"):
        top = await names(apollo, "Saturn V rocket", search_strategy=strategy, num_results=3)
        assert top[0] == "Saturn V", (strategy, top)
        found = await call(
            apollo,
            "knowledge_search_passages",
            query="Saturn V rocket launched",
            search_strategy=strategy,
            min_score=0.0,
        )
        assert found["passages"][0]["uuid"] == "ep-x", strategy
    # (A query many entities match on their own evidence: the search floor pads no result.)
    diverse = await names(apollo, "the Moon", search_strategy="hybrid_mmr", num_results=5)
    assert len(diverse) == len(set(diverse)) == 5


async def test_rows_of_hits_match_the_rows_by_uuid(two_groups: Engine) -> None:
    """`GraphReader.*_of_hits` (the hydration read of search) returns what `*_by_uuids` does,
    over more keys than one statement takes (Kuzu: 16), with missing keys absent, and only
    rows of the named groups on a store that keeps one graph per group."""
    for i in range(20):
        await call(two_groups, "knowledge_assert_entity", name=f"Probe {i}", group_id="g1")
    await call(
        two_groups,
        "knowledge_assert_relationship",
        source_name="Probe 1",
        predicate="NEAR",
        target_name="Probe 2",
        fact="Probe 1 is near Probe 2",
        group_id="g1",
    )

    def read(conn: Any) -> None:
        ents = [e.uuid for e in conn.entities_in_groups(["g1", "g2"])]
        assert len(ents) == 22
        wanted = [*ents, "no-such-uuid"]
        assert conn.entities_of_hits(["g1", "g2"], wanted) == conn.entities_by_uuids(wanted)
        assert len(conn.entities_of_hits(["g1", "g2"], wanted)) == 22
        fact = conn.facts_with_hops(["g1"])[0].uuid
        assert conn.facts_of_hits(["g1"], [fact, "x"]) == conn.facts_by_uuids([fact])
        assert list(conn.facts_of_hits(["g1"], [fact])) == [fact]
        eps = ["ep-g1", "ep-g2", "x"]
        assert conn.episodes_of_hits(["g1", "g2"], eps) == conn.episodes_by_uuids(eps)
        assert set(conn.episodes_of_hits(["g1", "g2"], eps)) == {"ep-g1", "ep-g2"}
        assert conn.entities_of_hits([], []) == {}

    with two_groups.reader() as conn:
        read(conn)


async def test_results_carry_rows_as_last_written(apollo: Engine) -> None:
    """Search results are hydrated from a row cache (lcg.search.rows): every write to a row
    found before (summary, labels, invalidation) shows in the next search's result."""
    first = await call(apollo, "knowledge_find_entities", query="Saturn V")
    node = first["nodes"][0]
    assert node["name"] == "Saturn V"
    again = await call(apollo, "knowledge_find_entities", query="Saturn V")
    assert again["nodes"][0] == node
    await call(
        apollo,
        "knowledge_assert_entity",
        name="Saturn V",
        entity_uuid=node["uuid"],
        labels=["Rocket"],
        summary="A retired super heavy-lift launch vehicle.",
    )
    after = await call(apollo, "knowledge_find_entities", query="Saturn V")
    assert after["nodes"][0]["uuid"] == node["uuid"]
    assert after["nodes"][0]["summary"] == "A retired super heavy-lift launch vehicle."
    assert "Rocket" in after["nodes"][0]["labels"]

    found = await call(apollo, "knowledge_find_relationships", query="Saturn V", num_results=1)
    fact = found["facts"][0]
    assert fact["invalid_at"] is None
    when = datetime(2024, 1, 1, tzinfo=UTC)
    ep = Episode("ep-ended", fact["group_id"], "note", "It ended.", created_at=when)
    await apollo.commit_episode(
        EpisodeCommit(fact["group_id"], ep, invalidations=[Invalidation(fact["uuid"], when, when)])
    )
    everything = await call(
        apollo,
        "knowledge_find_relationships",
        query="Saturn V",
        num_results=50,
        include_invalidated=True,
    )
    ended = next(f for f in everything["facts"] if f["uuid"] == fact["uuid"])
    assert ended["invalid_at"] is not None


async def test_rows_read_with_their_group_show_every_later_write(apollo: Engine) -> None:
    """A search may cache every row of its hits' groups (lcg.search.rows); a later write to a
    row that was never a hit (summary, labels, a fact's invalidation, a merge, an episode's
    deletion) shows in the next search that finds it."""
    group = "liminis"
    ep = Episode(
        "ep-q", group, "chunk", "The quokkaship splashed down.", created_at=datetime.now(UTC)
    )
    await apollo.commit_episode(EpisodeCommit(group, ep))
    # Searches that find other rows first: on Kuzu their groups' rows are now in memory.
    await call(apollo, "knowledge_find_entities", query="Apollo 13")
    await call(apollo, "knowledge_find_relationships", query="commanded")
    await call(apollo, "knowledge_search_passages", query="quokkaship", min_score=0)
    cached = apollo.parts.search.rows
    if cached is not None:  # Kuzu; FalkorDB reads every row from the server
        assert len(cached["entity"]) == len(ENTITIES)
        assert len(cached["fact"]) == len(FACTS)

    target = (await call(apollo, "knowledge_find_entities", query="Eagle"))["nodes"][0]
    await call(
        apollo,
        "knowledge_assert_entity",
        name="Eagle",
        entity_uuid=target["uuid"],
        group_id=group,
        labels=["Lander"],
        summary="the wombatian lunar module",
    )
    node = (await call(apollo, "knowledge_find_entities", query="wombatian"))["nodes"][0]
    assert node["uuid"] == target["uuid"]
    assert node["summary"] == "the wombatian lunar module"
    assert "Lander" in node["labels"]

    fact = (await call(apollo, "knowledge_find_relationships", query="Saturn V"))["facts"][0]
    when = datetime(2024, 1, 1, tzinfo=UTC)
    ended = Episode("ep-ended", group, "note", "It ended.", created_at=when)
    await apollo.commit_episode(
        EpisodeCommit(group, ended, invalidations=[Invalidation(fact["uuid"], when, when)])
    )
    after = await call(
        apollo,
        "knowledge_find_relationships",
        query=fact["fact"],
        num_results=50,
        include_invalidated=True,
    )
    assert next(f for f in after["facts"] if f["uuid"] == fact["uuid"])["invalid_at"] is not None

    other = await call(
        apollo, "knowledge_assert_entity", name="Eagle Lander", summary="alias", group_id=group
    )
    found = await call(
        apollo, "knowledge_find_entities", query="Eagle Lander alias", num_results=20
    )
    alias = next(n for n in found["nodes"] if n["uuid"] == other["entity_uuid"])
    assert "Merged" not in alias["labels"]
    merged = await call(
        apollo,
        "knowledge_merge_entities",
        canonical_uuid=target["uuid"],
        alias_uuids=[other["entity_uuid"]],
        group_id=group,
    )
    assert merged["success"] is True, str(merged)
    found = await call(
        apollo, "knowledge_find_entities", query="Eagle Lander alias", num_results=20
    )
    alias = next(n for n in found["nodes"] if n["uuid"] == other["entity_uuid"])
    assert "Merged" in alias["labels"]  # the tombstone, not the row read before the merge

    await call(apollo, "knowledge_delete_episode", episode_uuid="ep-q")
    gone = await call(apollo, "knowledge_search_passages", query="quokkaship", min_score=0)
    assert "ep-q" not in {p["uuid"] for p in gone["passages"]}
