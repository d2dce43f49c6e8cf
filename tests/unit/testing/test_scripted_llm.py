"""The scripted chat-completions server: queue, responder, errors, rejection mode, UDS, latency,
and the real local servers' response_format profiles."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx2
import pytest

from lcg.testing.llm_profiles import PROFILES
from lcg.testing.scripted_llm import ErrorReply, RawReply, ScriptedLlmServer, TextReply


def _chat(url: str, **body: Any) -> httpx2.Response:
    return httpx2.post(f"{url}/chat/completions", json={"messages": [], **body}, timeout=10)


def test_queue_replies_in_order_then_500_when_empty() -> None:
    with ScriptedLlmServer(["first", TextReply("cut", finish_reason="length")]) as server:
        one = _chat(server.url).json()
        two = _chat(server.url).json()
        empty = _chat(server.url)
    assert one["choices"][0]["message"]["content"] == "first"
    assert one["choices"][0]["finish_reason"] == "stop"
    assert one["usage"]["completion_tokens"] >= 1
    assert two["choices"][0]["finish_reason"] == "length"
    assert empty.status_code == 500
    assert server.count == 3
    assert server.pending == 0
    assert server.wait_for(3, timeout=1)
    assert not server.wait_for(4, timeout=0.05)


def test_callable_responder_sees_the_request() -> None:
    with ScriptedLlmServer(lambda body: f"model={body['model']}") as server:
        reply = _chat(server.url, model="m1").json()
    assert reply["choices"][0]["message"]["content"] == "model=m1"
    assert server.requests[0]["model"] == "m1"


def test_error_and_raw_replies() -> None:
    with ScriptedLlmServer([ErrorReply(503, "overloaded"), RawReply({"ok": True}, 201)]) as server:
        err = _chat(server.url)
        raw = httpx2.post(f"{server.url}/messages", json={}, timeout=10)
    assert err.status_code == 503
    assert err.json()["error"]["message"] == "overloaded"
    assert (raw.status_code, raw.json()) == (201, {"ok": True})
    assert server.recorded[-1].path == "/v1/messages"


def test_rejected_response_format_consumes_no_reply() -> None:
    with ScriptedLlmServer(["ok"], reject_response_formats={"json_schema"}) as server:
        rejected = _chat(server.url, response_format={"type": "json_schema"})
        accepted = _chat(server.url, response_format={"type": "json_object"})
    assert rejected.status_code == 400
    assert "json_schema" in rejected.text
    assert accepted.json()["choices"][0]["message"]["content"] == "ok"


def test_unix_socket_and_models_route(tmp_path: Path) -> None:
    sock = tmp_path / "llm.sock"
    with ScriptedLlmServer(["via uds"], uds_path=sock, tcp=False, model="tiny") as server:
        with httpx2.Client(transport=httpx2.HTTPTransport(uds=str(sock))) as client:
            models = client.get("http://local/v1/models").json()
            reply = client.post("http://local/v1/chat/completions", json={}).json()
        with pytest.raises(RuntimeError):
            _ = server.url
    assert models["data"][0]["id"] == "tiny"
    assert reply["choices"][0]["message"]["content"] == "via uds"
    assert not sock.exists()


def test_latency_overlaps_across_concurrent_requests() -> None:
    with ScriptedLlmServer(lambda body: "x", latency_s=0.5) as server:
        started = time.monotonic()
        with ThreadPoolExecutor(6) as pool:
            codes = list(pool.map(lambda _: _chat(server.url).status_code, range(6)))
        elapsed = time.monotonic() - started
    assert codes == [200] * 6
    assert 0.5 <= elapsed < 2.5


def test_stopped_server_refuses_connections() -> None:
    server = ScriptedLlmServer(["x"]).start()
    url = server.url
    server.stop()
    with pytest.raises(httpx2.ConnectError):
        _chat(url)


@pytest.mark.parametrize("name", sorted(PROFILES))
def test_each_profile_accepts_exactly_its_response_format_types(name: str) -> None:
    profile = PROFILES[name]
    with ScriptedLlmServer(lambda body: "{}", profile=name) as server:
        statuses = {
            kind: _chat(server.url, response_format={"type": kind}).status_code
            for kind in ("text", "json_object", "json_schema")
        }
        plain = _chat(server.url).status_code
    assert {k for k, status in statuses.items() if status == 200} == (
        profile.accepts & set(statuses)
    )
    assert plain == 200  # no response_format at all is plain text everywhere


def test_llama_cpp_python_answers_json_schema_with_a_500_validation_body() -> None:
    with ScriptedLlmServer(["ok"], profile="llama-cpp-python") as server:
        rejected = _chat(server.url, response_format={"type": "json_schema"})
        accepted = _chat(server.url, response_format={"type": "json_object", "schema": {}})
    assert rejected.status_code == 500
    error = rejected.json()["error"]
    assert error["type"] == "internal_server_error"
    assert (error["param"], error["code"]) == (None, None)
    assert "Input should be 'text' or 'json_object'" in error["message"]
    assert "'response_format', 'type'" in error["message"]
    assert accepted.json()["choices"][0]["message"]["content"] == "ok"  # no reply consumed


def test_lm_studio_refuses_json_object_with_a_bare_string_error() -> None:
    with ScriptedLlmServer(lambda body: "{}", profile="lm-studio") as server:
        rejected = _chat(server.url, response_format={"type": "json_object"})
    assert rejected.status_code == 400
    assert rejected.json() == {"error": "'response_format.type' must be 'json_schema' or 'text'"}


def test_old_llama_server_and_vllm_error_shapes() -> None:
    with ScriptedLlmServer(lambda body: "{}", profile="llama-server-b3800") as server:
        old = _chat(server.url, response_format={"type": "json_schema"})
    with ScriptedLlmServer(lambda body: "{}", profile="vllm") as server:
        bogus = _chat(server.url, response_format={"type": "bogus"})
    assert old.status_code == 500
    assert old.json()["error"] == {
        "code": 500,
        "message": 'response_format type must be one of "text" or "json_object", but got: json_schema',
        "type": "server_error",
    }
    assert bogus.status_code == 400
    assert bogus.json()["error"]["type"] == "BadRequestError"
    assert bogus.json()["error"]["code"] == 400


def test_unknown_profile_names_the_known_ones() -> None:
    with pytest.raises(ValueError, match="llama-cpp-python"):
        ScriptedLlmServer(profile="nonesuch")
