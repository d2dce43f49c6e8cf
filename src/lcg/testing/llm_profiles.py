"""How popular local OpenAI-compatible servers answer `response_format` (for `ScriptedLlmServer`).

Each `ServerProfile` reproduces one server's handling of `response_format` on
`POST /v1/chat/completions`: which `type` values it accepts, and for the others the exact HTTP
status and error body it sends. `ScriptedLlmServer(profile="llama-cpp-python")` applies one; a
rejected request consumes no scripted reply. Where each fact comes from is written next to it:
the servers' own source, docs and bug trackers (read 2026-12), and what was
measured here. Where only the shape of a body is documented, the message text is reconstructed
from the validator that produces it; the comment says so.

Only `response_format` is emulated: the completions themselves still come from the scripted
reply queue, so a test decides what the "model" says.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["PROFILES", "Rejection", "ServerProfile", "profile"]


@dataclass(frozen=True)
class Rejection:
    """The HTTP answer to a request a server turns down."""

    status: int
    body: dict[str, Any]


# (response_format or None, the whole request body) -> a rejection, or None when accepted.
Check = Callable[[dict[str, Any] | None, dict[str, Any]], Rejection | None]


@dataclass(frozen=True)
class ServerProfile:
    """One server's `response_format` behaviour."""

    name: str
    accepts: frozenset[str]  # response_format.type values answered with a completion
    check: Check
    source: str  # where the behaviour is documented (repeated in the comments below)

    def reject(self, body: dict[str, Any]) -> Rejection | None:
        fmt = body.get("response_format")
        return self.check(fmt if isinstance(fmt, dict) else None, body)


def _type(fmt: dict[str, Any] | None) -> str | None:
    value = fmt.get("type") if fmt is not None else None
    return value if isinstance(value, str) else None


def _pydantic_literal_error(value: object, expected: str) -> str:
    """str(RequestValidationError) as FastAPI >= 0.116 renders it (one literal_error)."""
    error = {
        "type": "literal_error",
        "loc": ("body", "response_format", "type"),
        "msg": f"Input should be {expected}",
        "input": value,
        "ctx": {"expected": expected},
    }
    return f"1 validation error:\n  {error}\n"


# -- llama-cpp-python (`python -m llama_cpp.server`) ------------------------------------------
# llama_cpp/server/types.py: ChatCompletionRequestResponseFormat is a TypedDict whose `type` is
# Literal["text", "json_object"], with an optional `schema` that the server turns into a grammar
# (PR abetlen/llama-cpp-python#1122, "Add json schema mode"); json_schema was never merged
# (PR #1677 open). The body is validated inside the route, so the RequestValidationError reaches
# llama_cpp/server/errors.py RouteErrorHandler, which wraps every exception that is not a known
# pattern as HTTP 500 {"error": {"message": str(exc), "type": "internal_server_error", "param":
# null, "code": null}}. Measured here: json_schema -> 500 "Input should be
# 'text' or 'json_object'"; json_object works.
def _llama_cpp_python(fmt: dict[str, Any] | None, body: dict[str, Any]) -> Rejection | None:
    kind = _type(fmt)
    if fmt is None or kind in {"text", "json_object"}:
        return None
    message = _pydantic_literal_error(kind, "'text' or 'json_object'")
    error = {"message": message, "type": "internal_server_error", "param": None, "code": None}
    return Rejection(500, {"error": error})


# -- llama.cpp `llama-server` (tools/server, builds after PR ggml-org/llama.cpp#9527) -----------
# tools/server/README.md and utils.hpp oaicompat params parsing: `json_object` (optionally with
# `schema`) and `json_schema` (`json_schema.schema`) both become a grammar; "text" is plain.
# Another type is an std::invalid_argument, which the server answers with HTTP 400
# {"error": {"code": 400, "message": ..., "type": "invalid_request_error"}} (format_error_response
# with ERROR_TYPE_INVALID_REQUEST). Message text as quoted in
# https://github.com/ggml-org/llama.cpp/issues/9522, with json_schema added to the list by
# https://github.com/ggml-org/llama.cpp/pull/9527.
def _llama_server(fmt: dict[str, Any] | None, body: dict[str, Any]) -> Rejection | None:
    kind = _type(fmt)
    if fmt is None or kind in {"text", "json_object", "json_schema"}:
        return None
    message = (
        'response_format type must be one of "text", "json_object" or "json_schema", '
        f"but got: {kind}"
    )
    error = {"code": 400, "message": message, "type": "invalid_request_error"}
    return Rejection(400, {"error": error})


# -- llama.cpp `llama-server` before PR #9527 (builds up to ~b3800, September 2024) -------------
# https://github.com/ggml-org/llama.cpp/issues/9522 (build 3777) and
# https://github.com/ikawrakow/ik_llama.cpp/issues/778 quote the answer to json_schema verbatim:
# HTTP 500 {"error": {"code": 500, "message": "response_format type must be one of
# \"text\" or \"json_object\", but got: json_schema", "type": "server_error"}} (a
# std::runtime_error). Forks (ik_llama.cpp) shipped it for a year longer. The second 500 shape.
def _llama_server_b3800(fmt: dict[str, Any] | None, body: dict[str, Any]) -> Rejection | None:
    kind = _type(fmt)
    if fmt is None or kind in {"text", "json_object"}:
        return None
    message = f'response_format type must be one of "text" or "json_object", but got: {kind}'
    return Rejection(500, {"error": {"code": 500, "message": message, "type": "server_error"}})


# -- Ollama's OpenAI endpoint (`/v1/chat/completions`, Ollama >= 0.5) ---------------------------
# docs/openai.md lists `response_format` as supported; openai/openai.go fromChatRequest maps
# "json_object" to format "json" and "json_schema" to json_schema.schema, and ignores any other
# type (no error). Its errors are {"error": {"message", "type": "invalid_request_error", "param":
# null, "code": null}} with 400 — only a body that is not JSON at all gets one here.
def _ollama(fmt: dict[str, Any] | None, body: dict[str, Any]) -> Rejection | None:
    if "_unparsable" in body:
        error = {
            "message": "invalid character in request body",
            "type": "invalid_request_error",
            "param": None,
            "code": None,
        }
        return Rejection(400, {"error": error})
    return None


# -- LM Studio (0.3.x and 0.4.x server) ---------------------------------------------------------
# lmstudio-ai/lmstudio-bug-tracker #189 and #169: `json_object` -> HTTP 400
# {"error": "'response_format.type' must be 'json_schema'"} (0.3.x, where "text" was refused too,
# #307); LM Studio 0.4.19, quoted verbatim in willmiao/ComfyUI-Lora-Manager #1033 and
# LoadShine/tada #16: 400 {"error": "'response_format.type' must be 'json_schema' or 'text'"}.
# Note the error is a bare string, not an object. This profile is 0.4.x.
def _lm_studio(fmt: dict[str, Any] | None, body: dict[str, Any]) -> Rejection | None:
    kind = _type(fmt)
    if fmt is None or kind in {"json_schema", "text"}:
        return None
    return Rejection(400, {"error": "'response_format.type' must be 'json_schema' or 'text'"})


# -- vLLM (`vllm serve`, OpenAI-compatible server) ----------------------------------------------
# vllm/entrypoints/openai/protocol.py: ResponseFormat.type is Literal["text", "json_object",
# "json_schema", "structural_tag"]; json_schema is applied by guided decoding (docs
# "Structured Outputs"). A request that fails validation is answered 400 with ErrorResponse
# {"error": {"message", "type": "BadRequestError", "param", "code": 400}} (the nested shape of
# vLLM >= 0.10; older releases sent the same fields flat with "object": "error"). Message text
# reconstructed from the pydantic literal error.
def _vllm(fmt: dict[str, Any] | None, body: dict[str, Any]) -> Rejection | None:
    kind = _type(fmt)
    if fmt is None or kind in {"text", "json_object", "json_schema", "structural_tag"}:
        return None
    expected = "'text', 'json_object', 'json_schema' or 'structural_tag'"
    error = {
        "message": _pydantic_literal_error(kind, expected),
        "type": "BadRequestError",
        "param": None,
        "code": 400,
    }
    return Rejection(400, {"error": error})


PROFILES: dict[str, ServerProfile] = {
    p.name: p
    for p in (
        ServerProfile(
            "llama-cpp-python",
            frozenset({"text", "json_object"}),
            _llama_cpp_python,
            "llama_cpp/server/types.py + errors.py; measured here",
        ),
        ServerProfile(
            "llama-server",
            frozenset({"text", "json_object", "json_schema"}),
            _llama_server,
            "llama.cpp tools/server README + utils.hpp (after PR #9527)",
        ),
        ServerProfile(
            "llama-server-b3800",
            frozenset({"text", "json_object"}),
            _llama_server_b3800,
            "github.com/ggml-org/llama.cpp/issues/9522; github.com/ikawrakow/ik_llama.cpp/issues/778",
        ),
        ServerProfile(
            "ollama",
            frozenset({"text", "json_object", "json_schema"}),
            _ollama,
            "ollama docs/openai.md; openai/openai.go",
        ),
        ServerProfile(
            "lm-studio",
            frozenset({"text", "json_schema"}),
            _lm_studio,
            "lmstudio-bug-tracker #189/#307; ComfyUI-Lora-Manager #1033 (0.4.19)",
        ),
        ServerProfile(
            "vllm",
            frozenset({"text", "json_object", "json_schema", "structural_tag"}),
            _vllm,
            "vllm/entrypoints/openai/protocol.py; docs Structured Outputs",
        ),
    )
}


def profile(name: str) -> ServerProfile:
    """The profile called `name`; a `ValueError` lists the known ones."""
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown server profile {name!r} (known: {known})") from None
