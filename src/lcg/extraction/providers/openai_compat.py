"""OpenAI-compatible chat completions over HTTP or a Unix socket (llama.cpp, vLLM, Ollama, ...).

Structured output is negotiated per endpoint: `response_format` json_schema first; when the
server rejects it, json_object (with the schema both as `response_format.schema`, which
llama-cpp-python and llama-server enforce with a grammar, and in the system prompt); when that
is rejected too, plain text with the schema in the prompt. The mode that worked is remembered
per endpoint for the process lifetime, so the next call goes straight to it. The reply text is
parsed by `jsonrepair`. Connections are kept alive across calls, one pool per event loop
(`lcg.loopclients`).

A rejection is read from the body as well as the status: servers turn an unsupported
`response_format` down with 400/404/415/422/501 and a message naming it, but llama-cpp-python's
server answers HTTP 500 with a FastAPI validation body (`Input should be 'text' or
'json_object'`, loc `response_format`), and llama.cpp's llama-server before build ~3800 answered
500 `response_format type must be one of "text" or "json_object"`. A 5xx counts as a rejection
only when its body names `response_format` or the type just sent; any other 5xx ("model
crashed") is a failure, not a reason to retry in another mode. The servers' exact answers are
reproduced by `lcg.testing.llm_profiles`.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import httpx2
import orjson

from lcg.errors import ExtractionError, ProviderTransportError
from lcg.extraction.jsonrepair import parse_json_object
from lcg.extraction.llm import LlmRequest, LlmResponse, LlmUsage
from lcg.extraction.providers._tls import shared_ssl_context
from lcg.loopclients import KEEPALIVE, LoopClients

__all__ = ["MODES", "OpenAICompatProvider", "chat_completions_url", "schema_instruction"]

MODES = ("json_schema", "json_object", "text")
DEFAULT_TIMEOUT_S = 120.0
DEFAULT_CONNECT_TIMEOUT_S = 5.0
# Statuses with which servers turn down a request field they do not support.
_REJECT_STATUSES = frozenset({400, 404, 415, 422, 501})
_REJECT_HINTS = ("response_format", "json_schema", "json_object", "schema", "grammar", "support")

_modes_lock = threading.Lock()
_working_mode: dict[str, str] = {}


def chat_completions_url(base: str) -> str:
    """`http://h:p`, `http://h:p/v1` or the full path -> the chat-completions URL."""
    url = base.rstrip("/")
    if url.endswith("/chat/completions"):
        return url
    if url.endswith("/v1"):
        return f"{url}/chat/completions"
    return f"{url}/v1/chat/completions"


def schema_instruction(schema: dict[str, Any]) -> str:
    """The prompt text that asks for the schema when the server cannot enforce it."""
    return (
        "Respond with exactly one JSON object and nothing else (no prose, no code fence). "
        "It must match this JSON schema:\n" + json.dumps(schema, sort_keys=True)
    )


_transport_warm = threading.Event()


def _warm_transport() -> None:
    """Build (and drop) one transport: httpx2's first costs ~80 ms CPU (~0.4 s on a busy
    machine) of lazy setup, which the first episode after open otherwise pays."""
    if not _transport_warm.is_set():
        httpx2.AsyncHTTPTransport(verify=False)
        _transport_warm.set()


class OpenAICompatProvider:
    """Chat completions on one endpoint: `base_url` over HTTP, or `uds_path` (a Unix socket)."""

    def __init__(
        self,
        *,
        base_url: str | None = None,
        uds_path: str | None = None,
        model: str = "local",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        connect_timeout_s: float = DEFAULT_CONNECT_TIMEOUT_S,
        api_key: str | None = None,
    ) -> None:
        if (base_url is None) == (uds_path is None):
            raise ValueError("OpenAICompatProvider needs exactly one of base_url and uds_path")
        self.model = model
        self.uds_path = uds_path
        self.url = chat_completions_url(base_url or "http://localhost/v1")
        self.endpoint = f"unix:{uds_path}" if uds_path is not None else self.url
        self._url = httpx2.URL(self.url)  # parsed once, not per request
        self._timeout = httpx2.Timeout(timeout_s, connect=connect_timeout_s)
        self._headers = {"Content-Type": "application/json"}
        if api_key:
            self._headers["Authorization"] = f"Bearer {api_key}"
        # One client (one keep-alive pool) per event loop the provider is called from.
        self._clients = LoopClients(self._new_client, lambda client: client.aclose())
        _warm_transport()

    @property
    def name(self) -> str:
        return f"openai-compat:{self.model}"

    @property
    def mode(self) -> str:
        """The structured-output mode the next call starts with."""
        with _modes_lock:
            return _working_mode.get(self.endpoint, MODES[0])

    def _new_client(self) -> httpx2.AsyncClient:
        # Plain http:// and Unix sockets never use TLS: skip building a verifying context.
        verify = shared_ssl_context() if self.url.startswith("https://") else False
        transport = httpx2.AsyncHTTPTransport(
            uds=self.uds_path, verify=verify, limits=httpx2.Limits(keepalive_expiry=KEEPALIVE)
        )
        return httpx2.AsyncClient(transport=transport, timeout=self._timeout)

    async def aclose(self) -> None:
        """Close the running loop's connections now (a loop's shutdown closes them anyway)."""
        await self._clients.aclose()

    async def complete(self, request: LlmRequest) -> LlmResponse:
        started = time.monotonic()
        client = await self._clients.get()
        index = MODES.index(self.mode)
        while True:
            mode = MODES[index]
            response = await self._post(client, self._body(request, mode))
            if response.status_code < 400:
                break
            if index + 1 < len(MODES) and _rejects_format(response, mode):
                index += 1
                continue
            raise self._status_error(response)
        with _modes_lock:
            _working_mode[self.endpoint] = mode
        return self._parse(response, mode, time.monotonic() - started)

    def _body(self, request: LlmRequest, mode: str) -> dict[str, Any]:
        system = request.system
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": request.max_tokens,
            "temperature": request.temperature,
        }
        if mode == "json_schema":
            body["response_format"] = {
                "type": "json_schema",
                "json_schema": {
                    "name": request.schema_name,
                    "schema": request.schema,
                    "strict": True,
                },
            }
        else:
            system = f"{system}\n\n{schema_instruction(request.schema)}"
            if mode == "json_object":
                body["response_format"] = {"type": "json_object", "schema": request.schema}
        body["messages"] = [
            {"role": "system", "content": system},
            {"role": "user", "content": request.user},
        ]
        return body

    async def _post(self, client: httpx2.AsyncClient, body: dict[str, Any]) -> httpx2.Response:
        try:
            # orjson: the compact JSON httpx2's `json=` would send, encoded in one C call.
            content = orjson.dumps(body)
            return await client.post(self._url, content=content, headers=self._headers)
        except httpx2.TimeoutException as exc:
            raise ProviderTransportError(
                f"extraction endpoint {self.endpoint} timed out ({type(exc).__name__})"
            ) from exc
        except httpx2.HTTPError as exc:
            reason = str(exc) or type(exc).__name__
            raise ProviderTransportError(
                f"cannot reach extraction endpoint {self.endpoint}: {reason}"
            ) from exc

    def _status_error(self, response: httpx2.Response) -> ProviderTransportError:
        return ProviderTransportError(
            f"extraction endpoint {self.endpoint} answered HTTP {response.status_code}: "
            f"{response.text[:300]}"
        )

    def _parse(self, response: httpx2.Response, mode: str, latency_s: float) -> LlmResponse:
        try:
            payload = response.json()
            choice = payload["choices"][0]
            text = choice["message"].get("content") or ""
            finish_reason = str(choice.get("finish_reason") or "")
        except (ValueError, KeyError, IndexError, TypeError, AttributeError) as exc:
            raise ExtractionError(
                f"extraction endpoint {self.endpoint} returned an unexpected body: "
                f"{response.text[:300]}"
            ) from exc
        usage = payload.get("usage") or {}
        details = usage.get("prompt_tokens_details") or {}
        parsed = parse_json_object(text)
        return LlmResponse(
            data=parsed.data,
            text=text,
            model=str(payload.get("model") or self.model),
            usage=LlmUsage(
                input_tokens=int(usage.get("prompt_tokens") or 0),
                output_tokens=int(usage.get("completion_tokens") or 0),
                cache_read_tokens=int(details.get("cached_tokens") or 0),
            ),
            truncated=finish_reason == "length",
            repairs=parsed.repairs,
            latency_s=latency_s,
            mode=mode,
            finish_reason=finish_reason,
        )


def _rejects_format(response: httpx2.Response, mode: str) -> bool:
    """Whether the server turned down `mode`'s response_format (not failed for another reason)."""
    text = response.text.lower()
    if response.status_code in _REJECT_STATUSES:
        return any(hint in text for hint in _REJECT_HINTS)
    if response.status_code >= 500:
        # Only a body that names the field or the type sent: "model crashed" stays a failure.
        return "response_format" in text or mode in text
    return False
