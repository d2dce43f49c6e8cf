"""knowledge_process_chunk through a configured OpenAI-compatible endpoint that answers
`response_format` exactly as a popular local server does (llama-cpp-python, llama-server, Ollama,
LM Studio, vLLM): ingestion succeeds, and `structured_output_parse` names the negotiated mode."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from ingest_support import ARMSTRONG_ENTITIES, ARMSTRONG_FACTS, ARMSTRONG_TEXT, chunk, graph

from lcg.config import Settings
from lcg.engine import Engine, open_engine
from lcg.service.registry import dispatch
from lcg.telemetry import ListSink
from lcg.testing.llm_profiles import PROFILES
from lcg.testing.scripted_llm import ScriptedLlmServer

pytestmark = pytest.mark.anyio

# The mode each server ends up in: json_schema where it is accepted, else json_object.
NEGOTIATED = {
    "llama-cpp-python": "json_object",  # json_schema -> HTTP 500 validation body
    "llama-server": "json_schema",
    "llama-server-b3800": "json_object",  # json_schema -> HTTP 500 "server_error"
    "ollama": "json_schema",
    "lm-studio": "json_schema",  # it is json_object that LM Studio refuses
    "vllm": "json_schema",
}


def test_every_profile_has_an_expected_mode() -> None:
    assert set(NEGOTIATED) == set(PROFILES)


@pytest.fixture
def configured(
    request: pytest.FixtureRequest, tmp_path: Path, events: ListSink
) -> Iterator[tuple[Engine, ScriptedLlmServer]]:
    name = str(request.param)
    with ScriptedLlmServer(profile=name, uds_path=tmp_path / "llm.sock", tcp=False) as server:
        # Configured the way a user does (--extractor-uds), so the real provider selection,
        # truncation retry and telemetry wrappers are in the path. Each test gets its own
        # socket path, so no negotiated mode carries over from another test.
        settings = Settings.for_home(
            tmp_path / ".lcg",
            kuzu_buffer_pool_mb=256,
            embedder="hash",
            extractor_uds=str(server.uds_path),
            extraction_single_call_max_chars=0,
        )
        engine = open_engine(settings, events=events)
        try:
            yield engine, server
        finally:
            engine.close()


@pytest.mark.parametrize("configured", sorted(PROFILES), indirect=True)
async def test_ingestion_succeeds_against_each_local_server(
    configured: tuple[Engine, ScriptedLlmServer], events: ListSink
) -> None:
    engine, server = configured
    assert server.profile is not None
    expected = NEGOTIATED[server.profile.name]
    server.push(ARMSTRONG_ENTITIES, ARMSTRONG_FACTS)
    result = await dispatch(
        engine, "knowledge_process_chunk", chunk(ARMSTRONG_TEXT, "c1", "1969-07-21T00:00:00Z")
    )
    assert result["success"] is True
    assert (result["nodes_extracted"], result["edges_extracted"]) == (2, 1)
    nodes, edges = await graph(engine)
    assert set(nodes) == {"Neil Armstrong", "Apollo 11"}
    assert [e["name"] for e in edges] == ["COMMANDED"]
    parses = events.of_type("structured_output_parse")
    assert [(p["stage"], p["mode"], p["success"]) for p in parses] == [
        ("entities", expected, True),
        ("facts", expected, True),
    ]
    sent = [r["response_format"]["type"] for r in server.requests]
    if expected == "json_schema":
        assert sent == ["json_schema", "json_schema"]
    else:  # one rejected json_schema, then the remembered json_object for both stages
        assert sent == ["json_schema", "json_object", "json_object"]
        assert server.requests[1]["response_format"]["schema"]["type"] == "object"
