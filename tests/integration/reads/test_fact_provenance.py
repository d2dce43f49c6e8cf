"""Every fact a read method returns names the episodes it came from (docs/temporal.md §1,
lcg.temporal.provenance): their uuids, source descriptions and reference times, one test per
method, on a history written through `knowledge_add_facts` (no model)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from lcg import Engine
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

G = "liminis"


@dataclass
class History:
    """Episode uuid -> (source description, valid_at in the DB read format)."""

    episodes: dict[str, tuple[str, str]]
    ana: str


async def call(engine: Engine, method: str, **params: Any) -> dict[str, Any]:
    return await dispatch(engine, method, params)


def _fact(source: str, relation: str, target: str, text: str) -> dict[str, str]:
    return {"source": source, "relation_type": relation, "target": target, "fact": text}


@pytest.fixture
async def history(engine: Engine) -> History:
    """Three episodes: Ana lives in Lisbon (2021), then in Porto and works at Acme (2023);
    a third (2024) repeats that she works at Acme, so that fact names two episodes."""
    episodes: dict[str, tuple[str, str]] = {}
    steps = [
        ("2021-03-01", "diary 2021", [_fact("Ana", "LIVES_IN", "Lisbon", "Ana lives in Lisbon.")]),
        (
            "2023-05-01",
            "diary 2023",
            [
                _fact("Ana", "LIVES_IN", "Porto", "Ana lives in Porto."),
                _fact("Ana", "WORKS_AT", "Acme", "Ana works at Acme."),
            ],
        ),
        ("2024-02-01", "diary 2024", [_fact("Ana", "WORKS_AT", "Acme", "Ana works at Acme.")]),
    ]
    for day, source, facts in steps:
        names = {n for f in facts for n in (f["source"], f["target"])}
        out = await call(
            engine,
            "knowledge_add_facts",
            reference_time=day,
            name=source,
            body=" ".join(f["fact"] for f in facts),
            source_description=source,
            entities=[{"name": n} for n in sorted(names)],
            facts=facts,
        )
        episodes[out["episode_uuid"]] = (source, f"{day} 00:00:00")
    ana = await engine.entity_by_name(G, "Ana")
    assert ana is not None
    return History(episodes, ana.uuid)


def check_cited(history: History, facts: list[dict[str, Any]], *, endpoints: bool = False) -> None:
    """Each fact names at least one episode; every one it names in `provenance` is a real
    episode with its source and date, and appears, aligned, in `episode_uuids` /
    `source_descriptions` (which hold exactly those unless `endpoints`: the either-endpoint
    episodes the reference puts there)."""
    assert facts
    for fact in facts:
        cited = fact["provenance"]
        assert cited, f"{fact['fact']!r} names no episode"
        for c in cited:
            assert (c["source_description"], c["valid_at"]) == history.episodes[c["uuid"]]
        aligned = dict(zip(fact["episode_uuids"], fact["source_descriptions"], strict=True))
        assert all(aligned[c["uuid"]] == c["source_description"] for c in cited)
        if not endpoints:
            assert fact["episode_uuids"] == [c["uuid"] for c in cited]


async def test_a_fact_repeated_by_a_later_episode_names_both(
    engine: Engine, history: History
) -> None:
    found = await call(engine, "knowledge_find_relationships", query="Ana works at Acme")
    acme = next(f for f in found["facts"] if f["fact"] == "Ana works at Acme.")
    assert [c["source_description"] for c in acme["provenance"]] == ["diary 2023", "diary 2024"]
    assert acme["source_descriptions"] == ["diary 2023", "diary 2024"]


async def test_find_relationships_cites_episodes(engine: Engine, history: History) -> None:
    found = await call(
        engine, "knowledge_find_relationships", query="Ana lives", include_invalidated=True
    )
    check_cited(history, found["facts"])


async def test_get_edges_by_group_cites_episodes(engine: Engine, history: History) -> None:
    check_cited(history, (await call(engine, "knowledge_get_edges_by_group"))["edges"])
    past = await call(engine, "knowledge_get_edges_by_group", as_of="2022-01-01")
    assert [e["fact"] for e in past["edges"]] == ["Ana lives in Lisbon."]
    check_cited(history, past["edges"])


async def test_get_edges_by_uuids_cites_episodes(engine: Engine, history: History) -> None:
    uuids = [e["uuid"] for e in (await call(engine, "knowledge_get_edges_by_group"))["edges"]]
    found = await call(engine, "knowledge_get_edges_by_uuids", uuids=uuids)
    assert found["count"] == 3
    check_cited(history, found["edges"])


async def test_list_relationships_cites_episodes(engine: Engine, history: History) -> None:
    check_cited(
        history, (await call(engine, "knowledge_list_relationships"))["facts"], endpoints=True
    )
    past = await call(engine, "knowledge_list_relationships", as_of="2022-01-01")
    check_cited(history, past["facts"], endpoints=True)


async def test_get_entity_neighbors_cites_episodes(engine: Engine, history: History) -> None:
    found = await call(engine, "knowledge_get_entity_neighbors", entity_uuid=history.ana)
    assert found["edge_count"] == 3
    check_cited(history, found["edges"], endpoints=True)


async def test_get_changes_cites_episodes(engine: Engine, history: History) -> None:
    found = await call(engine, "knowledge_get_changes", since="2020-01-01")
    assert {c["kind"] for c in found["changes"]} >= {"started", "ended"}
    check_cited(history, [c["fact"] for c in found["changes"]])
    one = await call(engine, "knowledge_get_changes", since="2020-01-01", entity_uuid=history.ana)
    check_cited(history, [c["fact"] for c in one["changes"]])


async def test_get_entity_timeline_cites_episodes(engine: Engine, history: History) -> None:
    found = await call(engine, "knowledge_get_entity_timeline", entity_uuid=history.ana)
    assert found["count"] == 3
    check_cited(history, found["facts"])


async def test_a_deleted_episode_is_still_named(engine: Engine, history: History) -> None:
    """Deleting an episode keeps its facts: they still name it, without source or date."""
    first = next(u for u, (src, _) in history.episodes.items() if src == "diary 2021")
    await call(engine, "knowledge_delete_episode", episode_uuid=first)
    found = await call(engine, "knowledge_get_edges_by_group")
    lisbon = next(e for e in found["edges"] if e["fact"] == "Ana lives in Lisbon.")
    assert lisbon["provenance"] == [{"uuid": first, "source_description": "", "valid_at": None}]
    assert lisbon["episode_uuids"] == [first] and lisbon["source_descriptions"] == [""]


async def test_an_episode_added_after_the_rows_in_memory_were_built_is_cited(
    engine: Engine, history: History
) -> None:
    """The temporal lists cite from the rows held in memory (lcg.search.factrows); an episode
    committed after they were built is read from the store, with its source and date."""
    await call(engine, "knowledge_list_relationships", as_of="2022-01-01")  # builds the rows
    out = await call(
        engine,
        "knowledge_add_facts",
        reference_time="2025-01-01",
        name="diary 2025",
        source_description="diary 2025",
        facts=[_fact("Ana", "WORKS_AT", "Acme", "Ana works at Acme.")],
    )
    history.episodes[out["episode_uuid"]] = ("diary 2025", "2025-01-01 00:00:00")
    found = await call(engine, "knowledge_list_relationships", include_invalidated=True)
    check_cited(history, found["facts"], endpoints=True)
    acme = next(f for f in found["facts"] if f["fact"] == "Ana works at Acme.")
    assert [c["source_description"] for c in acme["provenance"]] == [
        "diary 2023",
        "diary 2024",
        "diary 2025",
    ]
