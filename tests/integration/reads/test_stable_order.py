"""The same graph prints the same order: facts sharing an instant are ordered by their text, not
by their (randomly minted) uuids, in the timeline and the change list (docs/temporal.md §2-3).

Two groups hold the same history, with uuids chosen so that their order is reversed between
the groups: an order that falls back on the uuid differs between them.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lcg import Engine
from lcg.engine import EpisodeCommit
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import dispatch

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

DAY = datetime(2025, 3, 1, tzinfo=UTC)
LEARNED = datetime(2025, 3, 2, tzinfo=UTC)
USES = ("Kafka", "Postgres", "Redis")


async def _history(engine: Engine, group: str, uuids: list[str]) -> str:
    """Atlas uses three things, all from one episode of one day; the facts get `uuids`."""
    atlas = Entity(uuid=f"{group}-atlas", group_id=group, name="Atlas", created_at=DAY)
    things = [Entity(uuid=f"{group}-{n}", group_id=group, name=n, created_at=DAY) for n in USES]
    episode = Episode(
        uuid=f"{group}-ep", group_id=group, name="notes", content="Atlas uses ...", valid_at=DAY
    )
    facts = [
        Fact(
            uuid=uuid,
            group_id=group,
            source_uuid=atlas.uuid,
            target_uuid=thing.uuid,
            name="USES",
            fact=f"Atlas uses {thing.name}.",
            episodes=(episode.uuid,),
            valid_at=DAY,
            created_at=LEARNED,
        )
        for uuid, thing in zip(uuids, things, strict=True)
    ]
    await engine.commit_episode(
        EpisodeCommit(group, episode, [atlas, *things], facts, mentions=[atlas.uuid])
    )
    return atlas.uuid


async def _two_groups(engine: Engine) -> dict[str, str]:
    return {
        "g1": await _history(engine, "g1", ["f-1", "f-2", "f-3"]),
        "g2": await _history(engine, "g2", ["f-9", "f-8", "f-7"]),
    }


def _sentences(facts: list[dict[str, Any]]) -> list[str]:
    return [f["fact"] for f in facts]


async def test_the_timeline_orders_facts_of_one_instant_by_their_text(engine: Engine) -> None:
    atlas = await _two_groups(engine)
    orders = []
    for group in ("g1", "g2"):
        timeline = await dispatch(
            engine, "knowledge_get_entity_timeline", {"entity_uuid": atlas[group]}
        )
        orders.append(_sentences(timeline["facts"]))
    assert orders[0] == orders[1] == [f"Atlas uses {n}." for n in USES]


@pytest.mark.parametrize("limit", [1, 2, 6, 100])
async def test_the_change_list_orders_and_cuts_ties_by_their_text(
    engine: Engine, limit: int
) -> None:
    """With and without an entity (the column read and the store's), whole or cut inside the
    tied entries: the same entries in the same order in both groups."""
    atlas = await _two_groups(engine)
    for by_entity in (False, True):
        orders = []
        for group in ("g1", "g2"):
            params: dict[str, Any] = {
                "since": "2025-01-01",
                "group_ids": [group],
                "num_results": limit,
            }
            if by_entity:
                params["entity_uuid"] = atlas[group]
            found = await dispatch(engine, "knowledge_get_changes", params)
            orders.append([(c["kind"], c["fact"]["fact"]) for c in found["changes"]])
            assert found["truncated"] == (limit < 6)
        want = [("started", f"Atlas uses {n}.") for n in USES]
        want += [("learned", f"Atlas uses {n}.") for n in USES]
        assert orders[0] == orders[1] == want[:limit], by_entity
