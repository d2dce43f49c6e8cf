"""One client's big request does not stall the others, and no answer is unbounded.

- A chunk of hundreds of kilobytes given to the offline extractor took its CPU on the event loop:
  `health_check` on another connection waited for the whole extraction. It now runs in a worker
  thread; the test checks the order of the answers (health first, the chunk still unanswered),
  not a duration.
- `num_results` and the other counts of the read methods had no upper bound (10^9 was accepted;
  a 20k-fact hub gave a 31 MB answer): a count over `MAX_RESULTS` is refused with an
  invalid-params error naming the field and the cap.
"""

from __future__ import annotations

import dataclasses
import json
import os
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from rpc_support import raw_connect, read_message, request, running_server, send_line, wait_settled
from ui_support import request as http_request
from ui_support import running_http

from lcg import Engine, InvalidRequestError, Settings
from lcg.embedding.base import Vectors
from lcg.embedding.hashing import HashEmbedder
from lcg.service.params import MAX_RESULTS
from lcg.service.registry import REGISTRY, dispatch
from lcg.service.rpc import protocol
from lcg.service.rpc.client import RpcClient, RpcError

SENTENCES = (
    "The Atlas project moved its code to GitHub. Alice Smith leads the Atlas project. "
    "Bob Jones fixed the Orion parser in March. "
)


class _CountingEmbedder(HashEmbedder):
    """The hash embedder, counting its calls: the pipeline's first one comes right after the
    extractor has found the chunk's entities."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def embed(self, texts: list[str]) -> Vectors:
        self.calls += 1
        return super().embed(texts)


def test_health_answers_while_a_big_chunk_is_being_extracted(settings: Settings) -> None:
    heuristic = dataclasses.replace(settings, extractor="heuristic")
    text = SENTENCES * (300_000 // len(SENTENCES))
    embedder = _CountingEmbedder()
    with running_server(heuristic, embedder=embedder) as (server, path, events):
        wait_settled(server)
        sock, reader = raw_connect(path, timeout=600)
        try:
            params = {"chunk_text": text, "chunk_id": "big", "source_file": "big.md"}
            send_line(sock, request("knowledge_process_chunk", params))
            # The server has read and parsed the line and started the call: it warns first.
            deadline = time.monotonic() + 300
            while not events.of_type("chunk_text_oversized") and time.monotonic() < deadline:
                time.sleep(0.01)
            assert events.of_type("chunk_text_oversized"), "the chunk was never started"
            before = embedder.calls
            with RpcClient(path, timeout=600) as other:
                assert other.call("health_check")["healthy"] is True
            # Health answered while the extractor was still reading the chunk (nothing was
            # embedded since it started), and the chunk's own answer is not in.
            assert embedder.calls == before, "health_check waited for the extraction"
            readable, _, _ = select.select([sock], [], [], 0)
            assert not readable, "health_check waited for the whole chunk"
            answer = read_message(reader)
            assert answer["result"]["success"] is True, answer
        finally:
            reader.close()
            sock.close()


def _integer_members() -> list[tuple[str, str]]:
    """(method, member) of every integer parameter of every method."""
    found = []
    for name, method in REGISTRY.items():
        props = method.params.model_json_schema().get("properties", {})
        for member, schema in props.items():
            if any(o.get("type") == "integer" for o in [schema, *schema.get("anyOf", [])]):
                found.append((name, member))
    return found


# Positions in the WAL, not sizes: they select what is replayed, and answer nothing bigger.
POSITIONS = {"from_seq", "to_seq"}
# Counts of results: at most MAX_RESULTS. The others have their own, smaller bounds.
COUNTS = {"num_results", "last_n"}
INTEGERS = [(m, f) for m, f in _integer_members() if f not in POSITIONS]


VALID = {"query": "x", "entity_uuid": "e", "source": "s.md", "since": "2024-01-01"}


def test_every_integer_parameter_is_a_known_count_or_bound() -> None:
    members = {f for _, f in INTEGERS}
    assert members == COUNTS | {"batch_size", "token_budget", "hops", "num_seeds"}, members
    assert sum(f in COUNTS for _, f in INTEGERS) >= 9


@pytest.mark.anyio
@pytest.mark.parametrize(("method", "member"), INTEGERS)
async def test_a_huge_count_or_size_is_refused(engine: Engine, method: str, member: str) -> None:
    declared = REGISTRY[method].params.model_fields
    valid = {k: v for k, v in VALID.items() if k in declared}  # what the method requires
    match = f"at most {MAX_RESULTS}" if member in COUNTS else "must be"
    with pytest.raises(InvalidRequestError, match=match) as caught:
        await dispatch(engine, method, {**valid, member: 10**9})
    assert caught.value.field == member
    if member in COUNTS:
        with pytest.raises(InvalidRequestError, match=f"at most {MAX_RESULTS}"):
            await dispatch(engine, method, {**valid, member: MAX_RESULTS + 1})


@pytest.mark.anyio
async def test_a_count_at_the_cap_is_served(engine: Engine) -> None:
    await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
    found = await dispatch(
        engine, "knowledge_find_entities", {"query": "Apollo", "num_results": MAX_RESULTS}
    )
    assert found["count"] == 1


def test_standalone_mcp_refuses_an_over_long_line_and_goes_on(tmp_path: Path) -> None:
    # `lcg mcp` read stdin without a limit (a 50 MB message peaked at 4 GB); now a line over
    # the socket's limit is dropped as it arrives and the next message is answered.
    def line(message: dict[str, Any]) -> bytes:
        return json.dumps(message).encode() + b"\n"

    huge = {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {
            "name": "knowledge_add_episode",
            "arguments": {"episode_body": "x" * (protocol.MAX_LINE_BYTES + 1)},
        },
    }
    stdin = b"".join(
        [
            line(
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "t", "version": "1"},
                    },
                }
            ),
            line({"jsonrpc": "2.0", "method": "notifications/initialized"}),
            line(huge),
            line(
                {
                    "jsonrpc": "2.0",
                    "id": 2,
                    "method": "tools/call",
                    "params": {"name": "knowledge_status", "arguments": {}},
                }
            ),
        ]
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    done = subprocess.run(
        [sys.executable, "-m", "lcg.cli", "mcp"],
        input=stdin,
        capture_output=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
        env={**env, "LCG_HOME": str(tmp_path / ".lcg"), "LCG_KUZU_BUFFER_POOL_MB": "256"},
    )
    answers = {m.get("id"): m for m in map(json.loads, done.stdout.splitlines())}
    assert set(answers) == {1, None, 2}, done.stderr.decode()[-2000:]
    # The dropped line is answered as JSON-RPC says for a message whose id cannot be read.
    assert answers[None]["error"] == {
        "code": -32700,
        "message": f"message refused: longer than {protocol.MAX_LINE_BYTES} bytes",
    }
    assert answers[2]["result"]["isError"] is False
    assert f"longer than {protocol.MAX_LINE_BYTES} bytes was refused" in done.stderr.decode()


def test_an_answer_over_the_limit_is_refused_and_the_connection_goes_on(
    settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A small limit stands for 16 MiB, so the graph stays small.
    monkeypatch.setattr(protocol, "MAX_ANSWER_BYTES", 4000)
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        with RpcClient(path, timeout=60) as client:
            for i in range(40):
                client.call("knowledge_assert_entity", {"name": f"Entity number {i}"})
            with pytest.raises(RpcError, match="ask for fewer results"):
                client.call("knowledge_list_entities", {})
            assert len(client.call("knowledge_list_entities", {"num_results": 2})["nodes"]) == 2


@pytest.mark.anyio
async def test_an_answer_over_the_limit_is_refused_over_http(
    settings: Settings, engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(protocol, "MAX_ANSWER_BYTES", 4000)
    for i in range(40):
        await dispatch(engine, "knowledge_assert_entity", {"name": f"Entity number {i}"})
    with running_http(settings, engine) as http:
        status, _, body = http_request(http, "POST", "/api/knowledge_list_entities", {})
        assert status == 400 and "ask for fewer results" in body["error"]["message"]
        status, _, body = http_request(
            http, "POST", "/api/knowledge_list_entities", {"num_results": 2}
        )
        assert status == 200 and len(body["nodes"]) == 2
