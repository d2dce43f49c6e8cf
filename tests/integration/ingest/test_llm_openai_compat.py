"""The OpenAI-compatible provider against the scripted server, over HTTP and a Unix socket."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from lcg.errors import ExtractionError, ProviderTransportError
from lcg.extraction.llm import LlmRequest
from lcg.extraction.providers.openai_compat import OpenAICompatProvider, chat_completions_url
from lcg.extraction.wrappers import Instrumented, RetryOnTruncation
from lcg.telemetry import ListSink
from lcg.testing.scripted_llm import ErrorReply, ScriptedLlmServer, TextReply

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"entities": {"type": "array", "items": {"type": "object"}}},
    "required": ["entities"],
}
ANSWER = {"entities": [{"name": "Ada Lovelace", "type": "Person"}, {"name": "Babbage"}]}
# Cut inside the second item: salvage keeps the first.
CUT = json.dumps(ANSWER)[: json.dumps(ANSWER).index("Babbage")]


def request(max_tokens: int = 1000) -> LlmRequest:
    return LlmRequest(
        stage="entities",
        system="Extract entities.",
        user="Ada Lovelace worked with Babbage.",
        schema=SCHEMA,
        schema_name="entities",
        max_tokens=max_tokens,
    )


@pytest.fixture(params=["http", "uds"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(transport: str, tmp_path: Path) -> Iterator[ScriptedLlmServer]:
    if transport == "http":
        scripted = ScriptedLlmServer()
    else:
        scripted = ScriptedLlmServer(uds_path=tmp_path / "llm.sock", tcp=False)
    with scripted:
        yield scripted


def provider_for(server: ScriptedLlmServer, transport: str) -> OpenAICompatProvider:
    if transport == "http":
        return OpenAICompatProvider(base_url=server.url, model="local")
    return OpenAICompatProvider(uds_path=str(server.uds_path), model="local")


@pytest.mark.anyio
async def test_clean_output(server: ScriptedLlmServer, transport: str) -> None:
    server.push(TextReply(json.dumps(ANSWER), prompt_tokens=40, completion_tokens=12))
    response = await provider_for(server, transport).complete(request())
    assert response.data == ANSWER
    assert response.repairs == ()
    assert response.mode == "json_schema"
    assert (response.usage.input_tokens, response.usage.output_tokens) == (40, 12)
    sent = server.requests[0]
    assert sent["model"] == "local"
    assert sent["max_tokens"] == 1000
    assert sent["response_format"]["type"] == "json_schema"
    assert sent["response_format"]["json_schema"]["schema"] == SCHEMA
    assert sent["messages"][0] == {"role": "system", "content": "Extract entities."}


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("text", "repair"),
    [
        (f"```json\n{json.dumps(ANSWER, indent=2)}\n```", "code_fence"),
        (f"Here you go:\n{json.dumps(ANSWER)}\nAnything else?", "prose_stripped"),
    ],
)
async def test_damaged_output_is_repaired(
    server: ScriptedLlmServer, transport: str, text: str, repair: str
) -> None:
    server.push(text)
    events = ListSink()
    client = Instrumented(provider_for(server, transport), events)
    response = await client.complete(request())
    assert response.data == ANSWER
    assert response.repairs == (repair,)
    (parse,) = events.of_type("structured_output_parse")
    assert parse["success"] is True
    assert parse["repairs"] == [repair]
    (usage,) = events.of_type("token_usage")
    assert usage["estimated_cost_usd"] is None  # a local model has no price
    assert usage["llm"] == "openai-compat:local"


@pytest.mark.anyio
async def test_truncated_reply_is_retried_once_with_double_the_budget(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.push(
        TextReply(CUT, finish_reason="length", completion_tokens=1000),
        TextReply(json.dumps(ANSWER), completion_tokens=300),
    )
    events = ListSink()
    client = RetryOnTruncation(provider_for(server, transport), ceiling=16384, events=events)
    response = await client.complete(request(max_tokens=1000))
    assert response.data == ANSWER
    assert response.calls == 2
    assert response.usage.output_tokens == 1300
    assert [r["max_tokens"] for r in server.requests] == [1000, 2000]
    (truncated,) = events.of_type("extraction_truncated")
    assert truncated["retry_max_tokens"] == 2000
    assert truncated["salvaged"] is True  # the first item survived the cut


@pytest.mark.anyio
async def test_truncation_at_the_ceiling_is_not_retried(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.push(TextReply(CUT, finish_reason="length"))
    events = ListSink()
    client = RetryOnTruncation(provider_for(server, transport), ceiling=1000, events=events)
    response = await client.complete(request(max_tokens=1000))
    assert response.truncated
    assert response.data == {"entities": [ANSWER["entities"][0]]}
    assert server.count == 1
    assert events.of_type("extraction_truncated")[0]["retry_max_tokens"] is None


@pytest.mark.anyio
async def test_json_schema_rejected_falls_back_to_json_object_and_remembers(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.reject_response_formats = frozenset({"json_schema"})
    server.push(json.dumps(ANSWER), json.dumps(ANSWER))
    provider = provider_for(server, transport)
    first = await provider.complete(request())
    second = await provider_for(server, transport).complete(request())  # same endpoint
    assert first.data == second.data == ANSWER
    assert first.mode == second.mode == "json_object"
    formats = [r["response_format"]["type"] for r in server.requests]
    assert formats == ["json_schema", "json_object", "json_object"]
    system = server.requests[1]["messages"][0]["content"]
    assert json.dumps(SCHEMA, sort_keys=True) in system


@pytest.mark.anyio
async def test_json_object_rejected_too_falls_back_to_text(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.reject_response_formats = frozenset({"json_schema", "json_object"})
    server.push(f"```json\n{json.dumps(ANSWER)}\n```", json.dumps(ANSWER))
    provider = provider_for(server, transport)
    first = await provider.complete(request())
    second = await provider.complete(request())
    assert first.data == second.data == ANSWER
    assert first.mode == "text"
    sent = server.requests
    assert [r.get("response_format", {}).get("type") for r in sent] == [
        "json_schema",
        "json_object",
        None,
        None,
    ]
    assert "JSON schema" in sent[2]["messages"][0]["content"]


@pytest.mark.anyio
async def test_a_server_error_is_an_extraction_error(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.push(ErrorReply(500, "model crashed"))
    events = ListSink()
    client = Instrumented(provider_for(server, transport), events)
    with pytest.raises(ProviderTransportError) as info:
        await client.complete(request())
    assert "HTTP 500" in info.value.message
    assert "model crashed" in info.value.message
    assert info.value.wire_message().startswith("HTTP error: ")
    (failure,) = events.of_type("extraction_failure")
    assert failure["error_type"] == "ProviderTransportError"
    assert server.count == 1  # a 500 is not a structured-output rejection: no fallback


@pytest.mark.anyio
async def test_an_unrelated_400_is_not_a_format_rejection(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.push(ErrorReply(400, "prompt is too long"))
    with pytest.raises(ExtractionError, match="HTTP 400"):
        await provider_for(server, transport).complete(request())
    assert server.count == 1


@pytest.mark.anyio
async def test_connection_refused_names_the_endpoint_quickly(tmp_path: Path) -> None:
    with ScriptedLlmServer() as scripted:
        url = scripted.url
    started = time.monotonic()
    with pytest.raises(ProviderTransportError) as info:
        await OpenAICompatProvider(base_url=url).complete(request())
    assert time.monotonic() - started < 3
    assert chat_completions_url(url) in info.value.message

    missing = tmp_path / "absent.sock"
    with pytest.raises(ProviderTransportError, match=f"unix:{missing}"):
        await OpenAICompatProvider(uds_path=str(missing)).complete(request())


def test_chat_completions_url_accepts_the_usual_base_forms() -> None:
    full = "http://h:1/v1/chat/completions"
    assert chat_completions_url("http://h:1") == full
    assert chat_completions_url("http://h:1/") == full
    assert chat_completions_url("http://h:1/v1") == full
    assert chat_completions_url(full) == full


@pytest.mark.anyio
async def test_concurrent_calls_overlap(server: ScriptedLlmServer, transport: str) -> None:
    server.latency_s = 1.0
    server.push(*[json.dumps(ANSWER)] * 8)
    provider = provider_for(server, transport)
    results: list[Any] = []

    async def one() -> None:
        results.append(await provider.complete(request()))

    started = time.monotonic()
    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(one)
    elapsed = time.monotonic() - started
    assert [r.data for r in results] == [ANSWER] * 8
    assert elapsed < 4.0  # eight 1 s calls overlap: in a row they would take 8 s


@pytest.mark.anyio
async def test_a_slow_server_times_out_with_a_named_endpoint(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.push(TextReply(json.dumps(ANSWER), latency_s=3.0))
    if transport == "http":
        slow = OpenAICompatProvider(base_url=server.url, timeout_s=0.3)
    else:
        slow = OpenAICompatProvider(uds_path=str(server.uds_path), timeout_s=0.3)
    with pytest.raises(ProviderTransportError, match="timed out") as info:
        await slow.complete(request())
    assert slow.endpoint in info.value.message


@pytest.mark.anyio
@pytest.mark.parametrize("profile", ["llama-cpp-python", "llama-server-b3800"])
async def test_a_500_that_names_response_format_falls_back_to_json_object(
    profile: str, transport: str, tmp_path: Path
) -> None:
    # llama-cpp-python's server (and llama-server before #9527) answer json_schema with HTTP 500;
    # the body, not the status, says it is the response_format that was refused.
    if transport == "http":
        scripted = ScriptedLlmServer(profile=profile)
    else:
        scripted = ScriptedLlmServer(profile=profile, uds_path=tmp_path / "llm.sock", tcp=False)
    with scripted as server:
        server.push(json.dumps(ANSWER))
        events = ListSink()
        response = await Instrumented(provider_for(server, transport), events).complete(request())
    assert response.data == ANSWER
    assert response.mode == "json_object"
    assert [r["response_format"]["type"] for r in server.requests] == ["json_schema", "json_object"]
    # json_object carries the schema too: both servers turn it into a grammar.
    assert server.requests[1]["response_format"]["schema"] == SCHEMA
    (parse,) = events.of_type("structured_output_parse")
    assert parse["mode"] == "json_object"


@pytest.mark.anyio
async def test_a_500_that_does_not_name_the_format_is_not_a_rejection(
    server: ScriptedLlmServer, transport: str
) -> None:
    server.push(ErrorReply(500, "CUDA error: out of memory while loading the schema cache"))
    with pytest.raises(ProviderTransportError, match="HTTP 500"):
        await provider_for(server, transport).complete(request())
    assert server.count == 1
