"""Clients that wrap any `LlmClient`: the truncation retry and the telemetry around every call.

    Instrumented(RetryOnTruncation(provider), events)

`RetryOnTruncation` retries a truncated reply (`finish_reason` "length", Anthropic `max_tokens`)
once with double the token budget, capped by `LCG_EXTRACTION_MAX_TOKENS_CEILING`; the response
it returns counts both calls and both calls' tokens. `Instrumented` emits, per call:

    structured_output_parse  {stage, llm, model, mode, success, repairs, truncated}
    token_usage              {stage, llm, model, input_tokens, output_tokens, cache_read_tokens,
                              cache_write_tokens, calls, latency_ms, estimated_cost_usd}
    extraction_failure       {stage, llm, error_type, error}         (then re-raises)

and `RetryOnTruncation` emits `extraction_truncated` {stage, llm, model, max_tokens,
retry_max_tokens (null at the ceiling), salvaged}.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from lcg.errors import ExtractionError
from lcg.extraction.llm import LlmClient, LlmRequest, LlmResponse, LlmUsage
from lcg.extraction.pricing import ModelPrice, estimate_usd
from lcg.telemetry import EventSink

__all__ = ["Instrumented", "RetryOnTruncation"]


def _add(a: LlmUsage, b: LlmUsage) -> LlmUsage:
    return LlmUsage(
        input_tokens=a.input_tokens + b.input_tokens,
        output_tokens=a.output_tokens + b.output_tokens,
        cache_read_tokens=a.cache_read_tokens + b.cache_read_tokens,
        cache_write_tokens=a.cache_write_tokens + b.cache_write_tokens,
    )


class RetryOnTruncation:
    """Retry a truncated reply once with `min(2 * max_tokens, ceiling)` tokens."""

    def __init__(self, inner: LlmClient, ceiling: int, events: EventSink) -> None:
        self.inner = inner
        self.ceiling = ceiling
        self._events = events

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: LlmRequest) -> LlmResponse:
        first = await self.inner.complete(request)
        if not first.truncated:
            return first
        budget = min(request.max_tokens * 2, self.ceiling)
        retry = budget > request.max_tokens
        self._events.emit(
            "extraction_truncated",
            stage=request.stage,
            llm=self.name,
            model=first.model,
            max_tokens=request.max_tokens,
            retry_max_tokens=budget if retry else None,
            salvaged=first.data is not None,
        )
        if not retry:
            return first
        second = await self.inner.complete(replace(request, max_tokens=budget))
        return replace(
            second,
            usage=_add(first.usage, second.usage),
            calls=first.calls + second.calls,
            latency_s=first.latency_s + second.latency_s,
        )


class Instrumented:
    """Emit the per-call telemetry events around `inner` (see the module docstring)."""

    def __init__(
        self,
        inner: LlmClient,
        events: EventSink,
        prices: Mapping[str, ModelPrice] | None = None,
    ) -> None:
        self.inner = inner
        self._events = events
        self._prices = prices

    @property
    def name(self) -> str:
        return self.inner.name

    async def complete(self, request: LlmRequest) -> LlmResponse:
        try:
            response = await self.inner.complete(request)
        except ExtractionError as exc:
            self._events.emit(
                "extraction_failure",
                stage=request.stage,
                llm=self.name,
                error_type=type(exc).__name__,
                error=exc.message,
            )
            raise
        self._events.emit(
            "structured_output_parse",
            stage=request.stage,
            llm=self.name,
            model=response.model,
            mode=response.mode,
            success=response.data is not None,
            repairs=list(response.repairs),
            truncated=response.truncated,
        )
        usage = response.usage
        self._events.emit(
            "token_usage",
            stage=request.stage,
            llm=self.name,
            model=response.model,
            input_tokens=usage.input_tokens,
            output_tokens=usage.output_tokens,
            cache_read_tokens=usage.cache_read_tokens,
            cache_write_tokens=usage.cache_write_tokens,
            calls=response.calls,
            latency_ms=round(response.latency_s * 1000, 1),
            estimated_cost_usd=estimate_usd(response.model, usage, self._prices),
        )
        return response
