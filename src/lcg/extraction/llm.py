"""The one seam between lcg and a language model: `LlmClient.complete(request) -> response`.

Every provider (Anthropic, OpenAI-compatible over HTTP or a Unix socket, cassette replay, the
scripted clients of tests) implements `LlmClient`. Callers build an `LlmRequest` from a prompt
function and read the parsed JSON object from `LlmResponse.data`; providers do the transport,
structured-output negotiation, JSON text repair and usage accounting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

__all__ = ["LlmClient", "LlmRequest", "LlmResponse", "LlmUsage"]


@dataclass(frozen=True)
class LlmRequest:
    """One structured completion: prompts in, one JSON object matching `schema` out."""

    stage: str  # what the call is for: "entities", "facts", "dedup", "judge", ...
    system: str
    user: str
    schema: dict[str, Any]  # JSON schema of the object expected back
    schema_name: str
    max_tokens: int
    temperature: float = 0.0
    prompt_version: str = ""


@dataclass(frozen=True)
class LlmUsage:
    """Tokens one call consumed, as the provider reported them (0 when it did not)."""

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0


@dataclass(frozen=True)
class LlmResponse:
    """What came back: the parsed object (None when no JSON object could be recovered)."""

    data: dict[str, Any] | None
    text: str
    model: str
    usage: LlmUsage = field(default_factory=LlmUsage)
    truncated: bool = False
    # How the text was repaired before parsing, e.g. "code_fence", "prose_stripped".
    repairs: tuple[str, ...] = ()
    latency_s: float = 0.0
    # Calls this response took, retries included (a truncation retry makes it 2).
    calls: int = 1
    # How the provider asked for structure: "json_schema", "json_object", "text", "tool_use",
    # or "replay" (a cassette); and why generation stopped, as the provider said it.
    mode: str = ""
    finish_reason: str = ""


class LlmClient(Protocol):
    """A language model behind one structured-completion call."""

    @property
    def name(self) -> str:
        """`provider:model`, as shown in status and in every ingestion result."""
        ...

    async def complete(self, request: LlmRequest) -> LlmResponse:
        """Run one completion.

        Raises:
            ExtractionError: the provider failed (transport, HTTP status, refusal) — nothing
                may be written on behalf of this call.
        """
        ...
