"""A scripted OpenAI-compatible chat-completions server that really listens (tests, benchmarks).

`ScriptedLlmServer` answers `POST /v1/chat/completions` (and any other POST path, e.g. an
Anthropic-style `/v1/messages`, through `RawReply`) and `GET /v1/models` on 127.0.0.1 (an
ephemeral port) and/or a Unix socket, from a FIFO queue of scripted replies or a callable
`(request_json) -> reply`. Each handler runs in its own thread, so a simulated latency
overlaps across concurrent calls. `profile=` makes it answer `response_format` as a real local
server does (llama-cpp-python, llama-server, Ollama, LM Studio, vLLM: `lcg.testing.llm_profiles`).
Standard library only (and lcg.testing).

    with ScriptedLlmServer([TextReply('{"entities": []}')]) as server:
        client = OpenAICompatClient(server.url)   # http://127.0.0.1:PORT/v1
        ...
        assert server.count == 1
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from lcg.testing.listener import JsonHandler, Listener
from lcg.testing.llm_profiles import ServerProfile
from lcg.testing.llm_profiles import profile as server_profile

__all__ = [
    "ErrorReply",
    "RawReply",
    "RecordedRequest",
    "Reply",
    "Responder",
    "ScriptedLlmServer",
    "TextReply",
]


@dataclass(frozen=True)
class TextReply:
    """A completion: `content` becomes choices[0].message.content.

    `finish_reason` "length" simulates truncation. Token counts default to rough estimates
    (4 characters a token) of the request's messages and of `content`.
    """

    content: str
    finish_reason: str = "stop"
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    latency_s: float = 0.0


@dataclass(frozen=True)
class ErrorReply:
    """An HTTP error: `status` with `body` (a string is wrapped as {"error": {"message": ...}})."""

    status: int
    body: str | dict[str, Any] = "scripted error"
    latency_s: float = 0.0


@dataclass(frozen=True)
class RawReply:
    """A verbatim JSON body with a status (for other API shapes, e.g. Anthropic /v1/messages)."""

    body: dict[str, Any]
    status: int = 200
    latency_s: float = 0.0


Reply = TextReply | ErrorReply | RawReply
# A callable responder gets the request body and returns a reply; a bare str is a TextReply.
Responder = Callable[[dict[str, Any]], "Reply | str"]


@dataclass(frozen=True)
class RecordedRequest:
    """One request the server received (rejected ones included)."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] = field(default_factory=dict)


def _estimate_tokens(text: str) -> int:
    return max(1, len(text) // 4)


def _prompt_text(body: dict[str, Any]) -> str:
    messages = body.get("messages")
    if not isinstance(messages, list):
        return ""
    return "".join(str(m.get("content", "")) for m in messages if isinstance(m, dict))


class ScriptedLlmServer(Listener):
    """A chat-completions endpoint scripted by a reply queue or a responder callable.

    Args:
        replies: the FIFO queue of replies (str = TextReply), or a responder callable.
        uds_path: also (or only, with `tcp=False`) listen on this Unix socket path.
        tcp: listen on 127.0.0.1 on an ephemeral port.
        latency_s: delay added to every reply (on top of a reply's own `latency_s`).
        reject_response_formats: `response_format.type` values answered with HTTP 400, as
            a generic server might; such requests consume no reply.
        profile: the name of a real server whose `response_format` answers (status, body,
            accepted types) to reproduce, e.g. "llama-cpp-python" (see `llm_profiles.PROFILES`);
            its rejections consume no reply either.
        model: the id `/v1/models` lists and completions report.

    An empty queue answers 500 "scripted server: no reply queued".
    """

    def __init__(
        self,
        replies: Iterable[Reply | str] | Responder | None = None,
        *,
        uds_path: str | os.PathLike[str] | None = None,
        tcp: bool = True,
        latency_s: float = 0.0,
        reject_response_formats: Iterable[str] = (),
        profile: str | None = None,
        model: str = "scripted-model",
    ) -> None:
        super().__init__(tcp=tcp, uds_path=uds_path)
        self._responder: Responder | None = None
        self._queue: deque[Reply | str] = deque()
        if callable(replies):
            self._responder = replies
        elif replies is not None:
            self._queue.extend(replies)
        self.latency_s = latency_s
        self.reject_response_formats = frozenset(reject_response_formats)
        self.profile: ServerProfile | None = None if profile is None else server_profile(profile)
        self.model = model
        self.recorded: list[RecordedRequest] = []
        # Seconds each POST spent in the server, from its headers being parsed to its reply being
        # written (body read, responder, simulated latency, JSON both ways): the model's side.
        self.service_s: list[float] = []
        self._cond = threading.Condition()

    # -- scripting and assertions ------------------------------------------------------------

    def push(self, *replies: Reply | str) -> None:
        """Append replies to the FIFO queue."""
        with self._cond:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        """Replies still queued."""
        with self._cond:
            return len(self._queue)

    @property
    def requests(self) -> list[dict[str, Any]]:
        """Bodies of the POST requests received, in arrival order."""
        with self._cond:
            return [r.body for r in self.recorded if r.method == "POST"]

    @property
    def count(self) -> int:
        """How many POST requests arrived."""
        return len(self.requests)

    @property
    def service_total_s(self) -> float:
        """Seconds spent serving POST requests so far (the sum of `service_s`)."""
        with self._cond:
            return sum(self.service_s)

    def wait_for(self, count: int, timeout: float = 5.0) -> bool:
        """Block until `count` POST requests have arrived (True) or `timeout` passes (False)."""
        with self._cond:
            return self._cond.wait_for(
                lambda: sum(r.method == "POST" for r in self.recorded) >= count, timeout
            )

    # -- addresses -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Base URL of the TCP listener, e.g. `http://127.0.0.1:PORT/v1`."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- lifecycle ---------------------------------------------------------------------------

    def _handler(self) -> type[JsonHandler]:
        return _make_handler(self)

    # -- request handling (server threads) -----------------------------------------------------

    def _record(self, request: RecordedRequest) -> None:
        with self._cond:
            self.recorded.append(request)
            self._cond.notify_all()

    def _reply_for(self, body: dict[str, Any]) -> Reply:
        if self.profile is not None:
            rejection = self.profile.reject(body)
            if rejection is not None:
                return RawReply(rejection.body, rejection.status)
        fmt = body.get("response_format")
        fmt_type = fmt.get("type") if isinstance(fmt, dict) else None
        if fmt_type in self.reject_response_formats:
            return ErrorReply(
                400,
                {
                    "error": {
                        "code": 400,
                        "type": "invalid_request_error",
                        "message": f"response_format {fmt_type} not supported",
                    }
                },
            )
        if self._responder is not None:
            reply: Reply | str = self._responder(body)
        else:
            with self._cond:
                if not self._queue:
                    return ErrorReply(500, "scripted server: no reply queued")
                reply = self._queue.popleft()
        return TextReply(reply) if isinstance(reply, str) else reply

    def _completion(self, body: dict[str, Any], reply: TextReply) -> dict[str, Any]:
        prompt = reply.prompt_tokens
        completion = reply.completion_tokens
        prompt = _estimate_tokens(_prompt_text(body)) if prompt is None else prompt
        completion = _estimate_tokens(reply.content) if completion is None else completion
        return {
            "id": f"chatcmpl-scripted-{self.count}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": str(body.get("model") or self.model),
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply.content},
                    "finish_reason": reply.finish_reason,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _make_handler(owner: ScriptedLlmServer) -> type[JsonHandler]:
    class Handler(JsonHandler):
        def do_GET(self) -> None:
            owner._record(RecordedRequest("GET", self.path, dict(self.headers.items())))
            if self.path.rstrip("/").endswith("/models"):
                entry = {"id": owner.model, "object": "model", "owned_by": "scripted"}
                self._send(200, {"object": "list", "data": [entry]})
            else:
                self._send(404, {"error": {"message": f"no route {self.path}"}})

        def do_POST(self) -> None:
            started = time.perf_counter()
            try:
                self._post()
            finally:
                with owner._cond:
                    owner.service_s.append(time.perf_counter() - started)

        def _post(self) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            try:
                body = json.loads(raw or b"{}")
            except ValueError:
                body = {"_unparsable": raw.decode(errors="replace")}
            if not isinstance(body, dict):
                body = {"_body": body}
            owner._record(RecordedRequest("POST", self.path, dict(self.headers.items()), body))
            try:
                reply = owner._reply_for(body)
            except Exception as exc:  # a broken responder becomes a 500 reply
                reply = ErrorReply(500, f"scripted responder failed: {exc!r}")
            delay = owner.latency_s + reply.latency_s
            if delay > 0:
                time.sleep(delay)  # simulated model latency, not synchronisation
            if isinstance(reply, TextReply):
                self._send(200, owner._completion(body, reply))
            elif isinstance(reply, RawReply):
                self._send(reply.status, reply.body)
            else:
                payload = reply.body
                if isinstance(payload, str):
                    payload = {"error": {"code": reply.status, "message": payload}}
                self._send(reply.status, payload)

    return Handler
