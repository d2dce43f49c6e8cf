"""The search index saved next to the database (lcg.search.snapshot): a reopen loads it instead
of reading the rows again, answers as the rebuilt index does, and a snapshot older than the
database (a crash after commits, a restored copy) or from another embedder is not used."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.storage import search_rows

pytestmark = pytest.mark.anyio


async def names(engine: Any, query: str) -> list[str]:
    found = await dispatch(engine, "knowledge_find_entities", {"query": query})
    return [n["name"] for n in found["nodes"]]


async def facts(engine: Any, query: str) -> list[str]:
    found = await dispatch(engine, "knowledge_find_relationships", {"query": query})
    return [f["fact"] for f in found["facts"]]


def forbid_row_reads(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the search index read the database instead of its snapshot")

    for name in ("entity_columns", "fact_columns", "episode_columns"):
        monkeypatch.setattr(search_rows, name, refuse)


async def test_a_reopen_loads_the_saved_index_and_a_stale_one_is_rebuilt(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(settings)
    try:
        for i in range(12):
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": f"Saturn stage {i}", "summary": f"Rocket stage number {i}."},
            )
        await dispatch(
            engine,
            "knowledge_add_facts",
            {
                "reference_time": "2025-01-01",
                "entities": [{"name": "Saturn stage 1"}, {"name": "Saturn stage 2"}],
                "facts": [
                    {
                        "source": "Saturn stage 1",
                        "relation_type": "LIFTS",
                        "target": "Saturn stage 2",
                        "fact": "Saturn stage 1 lifts Saturn stage 2 into orbit.",
                    }
                ],
            },
        )
        before = await names(engine, "rocket stage 3"), await facts(engine, "lifts orbit")
    finally:
        engine.close()
    saved = settings.db_path.parent / "search-index"
    assert (saved / "index.json").exists()
    copy = settings.home / "old-index"
    shutil.copytree(saved, copy)

    with monkeypatch.context() as patch:
        forbid_row_reads(patch)
        engine = open_engine(settings)
        try:
            assert engine.state.indices_built
            assert (await names(engine, "rocket stage 3"), await facts(engine, "lifts orbit")) == (
                before
            )
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": "Lunar module", "summary": "Lands on the moon."},
            )
            assert (await names(engine, "lunar module"))[0] == "Lunar module"
        finally:
            engine.close()

    # The snapshot from before "Lunar module" is stale now: put it back, it must not be used.
    shutil.rmtree(saved)
    shutil.copytree(copy, saved)
    engine = open_engine(settings)
    try:
        assert (await names(engine, "lunar module"))[0] == "Lunar module"
        assert await names(engine, "rocket stage 3") == before[0]
    finally:
        engine.close()
