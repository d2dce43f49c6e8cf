"""The search index saved next to the database (lcg.search.snapshot): a reopen loads it instead
of reading the rows again, answers as the rebuilt index does, and a snapshot older than the
database (a crash after commits, a restored copy) or from another embedder is not used."""

from __future__ import annotations

import json
import shutil
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.engine import EpisodeCommit
from lcg.models import Episode
from lcg.search import sealed
from lcg.search import vectors as vectors_mod
from lcg.search.snapshot import FORMAT, LAYOUTS
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


def count_reads(patch: pytest.MonkeyPatch, family: str, reads: list[str]) -> None:
    """Append `family` to `reads` each time its rows are read from the database."""
    real = getattr(search_rows, f"{family}_columns")

    def counted(*args: Any, **kwargs: Any) -> Any:
        reads.append(family)
        return real(*args, **kwargs)

    patch.setattr(search_rows, f"{family}_columns", counted)


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


async def test_a_snapshot_of_the_old_format_is_rejected_and_rebuilt(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Format 1 (float32 `vec.*.npy`, no vector layouts) is not loaded: the index is rebuilt
    from the database, answers as before, and is saved again in the current format."""
    engine = open_engine(settings)
    try:
        for i in range(12):
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": f"Saturn stage {i}", "summary": f"Rocket stage number {i}."},
            )
        before = await names(engine, "rocket stage 3")
    finally:
        engine.close()
    saved = settings.db_path.parent / "search-index"
    index = json.loads((saved / "index.json").read_text())
    (saved / "index.json").write_text(json.dumps({**index, "format": 1}))
    stamps = list(saved.glob("*/*/stamp.json"))
    assert stamps
    for stamp in stamps:
        meta = json.loads(stamp.with_name("partition.json").read_text())
        meta.pop("vectors")  # format 1: float32 rows in `vec.<kind>.npy`, no layouts
        stamp.with_name("partition.json").write_text(json.dumps(meta))
        stamp.write_text(json.dumps({**json.loads(stamp.read_text()), "format": 1}))

    reads: list[str] = []
    with monkeypatch.context() as patch:
        count_reads(patch, "entity", reads)
        engine = open_engine(settings)
        try:
            assert await names(engine, "rocket stage 3") == before
            assert reads  # rebuilt from the database, not loaded
        finally:
            engine.close()
    assert json.loads((saved / "index.json").read_text())["format"] == FORMAT
    assert {json.loads(s.read_text())["format"] for s in saved.glob("*/*/stamp.json")} == {FORMAT}
    with monkeypatch.context() as patch:
        forbid_row_reads(patch)
        engine = open_engine(settings)
        try:
            assert await names(engine, "rocket stage 3") == before
        finally:
            engine.close()


async def test_int8_vectors_are_saved_and_loaded(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A partition large enough for int8 vectors (lcg.search.vectors; the threshold lowered)
    is saved as int8 and loaded back without reading the database, answering the same."""
    monkeypatch.setattr(vectors_mod, "QUANTIZE_MIN_ROWS", 8)
    engine = open_engine(settings)
    try:
        for i in range(12):
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": f"Saturn stage {i}", "summary": f"Rocket stage number {i}."},
            )
        [(_, view)] = engine.parts.search.views("entity", None)
        assert {v.layout for v in view.vectors.values()} == {"sparse"}  # quantised at 12 rows
        before = await names(engine, "rocket stage 3"), await names(engine, "saturn stag 7")
    finally:
        engine.close()
    with monkeypatch.context() as patch:
        forbid_row_reads(patch)
        engine = open_engine(settings)
        try:
            [(_, view)] = engine.parts.search.views("entity", None)
            assert {v.layout for v in view.vectors.values()} == {"sparse"}  # hash vectors
            after = await names(engine, "rocket stage 3"), await names(engine, "saturn stag 7")
            assert after == before
            assert after[1][0] == "Saturn stage 7"
        finally:
            engine.close()


async def test_standing_marks_are_saved_and_loaded(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    texts = {
        "ep-rule": "Never suggest paid tools when I ask about the quokka tracker.",
        "ep-other": "The quokka tracker runs on a Pi.",
    }
    engine = open_engine(settings)
    try:
        for uuid, text in texts.items():
            episode = Episode(uuid=uuid, group_id="g", name=uuid, content=text)
            await engine.commit_episode(EpisodeCommit("g", episode))
        before = await dispatch(engine, "knowledge_get_context", {"query": "quokka tracker"})
    finally:
        engine.close()
    with monkeypatch.context() as patch:
        forbid_row_reads(patch)
        engine = open_engine(settings)
        try:
            assert engine.state.indices_built
            ((_, view),) = engine.parts.search.views("episode", ["g"])
            marks = view.columns["standing"][: view.n].tolist()
            assert dict(zip(view.uuids, marks, strict=True)) == {"ep-rule": 1, "ep-other": 0}
            after = await dispatch(engine, "knowledge_get_context", {"query": "quokka tracker"})
            assert after["included_episode_ids"] == before["included_episode_ids"]
            assert after["included_episode_ids"][0] == "ep-rule"
        finally:
            engine.close()


async def test_episode_partitions_of_the_layout_before_standing_marks_are_rebuilt_alone(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A snapshot saved before the episode partitions held standing marks (no `layout` in their
    stamps, no column file): the episode partitions are rebuilt from the database, with their
    marks; the vocabulary and the other families' partitions load as saved."""
    texts = {
        "ep-rule": "Never suggest paid tools when I ask about the quokka tracker.",
        "ep-other": "The quokka tracker runs on a Pi.",
    }
    engine = open_engine(settings)
    try:
        await dispatch(
            engine, "knowledge_assert_entity", {"name": "Quokka", "summary": "A marsupial."}
        )
        for uuid, text in texts.items():
            episode = Episode(uuid=uuid, group_id="liminis", name=uuid, content=text)
            await engine.commit_episode(EpisodeCommit("liminis", episode))
    finally:
        engine.close()
    saved = settings.db_path.parent / "search-index"
    episode_stamps = list((saved / "episode").glob("*/stamp.json"))
    assert episode_stamps
    for path in episode_stamps:
        stamp, _ = sealed.read(path)
        assert stamp is not None and stamp.pop("layout") == LAYOUTS["episode"]
        path.write_text(sealed.dumps(stamp))
        path.with_name("col.standing.npy").unlink()

    reads: list[str] = []

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("only the episode partitions are rebuilt")

    with monkeypatch.context() as patch:
        patch.setattr(search_rows, "entity_columns", refuse)
        patch.setattr(search_rows, "fact_columns", refuse)
        count_reads(patch, "episode", reads)
        engine = open_engine(settings)
        try:
            assert await names(engine, "quokka") == ["Quokka"]
            got = await dispatch(engine, "knowledge_get_context", {"query": "quokka tracker"})
            assert got["included_episode_ids"][0] == "ep-rule"
            assert reads == ["episode"]
        finally:
            engine.close()
    for path in (saved / "episode").glob("*/stamp.json"):
        stamp, _ = sealed.read(path)
        assert stamp is not None and stamp["layout"] == LAYOUTS["episode"]
