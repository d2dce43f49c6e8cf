"""The Anthropic provider driven through the real SDK against a scripted local /v1/messages."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from lcg.errors import ExtractionError, ProviderTransportError
from lcg.extraction.llm import LlmRequest
from lcg.extraction.providers.anthropic_provider import AnthropicProvider, parse_model_spec
from lcg.extraction.wrappers import Instrumented, RetryOnTruncation
from lcg.telemetry import ListSink
from lcg.testing.scripted_llm import RawReply, ScriptedLlmServer

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"facts": {"type": "array", "items": {"type": "object"}}},
    "required": ["facts"],
}
ANSWER = {"facts": [{"source": "Ada", "target": "Babbage", "relation": "WORKED_WITH"}]}
PRIMARY, FALLBACK = "claude-sonnet-5", "claude-haiku-4-5"


def request(max_tokens: int = 800) -> LlmRequest:
    return LlmRequest(
        stage="facts",
        system="Extract facts.",
        user="Ada worked with Babbage.",
        schema=SCHEMA,
        schema_name="facts",
        max_tokens=max_tokens,
    )


def message(
    model: str,
    content: list[dict[str, Any]] | None = None,
    stop_reason: str = "tool_use",
) -> RawReply:
    blocks = content or [{"type": "tool_use", "id": "toolu_1", "name": "facts", "input": ANSWER}]
    return RawReply(
        {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": blocks,
            "stop_reason": stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": 120,
                "output_tokens": 30,
                "cache_read_input_tokens": 900,
                "cache_creation_input_tokens": 0,
            },
        }
    )


def error(status: int, kind: str) -> RawReply:
    return RawReply({"type": "error", "error": {"type": kind, "message": kind}}, status)


@pytest.fixture
def server() -> Iterator[ScriptedLlmServer]:
    with ScriptedLlmServer() as scripted:
        yield scripted


def provider(
    server: ScriptedLlmServer, models: tuple[str, ...] = (PRIMARY,), events: ListSink | None = None
) -> AnthropicProvider:
    return AnthropicProvider(
        api_key="test-key",
        models=models,
        base_url=server.url.removesuffix("/v1"),
        max_retries=0,
        events=events,
    )


@pytest.mark.anyio
async def test_tool_use_reply_is_the_parsed_object(server: ScriptedLlmServer) -> None:
    server.push(message(PRIMARY))
    events = ListSink()
    client = Instrumented(provider(server), events)
    response = await client.complete(request())
    assert response.data == ANSWER
    assert response.mode == "tool_use"
    assert response.usage.cache_read_tokens == 900
    assert client.name == f"anthropic:{PRIMARY}"
    (recorded,) = server.recorded
    assert recorded.path == "/v1/messages"
    body = recorded.body
    assert body["model"] == PRIMARY
    assert body["max_tokens"] == 800
    assert body["tools"] == [
        {"name": "facts", "description": "Record the facts result.", "input_schema": SCHEMA}
    ]
    assert body["tool_choice"] == {"type": "tool", "name": "facts"}
    assert body["system"][0]["cache_control"] == {"type": "ephemeral"}
    (usage,) = events.of_type("token_usage")
    expected = (120 * 2.0 + 30 * 10.0 + 900 * 0.2) / 1_000_000
    assert usage["estimated_cost_usd"] == pytest.approx(expected)


@pytest.mark.anyio
async def test_a_text_reply_is_repaired_like_any_other(server: ScriptedLlmServer) -> None:
    text = 'Here it is: {"facts": [],}'
    server.push(message(PRIMARY, [{"type": "text", "text": text}], "end_turn"))
    response = await provider(server).complete(request())
    assert response.data == {"facts": []}
    assert response.mode == "tool_use"  # what was asked for; the model answered in text
    assert response.repairs == ("prose_stripped", "trailing_commas")


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("status", "kind"),
    [(529, "overloaded_error"), (500, "api_error"), (404, "not_found_error")],
)
async def test_fallback_model_takes_over_and_says_so(
    server: ScriptedLlmServer, status: int, kind: str
) -> None:
    server.push(error(status, kind), message(FALLBACK))
    events = ListSink()
    response = await provider(server, (PRIMARY, FALLBACK), events).complete(request())
    assert response.data == ANSWER
    assert response.model == FALLBACK
    assert [r["model"] for r in server.requests] == [PRIMARY, FALLBACK]
    (fallback,) = events.of_type("llm_fallback")
    assert fallback == {
        "type": "llm_fallback",
        "stage": "facts",
        "primary": PRIMARY,
        "fallback": FALLBACK,
        "reason": f"HTTP {status}",
    }


@pytest.mark.anyio
async def test_a_bad_request_does_not_fall_back(server: ScriptedLlmServer) -> None:
    server.push(error(400, "invalid_request_error"))
    events = ListSink()
    with pytest.raises(ProviderTransportError, match="HTTP 400"):
        await provider(server, (PRIMARY, FALLBACK), events).complete(request())
    assert server.count == 1
    assert events.of_type("llm_fallback") == []


@pytest.mark.anyio
async def test_failure_without_fallback_is_an_extraction_error(server: ScriptedLlmServer) -> None:
    server.push(error(529, "overloaded_error"))
    with pytest.raises(ExtractionError, match=f"HTTP 529 for model {PRIMARY}"):
        await provider(server).complete(request())


@pytest.mark.anyio
async def test_max_tokens_stop_is_retried_with_double_budget(server: ScriptedLlmServer) -> None:
    partial = [{"type": "tool_use", "id": "toolu_1", "name": "facts", "input": {}}]
    server.push(message(PRIMARY, partial, "max_tokens"), message(PRIMARY))
    client = RetryOnTruncation(provider(server), ceiling=4096, events=ListSink())
    response = await client.complete(request(max_tokens=800))
    assert response.data == ANSWER
    assert response.calls == 2
    assert [r["max_tokens"] for r in server.requests] == [800, 1600]


@pytest.mark.anyio
async def test_unreachable_api_is_a_transport_error() -> None:
    with ScriptedLlmServer() as scripted:
        url = scripted.url.removesuffix("/v1")
    client = AnthropicProvider(api_key="test-key", base_url=url, max_retries=0)
    with pytest.raises(ProviderTransportError, match="cannot reach the Anthropic API"):
        await client.complete(request())


@pytest.mark.anyio
async def test_forced_tool_choice_rejected_falls_back_to_output_format_and_remembers(
    server: ScriptedLlmServer,
) -> None:
    model = "claude-sonnet-5-5"
    rejection = RawReply(
        {
            "type": "error",
            "error": {
                "type": "invalid_request_error",
                "message": "tool_choice forcing a tool is not supported for this model",
            },
        },
        400,
    )
    text = '{"facts": []}'
    server.push(
        rejection,
        message(model, [{"type": "text", "text": text}], "end_turn"),
        message(model, [{"type": "text", "text": text}], "end_turn"),
    )
    first = await provider(server, (model,)).complete(request())
    second = await provider(server, (model,)).complete(request())
    assert first.data == second.data == {"facts": []}
    assert first.mode == second.mode == "output_format"
    sent = server.requests
    assert "tool_choice" in sent[0]
    assert "tool_choice" not in sent[1]
    assert sent[1]["output_config"] == {"format": {"type": "json_schema", "schema": SCHEMA}}
    assert "tool_choice" not in sent[2]  # remembered: no second forced-tool attempt


@pytest.mark.anyio
async def test_no_structured_output_at_all_falls_back_to_text(server: ScriptedLlmServer) -> None:
    def refuse(what: str) -> RawReply:
        body = {"type": "invalid_request_error", "message": f"{what} is not supported"}
        return RawReply({"type": "error", "error": body}, 400)

    server.push(
        refuse("tool_choice"),
        refuse("output_config.format"),
        message("claude-haiku-5-5", [{"type": "text", "text": '```json\n{"facts": []}\n```'}]),
    )
    response = await provider(server, ("claude-haiku-5-5",)).complete(request())
    assert response.data == {"facts": []}
    assert response.mode == "text"
    assert response.repairs == ("code_fence",)
    last = server.requests[-1]
    assert "tools" not in last and "output_config" not in last
    assert "JSON schema" in last["system"][0]["text"]


def test_model_spec_is_primary_or_primary_colon_fallback() -> None:
    assert parse_model_spec(None) == ("claude-sonnet-5-5",)
    assert parse_model_spec(f"{PRIMARY}:{FALLBACK}") == (PRIMARY, FALLBACK)
    for bad in ("a:", ":b", "a:b:c"):
        with pytest.raises(ValueError):
            parse_model_spec(bad)


@pytest.mark.anyio
async def test_calls_from_one_loop_share_one_connection(server: ScriptedLlmServer) -> None:
    server.push(*[message(PRIMARY) for _ in range(5)])
    client = provider(server)
    for _ in range(5):
        assert (await client.complete(request())).data == ANSWER
    assert server.count == 5
    assert server.accepted == 1
