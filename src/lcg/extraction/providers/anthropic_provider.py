"""Anthropic Messages API through the official SDK, with negotiated structured output.

Structured output, per model, first that works (remembered for the process lifetime):

    tool_use       one tool whose `input_schema` is the request schema, `tool_choice` forcing it;
                   the answer arrives as an already-parsed object
    output_format  `output_config.format` json_schema (models that refuse a forced tool choice
                   with HTTP 400, e.g. the 5.5 generation); the text is the JSON object
    text           the schema in the system prompt; the text is repaired by `jsonrepair`

The system prompt carries `cache_control` (prompt caching: tools + system form the cached
prefix, identical across the chunks of one extraction stage). No sampling parameters are sent
(current models reject non-default ones). Models come from `LCG_EXTRACTION_LLM` as `primary` or
`primary:fallback`; the fallback is tried when the primary is overloaded (529), failing (5xx) or
unknown (404), and an `llm_fallback` event says so. The SDK client (its keep-alive pool) is kept
across calls, one per event loop (`lcg.loopclients`).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

import anthropic

from lcg.errors import ExtractionError, ProviderTransportError
from lcg.extraction.jsonrepair import parse_json_object
from lcg.extraction.llm import LlmRequest, LlmResponse, LlmUsage
from lcg.extraction.providers._tls import shared_ssl_context
from lcg.extraction.providers.anthropic_models import DEFAULT_ANTHROPIC_MODEL, parse_model_spec
from lcg.extraction.providers.openai_compat import schema_instruction
from lcg.loopclients import LoopClients
from lcg.telemetry import EventSink, NullSink

__all__ = ["ANTHROPIC_MODES", "DEFAULT_ANTHROPIC_MODEL", "AnthropicProvider", "parse_model_spec"]

DEFAULT_TIMEOUT_S = 120.0
ANTHROPIC_MODES = ("tool_use", "output_format", "text")
# What a 400 says when a model does not take a structured-output request shape.
_REJECT_HINTS = ("tool_choice", "output_config", "output_format", "format", "not supported")
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]")

_modes_lock = threading.Lock()
_working_mode: dict[str, str] = {}


def _fallback_worthy(exc: anthropic.APIStatusError) -> bool:
    """Overloaded (529), server errors (5xx) and an unknown model (404) justify the fallback."""
    return exc.status_code >= 500 or exc.status_code == 404


def _rejects_mode(exc: anthropic.APIStatusError) -> bool:
    text = str(exc.message).lower()
    return exc.status_code == 400 and any(hint in text for hint in _REJECT_HINTS)


class AnthropicProvider:
    """Claude models behind `LlmClient`; the primary model names the provider."""

    def __init__(
        self,
        *,
        api_key: str,
        models: Sequence[str] = (DEFAULT_ANTHROPIC_MODEL,),
        base_url: str | None = None,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_retries: int = 2,
        events: EventSink | None = None,
    ) -> None:
        if not models:
            raise ValueError("AnthropicProvider needs at least one model")
        self.models = tuple(models)
        self._api_key = api_key
        self._base_url = base_url
        self._timeout_s = timeout_s
        self._max_retries = max_retries
        self._events = events or NullSink()
        # One SDK client (one keep-alive pool) per event loop the provider is called from.
        self._clients = LoopClients(self._new_client, lambda client: client.close())

    @property
    def name(self) -> str:
        return f"anthropic:{self.models[0]}"

    def mode_for(self, model: str) -> str:
        """The structured-output mode the next call to `model` starts with."""
        with _modes_lock:
            return _working_mode.get(f"{self._base_url}|{model}", ANTHROPIC_MODES[0])

    def _new_client(self) -> anthropic.AsyncAnthropic:
        return anthropic.AsyncAnthropic(
            api_key=self._api_key,
            base_url=self._base_url,
            timeout=self._timeout_s,
            max_retries=self._max_retries,
            http_client=anthropic.DefaultAsyncHttpxClient(verify=shared_ssl_context()),
        )

    async def aclose(self) -> None:
        """Close the running loop's connections now (a loop's shutdown closes them anyway)."""
        await self._clients.aclose()

    async def complete(self, request: LlmRequest) -> LlmResponse:
        for index, model in enumerate(self.models):
            try:
                return await self._negotiate(model, request)
            except anthropic.APIStatusError as exc:
                if index + 1 < len(self.models) and _fallback_worthy(exc):
                    self._events.emit(
                        "llm_fallback",
                        stage=request.stage,
                        primary=model,
                        fallback=self.models[index + 1],
                        reason=f"HTTP {exc.status_code}",
                    )
                    continue
                raise self._status_error(model, exc) from exc
            except anthropic.APIConnectionError as exc:
                raise ProviderTransportError(
                    f"cannot reach the Anthropic API ({self._base_url or 'default endpoint'}) "
                    f"for model {model}: {exc}"
                ) from exc
        raise AssertionError("unreachable: the last model either returns or raises")

    async def _negotiate(self, model: str, request: LlmRequest) -> LlmResponse:
        index = ANTHROPIC_MODES.index(self.mode_for(model))
        while True:
            mode = ANTHROPIC_MODES[index]
            try:
                response = await self._call(model, mode, request)
            except anthropic.APIStatusError as exc:
                if index + 1 < len(ANTHROPIC_MODES) and _rejects_mode(exc):
                    index += 1
                    continue
                raise
            with _modes_lock:
                _working_mode[f"{self._base_url}|{model}"] = mode
            return response

    def _status_error(self, model: str, exc: anthropic.APIStatusError) -> ProviderTransportError:
        hint = " (check ANTHROPIC_API_KEY)" if exc.status_code in (401, 403) else ""
        return ProviderTransportError(
            f"Anthropic API answered HTTP {exc.status_code} for model {model}{hint}: {exc.message}"
        )

    async def _call(self, model: str, mode: str, request: LlmRequest) -> LlmResponse:
        tool_name = _TOOL_NAME.sub("_", request.schema_name)[:64] or "respond"
        system = request.system
        extra: dict[str, Any] = {}
        if mode == "tool_use":
            extra["tools"] = [
                {
                    "name": tool_name,
                    "description": f"Record the {request.stage} result.",
                    "input_schema": request.schema,
                }
            ]
            extra["tool_choice"] = {"type": "tool", "name": tool_name}
        elif mode == "output_format":
            extra["output_config"] = {"format": {"type": "json_schema", "schema": request.schema}}
        else:
            system = f"{system}\n\n{schema_instruction(request.schema)}"
        started = time.monotonic()
        client = await self._clients.get()
        message = await client.messages.create(
            model=model,
            max_tokens=request.max_tokens,
            system=[{"type": "text", "text": system, "cache_control": {"type": "ephemeral"}}],
            messages=[{"role": "user", "content": request.user}],
            **extra,
        )
        latency = time.monotonic() - started
        if message.stop_reason == "refusal":
            raise ExtractionError(f"model {model} refused the {request.stage} request")
        data: dict[str, Any] | None = None
        repairs: tuple[str, ...] = ()
        texts: list[str] = []
        for block in message.content:
            if block.type == "tool_use" and block.name == tool_name:
                data = dict(block.input) if isinstance(block.input, dict) else None
            elif block.type == "text":
                texts.append(block.text)
        text = "".join(texts)
        if data is not None:
            text = json.dumps(data, ensure_ascii=False)
        elif text:
            parsed = parse_json_object(text)
            data, repairs = parsed.data, parsed.repairs
        usage = message.usage
        return LlmResponse(
            data=data,
            text=text,
            model=message.model or model,
            usage=LlmUsage(
                input_tokens=usage.input_tokens,
                output_tokens=usage.output_tokens,
                cache_read_tokens=usage.cache_read_input_tokens or 0,
                cache_write_tokens=usage.cache_creation_input_tokens or 0,
            ),
            truncated=message.stop_reason == "max_tokens",
            repairs=repairs,
            latency_s=latency,
            mode=mode,
            finish_reason=str(message.stop_reason or ""),
        )
