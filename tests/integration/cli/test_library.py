"""The library front end to end: `lcg.open` on a real Kuzu workspace in a temp dir, typed calls
with Python values (dates, dataclasses), results checked against their TypedDicts, errors as
the wire raises them, and the engine closed on leaving the block."""

from __future__ import annotations

import types
import typing
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pytest

import lcg
from lcg.ingest.caller import GivenEntity, GivenFact
from lcg.library import results
from lcg.library.results import RESULTS

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


def check_shape(value: Any, shape: Any, where: str = "result") -> None:
    """`value` has exactly the keys of TypedDict `shape` (its NotRequired ones optional),
    recursively through nested TypedDicts and lists of them."""
    origin = typing.get_origin(shape)
    if origin is list:
        assert isinstance(value, list), where
        for i, item in enumerate(value):
            check_shape(item, typing.get_args(shape)[0], f"{where}[{i}]")
        return
    if not typing.is_typeddict(shape):
        union = typing.get_origin(shape) in (typing.Union, types.UnionType)
        plain = {typing.get_origin(t) or t for t in (typing.get_args(shape) if union else [shape])}
        if plain <= {str, int, float, bool, list, dict, type(None)}:
            if float in plain:
                plain.add(int)
            assert isinstance(value, tuple(plain)), (where, value, shape)
        return
    assert isinstance(value, dict), where
    keys = set(shape.__required_keys__) | set(shape.__optional_keys__)
    assert set(shape.__required_keys__) <= set(value), (where, shape.__required_keys__ - set(value))
    assert set(value) <= keys, (where, set(value) - keys)
    hints = typing.get_type_hints(shape)
    for key, item in value.items():
        check_shape(item, hints[key], f"{where}.{key}")


def test_the_shape_check_can_fail() -> None:
    with pytest.raises(AssertionError):
        check_shape({"nodes": [], "count": 0, "extra": 1}, results.NodesResult)
    with pytest.raises(AssertionError):
        check_shape({"nodes": [{"uuid": "u"}], "count": 1}, results.NodesResult)
    with pytest.raises(AssertionError):
        check_shape({"nodes": [], "count": "0"}, results.NodesResult)


async def test_ingest_find_context_and_time_travel(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    async with lcg.open(home, embedder="hash", extractor="heuristic") as graph:
        episode = await graph.add_episode(
            "apollo",
            "Neil Armstrong commanded Apollo 11. Apollo 11 landed on the Moon.",
            reference_time=datetime(1969, 7, 20, 20, 17, tzinfo=UTC),
        )
        check_shape(episode, RESULTS["knowledge_add_episode"])
        assert episode["extractor"]["kind"] == "heuristic"
        found = await graph.find_entities("Apollo 11")
        check_shape(found, RESULTS["knowledge_find_entities"])
        assert "Apollo 11" in [n["name"] for n in found["nodes"]]

        first = await graph.add_facts(
            date(2025, 1, 1),
            entities=[GivenEntity("Ana", ("Person",)), {"name": "Atlas"}],
            facts=[GivenFact("Ana", "Atlas", "LEADS", "Ana leads Atlas.")],
        )
        check_shape(first, RESULTS["knowledge_add_facts"])
        (ana_leads,) = first["fact_uuids"]
        assert ana_leads is not None
        second = await graph.add_facts(
            "2025-03-01",
            entities=[GivenEntity("Bo")],
            facts=[GivenFact("Bo", "Atlas", "LEADS", "Bo leads Atlas.", supersedes=(ana_leads,))],
        )
        assert [s["uuid"] for s in second["edges_superseded"]] == [ana_leads]
        check_shape(second, RESULTS["knowledge_add_facts"])

        context = await graph.get_context("Who leads Atlas?", token_budget=512)
        check_shape(context, RESULTS["knowledge_get_context"])
        assert "Bo leads Atlas." in context["context"]

        timeline = await graph.timeline(name="Atlas")
        check_shape(timeline, RESULTS["knowledge_get_entity_timeline"])
        assert [(f["fact"], f["status"]) for f in timeline["facts"]] == [
            ("Ana leads Atlas.", "superseded"),
            ("Bo leads Atlas.", "current"),
        ]

        now = await graph.find_relationships("leads Atlas")
        check_shape(now, RESULTS["knowledge_find_relationships"])
        assert [f["fact"] for f in now["facts"]] == ["Bo leads Atlas."]
        then = await graph.find_relationships("leads Atlas", as_of=date(2025, 2, 1))
        assert [f["fact"] for f in then["facts"]] == ["Ana leads Atlas."]

        changes = await graph.changes(datetime(2025, 1, 1, tzinfo=UTC), until="2025-12-31")
        check_shape(changes, RESULTS["knowledge_get_changes"])
        assert {(c["kind"], c["fact"]["fact"]) for c in changes["changes"]} >= {
            ("started", "Ana leads Atlas."),
            ("ended", "Ana leads Atlas."),
            ("started", "Bo leads Atlas."),
        }

        passages = await graph.search_passages("Armstrong Apollo", min_score=0.0)
        check_shape(passages, RESULTS["knowledge_search_passages"])
        assert passages["count"] >= 1

    # The block closed the engine: the workspace opens again, and what was written is there.
    async with lcg.open(home, embedder="hash") as graph:
        status = await graph.status()
        assert status["entity_count"] >= 5
        assert (await graph.timeline(name="Bo"))["count"] == 1


async def test_process_chunk_result_and_a_progress_callback(tmp_path: Path) -> None:
    frames: list[dict[str, Any]] = []
    async with lcg.open(tmp_path / "ws", embedder="hash", extractor="heuristic") as graph:
        chunk = await graph.process_chunk(
            "Margaret Hamilton wrote the Apollo guidance software.", "c1", "notes.md"
        )
        check_shape(chunk, RESULTS["knowledge_process_chunk"])
        assert chunk["chunk_id"] == "c1" and chunk["success"] is True
        target = tmp_path / "ws" / "exports" / "all.jsonl"
        exported = await graph.export_graph(str(target), progress=frames.append)
        assert target.is_file() and exported
        assert frames, "a long-running method's progress frames reach the callback"


async def test_bad_input_raises_the_wire_error_and_changes_nothing(tmp_path: Path) -> None:
    async with lcg.open(tmp_path / "ws", embedder="hash") as graph:
        before = await graph.status()
        with pytest.raises(lcg.InvalidRequestError, match="reference_time") as caught:
            await graph.add_facts(
                "next tuesday", facts=[GivenFact("A", "B", "LEADS", "A leads B.")]
            )
        assert caught.value.field == "reference_time"
        with pytest.raises(lcg.InvalidRequestError, match="num_results"):
            await graph.find_entities("x", num_results=-1)
        with pytest.raises(lcg.NotFoundError):
            await graph.timeline(name="Nobody")
        after = await graph.status()
        assert (after["entity_count"], after["episode_count"]) == (
            before["entity_count"],
            before["episode_count"],
        )


async def test_a_settings_object_and_overrides_do_not_mix(tmp_path: Path) -> None:
    settings = lcg.Settings.for_home(tmp_path / "ws", embedder="hash")
    with pytest.raises(TypeError, match="overrides"):
        async with lcg.open(settings, extractor="heuristic"):
            pass
    async with lcg.open(settings) as graph:
        assert graph.engine.settings is settings
        assert (await graph.health())["state"] == "healthy"


def test_the_readmes_library_example_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The README's library example, as written, in an empty directory."""
    readme = (Path(__file__).resolve().parents[3] / "README.md").read_text(encoding="utf-8")
    start = readme.index("```python\n", readme.index("As a library")) + len("```python\n")
    example = readme[start : readme.index("```\n", start)]
    assert "lcg.open(" in example and "dispatch" not in example
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # `auto` finds no model
    exec(compile(example, "README.md", "exec"), {"__name__": "readme"})
    printed = capsys.readouterr().out.splitlines()
    assert "'Apollo 11'" in printed[0]
    assert "Bo leads Atlas." in "\n".join(printed)
    assert printed[-2] == "['Ana leads Atlas.']"
    assert printed[-1] == "[('Ana leads Atlas.', 'superseded'), ('Bo leads Atlas.', 'current')]"


async def test_every_typed_result_matches_a_real_answer(tmp_path: Path) -> None:
    """One real answer per method that has a TypedDict, checked key by key."""
    answers: dict[str, Any] = {}
    async with lcg.open(tmp_path / "ws", embedder="hash", extractor="heuristic") as graph:
        answers["health_check"] = await graph.health()
        answers["knowledge_process_chunk"] = await graph.process_chunk(
            "Neil Armstrong commanded Apollo 11.", "c1", "apollo.md"
        )
        answers["knowledge_add_episode"] = await graph.add_episode(
            "e2", "Buzz Aldrin flew on Apollo 11.", reference_time="1969-07-16"
        )
        answers["knowledge_add_facts"] = await graph.add_facts(
            "2025-01-01",
            entities=[GivenEntity("Ana"), GivenEntity("Atlas")],
            facts=[GivenFact("Ana", "Atlas", "LEADS", "Ana leads Atlas.")],
        )
        entity = await graph.assert_entity("Bo", labels=["Person"])
        answers["knowledge_assert_entity"] = entity
        relationship = await graph.assert_relationship(
            "Bo", "Atlas", "LEADS", fact="Bo leads Atlas.", valid_at="2025-03-01"
        )
        answers["knowledge_assert_relationship"] = relationship
        assert relationship["edges_superseded"], "LEADS is single-valued: Ana's fact ends"
        answers["knowledge_get_episodes"] = await graph.get_episodes()
        answers["knowledge_get_nodes_by_group"] = await graph.get_nodes_by_group()
        answers["knowledge_get_edges_by_group"] = await graph.get_edges_by_group()
        answers["knowledge_get_edges_by_uuids"] = await graph.get_edges_by_uuids(
            [relationship["edge_uuid"]]
        )
        answers["knowledge_list_entities"] = await graph.list_entities()
        answers["knowledge_list_relationships"] = await graph.list_relationships()
        answers["knowledge_get_entity_neighbors"] = await graph.get_entity_neighbors(
            entity["entity_uuid"]
        )
        answers["knowledge_get_entities_by_source"] = await graph.get_entities_by_source("apollo")
        answers["knowledge_find_entities"] = await graph.find_entities("Atlas")
        answers["knowledge_find_relationships"] = await graph.find_relationships("leads Atlas")
        answers["knowledge_search_passages"] = await graph.search_passages("Apollo", min_score=0.0)
        answers["knowledge_get_context"] = await graph.get_context("Who leads Atlas?")
        answers["knowledge_get_entity_timeline"] = await graph.timeline(name="Atlas")
        answers["knowledge_get_changes"] = await graph.changes("2025-01-01")
    assert set(answers) == set(RESULTS)
    for method, answer in answers.items():
        check_shape(answer, RESULTS[method], method)
        for key, value in answer.items():  # no list a shape check would pass vacuously
            if isinstance(value, list) and key in ("nodes", "edges", "facts", "episodes"):
                assert value, (method, key)
