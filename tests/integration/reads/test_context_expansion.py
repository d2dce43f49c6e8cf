"""knowledge_get_context's expansion on the search index's columns and its lazy row reads give
the same block as expanding through the store and reading every reached row (the reference
below: the store-based expansion lcg used before), on random graphs where no bound
binds (fewer entities than MAX_FRONTIER, fewer facts than DEGREE_CAP and MAX_CANDIDATE_FACTS).
The packing is the module's in both, so its MISFITS bound is common to them."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import pytest

from lcg import Engine
from lcg.engine import EpisodeCommit, Invalidation
from lcg.graph import hybrid
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import dispatch
from lcg.storage.backend import GraphReader
from lcg.temporal import asof, context
from lcg.temporal.evidence import find_passages
from lcg.timefilter import CURRENT, TimeFilter
from lcg.timeutil import now

BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

G, H = "liminis", "other"
C1 = datetime(2026, 1, 10, tzinfo=UTC)
C2 = datetime(2026, 2, 10, tzinfo=UTC)
WORDS = ["alpha", "lunar", "orbit", "crew", "engine", "gamma", "émigré", "漢字", "module", "dock"]


def _words(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


async def _random_graph(engine: Engine, seed: int) -> None:
    """Two groups of random entities and facts (one entity a hub), some facts superseded,
    some withdrawn, some not valid yet at the earlier `as_of` instants."""
    rng = random.Random(seed)
    for group in (G, H):
        entities = [
            Entity(
                uuid=f"{group}-e{i:02d}",
                group_id=group,
                name=f"{_words(rng, 2)} {i}",
                summary=_words(rng, rng.randint(0, 30)),
                created_at=C1,
            )
            for i in range(rng.randint(12, 40))
        ]
        facts = []
        for j in range(rng.randint(20, 110)):
            source = entities[0] if rng.random() < 0.3 else rng.choice(entities)
            facts.append(
                Fact(
                    uuid=f"{group}-f{j:03d}",
                    group_id=group,
                    source_uuid=source.uuid,
                    target_uuid=rng.choice(entities).uuid,
                    name=rng.choice(["USES", "PART_OF", "LEADS"]),
                    fact=_words(rng, rng.randint(1, 40)),
                    episodes=(f"ep-{group}-1",),
                    valid_at=rng.choice(
                        [None, datetime(2020 + rng.randint(0, 5), 3, 1, tzinfo=UTC)]
                    ),
                    created_at=C1 + timedelta(minutes=rng.randint(0, 500)),
                )
            )
        episode = Episode(
            uuid=f"ep-{group}-1", group_id=group, name="one", content="x", created_at=C1
        )
        await engine.commit_episode(EpisodeCommit(group, episode, entities, facts))
        ended = [
            Invalidation(f.uuid, rng.choice([None, datetime(2025, 6, 1, tzinfo=UTC)]), C2)
            for f in facts
            if rng.random() < 0.25
        ]
        episode = Episode(
            uuid=f"ep-{group}-2", group_id=group, name="two", content="y", created_at=C2
        )
        await engine.commit_episode(EpisodeCommit(group, episode, invalidations=ended))


async def _reference(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    """The block from expanding through the store (`facts_around`) and reading every row; at a
    past `as_of`, with the rules of lcg.temporal.asof (seeds, summaries, facts known then)."""
    as_of = params.get("as_of")
    at = as_of or now()
    visible = CURRENT if as_of is None else TimeFilter(as_of=as_of)
    groups, seeds = params.get("group_ids"), params["num_seeds"]
    entity_hits = await hybrid.search_entities(
        engine, params["query"], group_ids=groups, limit=seeds
    )
    fact_hits = await hybrid.search_facts(
        engine, params["query"], group_ids=groups, limit=seeds, time=visible
    )
    index = engine.parts.search
    if as_of is not None:
        hits = [e for e, _ in entity_hits]
        kept = await engine.read(lambda conn: asof.seeds_as_of(index, conn, hits, as_of))
        entity_hits = [(e, 0.0) for e in kept]
    seed_nodes = [e.uuid for e, _ in entity_hits]
    seed_facts = [f for f, _ in fact_hits]
    hops = params["hops"]

    def shown(f: Fact) -> bool:
        return not (f.expired_at is not None and f.invalid_at is None)

    hidden: set[str] = set()  # facts a past-time read does not show (read as if gone)

    def read(conn: GraphReader) -> tuple[dict[str, Entity], list[str], list[Fact], dict[str, bool]]:
        distance: dict[str, int] = {}
        for uuid in seed_nodes:
            distance.setdefault(uuid, 0)
        for f in seed_facts:
            distance.setdefault(f.source_uuid, 0)
            distance.setdefault(f.target_uuid, 0)
        found = {f.uuid: f for f in seed_facts if shown(f)}
        frontier = list(distance)
        for hop in range(1, hops + 1):
            around = conn.facts_around(frontier, groups)
            assert len(frontier) <= context.MAX_FRONTIER and len(around) <= context.DEGREE_CAP
            nxt = []
            for f in around:
                if shown(f):
                    found.setdefault(f.uuid, f)
                    for end in (f.source_uuid, f.target_uuid):
                        if end not in distance:
                            distance[end] = hop
                            nxt.append(end)
            frontier = nxt
        if hops == 0:
            for f in conn.facts_around(list(distance), groups):
                if shown(f) and {f.source_uuid, f.target_uuid} <= set(distance):
                    found.setdefault(f.uuid, f)
        entities = conn.entities_by_uuids(distance)
        if as_of is not None:
            entities = asof.entities_as_of(index, conn, entities.values(), as_of)
            hidden.update(u for u, f in found.items() if not asof.known_by(index, conn, f, as_of))
        current = {u: visible.admits(f) for u, f in found.items()}
        seed_rank = {f.uuid: i for i, f in enumerate(seed_facts)}

        def key(f: Fact) -> tuple[int, int, int, float, str]:
            hop = min(distance[f.source_uuid], distance[f.target_uuid])
            start = (f.valid_at or f.created_at or at).timestamp()
            return (not current[f.uuid], seed_rank.get(f.uuid, len(seed_rank)), hop, -start, f.uuid)

        ranked = sorted(found.values(), key=key)
        assert len(ranked) <= context.MAX_CANDIDATE_FACTS
        degree: dict[str, int] = {}
        for f in ranked:
            for end in (f.source_uuid, f.target_uuid):
                degree[end] = degree.get(end, 0) + 1
        seed_order = {u: i for i, u in enumerate(distance) if distance[u] == 0}
        order = sorted(
            distance, key=lambda u: (distance[u], -degree.get(u, 0), seed_order.get(u, 0), u)
        )
        return entities, order, ranked, current

    entities, order, ranked, current = await engine.read(read)
    rows = {f.uuid: f for f in ranked}
    # The verbatim passages take their share of the budget first (lcg.temporal.evidence).
    passages = await anyio.to_thread.run_sync(
        find_passages, engine, params["query"], groups, seed_facts, as_of
    )
    first, graph_budget = context.split_budget(params["query"], passages, params["token_budget"])
    packed = context.pack(
        params["query"],
        entities,
        order,
        [context.Candidate(f.uuid, f.source_uuid, f.target_uuid) for f in ranked],
        current,
        graph_budget,
        at,
        lead=seed_nodes[: (len(seed_nodes) + 1) // 2],
        fact_of=lambda c: None if c.uuid in hidden else rows[c.uuid],
    )
    context.add_passages(packed, passages, first, params["token_budget"])
    return {
        "context": packed.text,
        "included_node_ids": packed.node_ids,
        "included_fact_ids": packed.fact_ids,
        "omitted_nodes": packed.omitted_nodes,
        "omitted_facts": packed.omitted_facts,
    }


@pytest.mark.parametrize("seed", range(4))
async def test_the_index_expansion_gives_the_store_expansions_block(
    engine: Engine, seed: int
) -> None:
    await _random_graph(engine, seed)
    rng = random.Random(1000 + seed)
    compared = 0
    for _ in range(14):
        params: dict[str, Any] = {
            "query": _words(rng, rng.randint(1, 3)),
            "hops": rng.choice([0, 1, 2, 3]),
            "token_budget": rng.choice([256, 700, 2000, 6000, 30000]),
            "num_seeds": rng.choice([1, 3, 8]),
            "group_ids": rng.choice([None, [G], [H], [G, H]]),
        }
        if rng.random() < 0.3:
            params["as_of"] = rng.choice(
                [datetime(2022, 1, 1, tzinfo=UTC), datetime(2025, 9, 1, tzinfo=UTC)]
            )
        wire = {**params, "as_of": params["as_of"].isoformat()} if "as_of" in params else params
        got = await dispatch(engine, "knowledge_get_context", wire)
        want = await _reference(engine, params)
        assert {k: got[k] for k in want} == want, params
        compared += bool(want["included_fact_ids"])
    assert compared >= 5  # most draws found facts, so blocks were really compared
