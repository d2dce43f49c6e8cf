"""The single extraction call a short episode takes (LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS), through
a scripted LLM server: one request, the threshold, the existing facts it is shown, failures."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ingest_support import (
    ARMSTRONG_ENTITIES,
    ARMSTRONG_FACTS,
    ARMSTRONG_TEXT,
    chunk,
    entities,
    fact,
    facts,
    graph,
    wal_bytes,
)

from lcg import Engine, Settings, open_engine
from lcg.errors import ExtractionError
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.service.registry import dispatch
from lcg.testing.heuristic_llm import heuristic_responder, prompt_parts
from lcg.testing.scripted_llm import ErrorReply, ScriptedLlmServer

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio


def both(ents: str, fcts: str) -> str:
    """The single call's answer: an entities answer and a facts answer in one object."""
    return json.dumps({**json.loads(ents), **json.loads(fcts)})


def existing_lines(body: dict[str, Any]) -> list[str]:
    """The EXISTING FACTS lines of a single-call prompt."""
    _, user = prompt_parts(body)
    assert user.startswith("EXISTING FACTS:\n"), user[:80]
    section = user.split("EXISTING FACTS:\n", 1)[1].split("\nREFERENCE TIME:", 1)[0]
    return [] if section == "(none)" else section.splitlines()


@pytest.fixture
def llm() -> Iterator[ScriptedLlmServer]:
    with ScriptedLlmServer() as server:
        yield server


@pytest.fixture
def engine(settings: Settings, llm: ScriptedLlmServer) -> Iterator[Engine]:
    """An engine opened with the scripted model as its language model."""
    eng = open_engine(settings, llm=OpenAICompatProvider(base_url=llm.url, model="scripted-model"))
    try:
        yield eng
    finally:
        eng.close()


async def test_a_short_episode_is_extracted_in_one_call(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    llm.push(both(ARMSTRONG_ENTITIES, ARMSTRONG_FACTS))
    result = await dispatch(
        engine, "knowledge_process_chunk", chunk(ARMSTRONG_TEXT, "c1", "1969-07-21T00:00:00Z")
    )
    [request] = llm.requests
    assert request["response_format"]["json_schema"]["name"] == "graph"
    assert set(request["response_format"]["json_schema"]["schema"]["properties"]) == {
        "entities",
        "facts",
    }
    assert existing_lines(request) == []  # an empty graph has nothing to supersede
    assert (result["nodes_extracted"], result["edges_extracted"]) == (2, 1)
    assert result["cost"]["llm_calls"] == 1 and set(result["cost"]["stages"]) == {"extract"}
    assert result["extractor"]["prompt_version"] == "lcg-extract-4"
    nodes, edges = await graph(engine)
    assert nodes["Neil Armstrong"]["labels"] == ["Entity", "Person"]
    [edge] = edges
    assert (edge["name"], edge["valid_at"]) == ("COMMANDED", "1969-07-16 13:32:00")


async def test_the_length_threshold_chooses_one_call_or_two(tmp_path: Path) -> None:
    limit = 40
    settings = Settings.for_home(
        tmp_path / "t",
        kuzu_buffer_pool_mb=256,
        embedder="hash",
        extraction_single_call_max_chars=limit,
    )
    with ScriptedLlmServer(heuristic_responder) as server:
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url))
        try:
            short = "Alice Smith met Bob Jones in Paris, 2020"
            long = short + "."
            assert (len(short), len(long)) == (limit, limit + 1)
            # Separate groups, so the second episode's facts are not duplicates of the first's.
            one = await dispatch(
                engine,
                "knowledge_process_chunk",
                chunk(short, "a", "2020-01-01T00:00:00Z", group_id="one"),
            )
            two = await dispatch(
                engine,
                "knowledge_process_chunk",
                chunk(long, "b", "2020-01-02T00:00:00Z", group_id="two"),
            )
            stages = [r["response_format"]["json_schema"]["name"] for r in server.requests]
            assert stages == ["graph", "entities", "facts"]
            assert (one["cost"]["llm_calls"], two["cost"]["llm_calls"]) == (1, 2)
            # Both protocols find the same things in the same sentence.
            assert one["nodes_extracted"] == two["nodes_extracted"] > 0
            assert one["edges_extracted"] == two["edges_extracted"] > 0
        finally:
            engine.close()


async def test_the_existing_facts_shown_are_about_entities_the_text_names(tmp_path: Path) -> None:
    settings = Settings.for_home(
        tmp_path / "x", kuzu_buffer_pool_mb=256, embedder="hash", supersede_candidates=2
    )
    with ScriptedLlmServer() as server:
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url))
        try:
            server.push(
                both(
                    entities(
                        {"name": "Alice"}, {"name": "Acme"}, {"name": "Bob"}, {"name": "Oslo"}
                    ),
                    facts(
                        fact("Alice", "WORKS_AT", "Acme", "Alice works at Acme."),
                        fact("Alice", "LIVES_IN", "Oslo", "Alice lives in Oslo."),
                        fact("Alice", "KNOWS", "Bob", "Alice knows Bob."),
                        fact("Bob", "LIVES_IN", "Oslo", "Bob lives in Oslo."),
                    ),
                ),
                both(entities({"name": "Alice"}), facts()),
                both(entities({"name": "Carol"}), facts()),
            )
            seed = "Alice works at Acme and lives in Oslo; she knows Bob, who lives in Oslo."
            await dispatch(
                engine, "knowledge_process_chunk", chunk(seed, "s", "2020-01-01T00:00:00Z")
            )
            await dispatch(
                engine, "knowledge_process_chunk", chunk("ALICE left.", "a", "2021-01-01T00:00:00Z")
            )
            await dispatch(
                engine,
                "knowledge_process_chunk",
                chunk("Carol arrived.", "c", "2021-01-02T00:00:00Z"),
            )
            _, about_alice, about_nobody = server.requests
            shown = existing_lines(about_alice)
            # Alice has three active facts and the bound is two; Bob's own fact is never shown.
            assert len(shown) == 2
            assert all(line.split("] ", 1)[1].startswith("Alice ") for line in shown), shown
            assert existing_lines(about_nobody) == []
        finally:
            engine.close()


async def test_a_failed_single_call_writes_nothing(engine: Engine, llm: ScriptedLlmServer) -> None:
    llm.push(both(entities({"name": "Seed"}), facts()))
    await dispatch(engine, "knowledge_process_chunk", chunk("Seed.", "c0", "2020-01-01T00:00:00Z"))
    before_wal = wal_bytes(engine)
    before = await graph(engine)
    llm.push(ErrorReply(500, "boom"))
    with pytest.raises(ExtractionError):
        await dispatch(
            engine, "knowledge_process_chunk", chunk("Acme.", "c1", "2020-01-02T00:00:00Z")
        )
    assert llm.pending == 0
    assert wal_bytes(engine) == before_wal
    assert await graph(engine) == before


async def test_a_single_call_answer_missing_its_facts_still_writes_the_entities(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    llm.push(entities({"name": "Ada Lovelace", "type": "Person", "summary": "Mathematician."}))
    result = await dispatch(
        engine,
        "knowledge_process_chunk",
        chunk("Ada Lovelace wrote notes.", "c", "2020-01-01T00:00:00Z"),
    )
    assert (result["nodes_extracted"], result["edges_extracted"]) == (1, 0)
    nodes, edges = await graph(engine)
    assert list(nodes) == ["Ada Lovelace"] and edges == []
