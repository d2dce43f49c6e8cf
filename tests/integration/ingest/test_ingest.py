"""knowledge_process_chunk / knowledge_add_episode end to end, through a scripted LLM server."""

from __future__ import annotations

import json
from collections.abc import Iterator
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
    wal_ops,
)

from lcg import Engine
from lcg.config import Settings
from lcg.engine import open_engine
from lcg.errors import ConfigError, ExtractionError
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.testing.scripted_llm import ErrorReply, ScriptedLlmServer

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

# These tests script the two-call protocol (an entities answer, then a facts answer); the single
# call that short episodes take by default is tested in test_ingest_single_call.py.
SETTINGS_OVERRIDES = {"extraction_single_call_max_chars": 0}


@pytest.fixture
def llm() -> Iterator[ScriptedLlmServer]:
    with ScriptedLlmServer() as server:
        yield server


@pytest.fixture
def engine(settings: Settings, events: ListSink, llm: ScriptedLlmServer) -> Iterator[Engine]:
    """An engine opened with the scripted model as its language model."""
    client = OpenAICompatProvider(base_url=llm.url, model="scripted-model")
    eng = open_engine(settings, events=events, llm=client)
    try:
        yield eng
    finally:
        eng.close()


async def test_clean_output_becomes_entities_facts_and_an_episode(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    llm.push(ARMSTRONG_ENTITIES, ARMSTRONG_FACTS)
    result = await dispatch(
        engine, "knowledge_process_chunk", chunk(ARMSTRONG_TEXT, "c1", "1969-07-21T00:00:00Z")
    )
    assert result["success"] is True
    assert (result["nodes_extracted"], result["edges_extracted"]) == (2, 1)
    assert result["dropped_edges"] == [] and result["edges_dropped_unresolvable"] == 0
    assert result["extractor"]["kind"] == "llm"
    assert result["extractor"]["model"] == "openai-compat:scripted-model"
    nodes, edges = await graph(engine)
    assert nodes["Neil Armstrong"]["labels"] == ["Entity", "Person"]
    assert nodes["Apollo 11"]["created_at"] == "1969-07-21 00:00:00"
    [edge] = edges
    assert (edge["name"], edge["relation_type"], edge["valid_at"]) == (
        "COMMANDED",
        "COMMANDED",
        "1969-07-16 13:32:00",
    )
    episodes = await dispatch(engine, "knowledge_get_episodes", {})
    [episode] = episodes["episodes"]
    assert episode["name"] == "c1" and episode["source_description"] == "notes.md:c1"
    assert sorted(episode["entity_edges"]) == sorted(n["uuid"] for n in nodes.values())


async def test_the_cost_object_counts_calls_tokens_and_unknown_prices(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    llm.push(entities({"name": "NASA", "summary": "US space agency."}), facts())
    result = await dispatch(
        engine, "knowledge_process_chunk", chunk("NASA.", "c", "2020-01-01T00:00:00Z")
    )
    cost = result["cost"]
    assert cost["llm_calls"] == 2
    assert set(cost["stages"]) == {"entities", "facts"}
    assert all(s["llm_calls"] == 1 and s["input_tokens"] > 0 for s in cost["stages"].values())
    assert cost["input_tokens"] == sum(s["input_tokens"] for s in cost["stages"].values())
    assert cost["estimated_usd"] is None  # "scripted-model" is not in the pricing table


async def test_messy_items_are_salvaged_one_by_one_and_counted(
    engine: Engine, llm: ScriptedLlmServer, events: ListSink
) -> None:
    llm.push(
        entities(
            {"name": "Acme", "type": "", "attributes": {"hq": {"city": "Paris"}, "": "x"}},
            {"name": "  ", "type": "Company"},
            {"name": "Bob", "labels": [], "summary": "An engineer."},
        ),
        facts(
            fact("Bob", "WORKS_AT", "Acme", "Bob works at Acme.", valid_at="sometime in spring"),
            fact("Bob", "LIKES", "", "Bob likes something."),
            fact("Bob", "KNOWS", "Carol", "Bob knows Carol."),
        ),
    )
    result = await dispatch(
        engine, "knowledge_process_chunk", chunk("Bob works at Acme.", "c", "2021-03-01T00:00:00Z")
    )
    assert result["entities_dropped_malformed"] == 1
    assert result["edges_dropped_malformed"] == 1
    assert result["dropped_edges"] == [
        {
            "source_name": "Bob",
            "target_name": "Carol",
            "relation_type": None,
            "fact": "Bob knows Carol.",
            "unresolved_endpoint": "target",
        }
    ]
    assert result["salvage"]["timestamps_dropped"] == 1
    assert result["salvage"]["labels_defaulted"] == 2
    assert result["salvage"]["empty_keys_dropped"] == 1
    nodes, edges = await graph(engine)
    assert nodes["Acme"]["labels"] == ["Entity"]
    assert json.loads(nodes["Acme"]["attributes"]) == {"hq": '{"city":"Paris"}'}
    [edge] = edges
    assert edge["valid_at"] == "2021-03-01 00:00:00"  # no usable date: the reference time
    assert events.of_type("entities_missing_summary")[0]["count"] == 1
    assert events.of_type("structured_output_parse")


async def test_a_server_error_fails_the_call_and_writes_nothing(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    llm.push(entities({"name": "Seed"}), facts())
    await dispatch(engine, "knowledge_process_chunk", chunk("Seed.", "c0", "2020-01-01T00:00:00Z"))
    before_wal = wal_bytes(engine)
    before = await graph(engine), await dispatch(engine, "knowledge_get_episodes", {})
    llm.push(entities({"name": "Acme"}), ErrorReply(500, "boom"))
    with pytest.raises(ExtractionError):
        await dispatch(
            engine, "knowledge_process_chunk", chunk("Acme.", "c1", "2020-01-02T00:00:00Z")
        )
    assert llm.pending == 0
    assert wal_bytes(engine) == before_wal
    assert (await graph(engine), await dispatch(engine, "knowledge_get_episodes", {})) == before


async def test_nasa_spellings_are_one_entity_across_episodes(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    llm.push(
        entities(
            {
                "name": "National Aeronautics and Space Administration",
                "type": "Organization",
                "summary": "The US space agency (NASA).",
            }
        ),
        facts(),
        entities({"name": "NASA", "type": "Organization", "summary": "Runs Apollo."}),
        facts(),
        entities({"name": "N.A.S.A.", "summary": "Space agency."}),
        facts(),
        entities({"name": "Apollo 1", "type": "Mission"}, {"name": "Apollo 11", "type": "Mission"}),
        facts(),
    )
    for i in range(4):
        await dispatch(
            engine,
            "knowledge_process_chunk",
            chunk(f"text {i}", f"c{i}", f"2020-01-0{i + 1}T00:00:00Z"),
        )
    nodes, _ = await graph(engine)
    assert sorted(nodes) == [
        "Apollo 1",
        "Apollo 11",
        "National Aeronautics and Space Administration",
    ]
    agency = nodes["National Aeronautics and Space Administration"]
    assert agency["summary"].startswith("Space agency. Runs Apollo.")
    assert json.loads(json.loads(agency["attributes"])["aliases"]) == ["NASA", "N.A.S.A."]


async def test_heuristic_extractor_runs_without_a_model(tmp_path: Any) -> None:
    settings = Settings.for_home(tmp_path / "h", kuzu_buffer_pool_mb=256, extractor="heuristic")
    engine = open_engine(settings)
    try:
        result = await dispatch(
            engine,
            "knowledge_add_episode",
            {
                "name": "note",
                "episode_body": "Neil Armstrong commanded Apollo 11 on July 16, 1969.",
                "reference_time": "2020-01-01T00:00:00Z",
            },
        )
        assert result["extractor"]["kind"] == "heuristic"
        assert result["cost"]["llm_calls"] == 0 and result["cost"]["estimated_usd"] == 0.0
        nodes, edges = await graph(engine)
        assert sorted(nodes) == ["Apollo 11", "Neil Armstrong"]
        assert [(e["name"], e["valid_at"]) for e in edges] == [("COMMANDED", "1969-07-16 00:00:00")]
        status = await dispatch(engine, "knowledge_status", {})
        assert status["extractor"]["kind"] == "heuristic"
    finally:
        engine.close()


async def test_without_a_configured_model_ingestion_names_what_to_set(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        with pytest.raises(ConfigError) as info:
            await dispatch(
                engine, "knowledge_process_chunk", chunk("x", "c", "2020-01-01T00:00:00Z")
            )
        assert "LCG_EXTRACTION_URL" in info.value.message
        assert wal_bytes(engine) == {}
        status = await dispatch(engine, "knowledge_status", {})
        assert status["extractor"]["kind"] == "llm" and status["extractor"]["configured"] is False
    finally:
        engine.close()


async def test_an_oversized_chunk_is_ingested_with_a_warning(
    tmp_path: Any, events: ListSink
) -> None:
    settings = Settings.for_home(
        tmp_path / "o",
        kuzu_buffer_pool_mb=256,
        extractor="heuristic",
        chunk_text_advisory_max_chars=10,
    )
    engine = open_engine(settings, events=events)
    try:
        result = await dispatch(
            engine,
            "knowledge_process_chunk",
            chunk("Alice met Bob in Paris.", "c", "2020-01-01T00:00:00Z"),
        )
    finally:
        engine.close()
    assert result["warning"]["type"] == "chunk_text_oversized"
    assert (result["warning"]["chunk_text_chars"], result["warning"]["recommended_max_chars"]) == (
        23,
        10,
    )
    assert events.of_type("chunk_text_oversized")[0]["chunk_text_chars"] == 23


async def test_add_episode_returns_the_episode_uuid(engine: Engine, llm: ScriptedLlmServer) -> None:
    llm.push(entities({"name": "Alice"}), facts())
    result = await dispatch(
        engine,
        "knowledge_add_episode",
        {"name": "m1", "episode_body": "Alice says hi", "source": "message", "group_id": "chat"},
    )
    episodes = await dispatch(engine, "knowledge_get_episodes", {"group_id": "chat"})
    assert [e["uuid"] for e in episodes["episodes"]] == [result["episode_uuid"]]
    assert episodes["episodes"][0]["source"] == "message"
    assert "SOURCE TYPE: message" in llm.requests[0]["messages"][-1]["content"]
    assert [op["op"] for op in wal_ops(engine, "chat")][-2:] == ["episode.add", "mentions.add"]


async def test_strict_ontology_relabels_out_of_vocabulary_types(
    engine: Engine, llm: ScriptedLlmServer
) -> None:
    (engine.settings.home / "ontology.yaml").write_text(
        "mode: strict\nentity_types:\n  - name: Person\n  - name: Rfc\n    parent: Document\n"
        "  - name: Document\nrelation_types:\n  - name: AUTHORED\n    aliases: [WROTE]\n"
    )
    llm.push(
        entities(
            {"name": "Jon Postel", "type": "person"},
            {"name": "RFC 791", "type": "Rfc"},
            {"name": "ARPA", "type": "Agency"},
        ),
        facts(
            fact("Jon Postel", "wrote", "RFC 791", "Jon Postel wrote RFC 791."),
            fact("ARPA", "FUNDED", "RFC 791", "ARPA funded the work on RFC 791."),
        ),
    )
    result = await dispatch(
        engine,
        "knowledge_process_chunk",
        chunk("Postel wrote RFC 791.", "c", "1981-09-01T00:00:00Z"),
    )
    assert result["entities_reclassified_unclassified"] == 1
    assert result["edges_reclassified_unclassified"] == 1
    nodes, edges = await graph(engine)
    assert nodes["Jon Postel"]["labels"] == ["Entity", "Person"]
    assert nodes["RFC 791"]["labels"] == ["Entity", "Document", "Rfc"]
    assert nodes["ARPA"]["labels"] == ["Entity", "Unclassified"]
    assert json.loads(nodes["ARPA"]["attributes"]) == {"original_entity_type": "Agency"}
    by_fact = {e["fact"]: e for e in edges}
    assert by_fact["Jon Postel wrote RFC 791."]["relation_type"] == "AUTHORED"
    funded = by_fact["ARPA funded the work on RFC 791."]
    assert funded["relation_type"] == "UNCLASSIFIED"
    assert json.loads(funded["attributes"]) == {"original_relation_type": "FUNDED"}
    assert "AUTHORED" in llm.requests[0]["messages"][0]["content"]


async def test_ambiguous_pairs_go_to_one_dedup_call_when_enabled(tmp_path: Any) -> None:
    settings = Settings.for_home(
        tmp_path / "d",
        kuzu_buffer_pool_mb=256,
        dedup_llm=True,
        dedup_embedding_threshold=0.85,
        **SETTINGS_OVERRIDES,
    )
    with ScriptedLlmServer() as server:
        engine = open_engine(settings, llm=OpenAICompatProvider(base_url=server.url))
        try:
            server.push(
                entities({"name": "Kennedy Space Center", "type": "Place"}),
                facts(),
                entities(
                    {"name": "Kennedy Space Centre", "type": "Place"},
                    {"name": "Kennedy Space Station", "type": "Place"},
                ),
                facts(),
                json.dumps({"same": [0]}),
            )
            await dispatch(
                engine, "knowledge_process_chunk", chunk("KSC.", "c1", "2020-01-01T00:00:00Z")
            )
            result = await dispatch(
                engine, "knowledge_process_chunk", chunk("KSC again.", "c2", "2020-01-02T00:00:00Z")
            )
            dedup = server.requests[-1]["messages"][-1]["content"]
            assert result["cost"]["stages"]["dedup"]["llm_calls"] == 1
            assert result["entities_merged"] == 1
            assert "NEW: Kennedy Space Centre" in dedup
            nodes, _ = await graph(engine)
            assert sorted(nodes) == ["Kennedy Space Center", "Kennedy Space Station"]
        finally:
            engine.close()
