"""The OpenAI-compatible provider keeps its connections across calls, one pool per event loop,
against the scripted server over HTTP and a Unix socket (counting the connections it accepts)."""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from lcg.extraction.llm import LlmRequest
from lcg.extraction.providers.openai_compat import OpenAICompatProvider
from lcg.testing.scripted_llm import ScriptedLlmServer

ANSWER = json.dumps({"entities": [{"name": "Ada Lovelace"}]})
REQUEST = LlmRequest(
    stage="entities",
    system="Extract entities.",
    user="Ada Lovelace worked with Babbage.",
    schema={"type": "object", "properties": {"entities": {"type": "array"}}},
    schema_name="entities",
    max_tokens=100,
)


@pytest.fixture(params=["http", "uds"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def server(transport: str, tmp_path: Path) -> Iterator[ScriptedLlmServer]:
    if transport == "http":
        scripted = ScriptedLlmServer(lambda body: ANSWER)
    else:
        scripted = ScriptedLlmServer(lambda body: ANSWER, uds_path=tmp_path / "llm.sock", tcp=False)
    with scripted:
        yield scripted


def provider_for(server: ScriptedLlmServer, transport: str) -> OpenAICompatProvider:
    if transport == "http":
        return OpenAICompatProvider(base_url=server.url, model="local")
    return OpenAICompatProvider(uds_path=str(server.uds_path), model="local")


async def calls(provider: OpenAICompatProvider, n: int) -> list[dict[str, Any] | None]:
    return [(await provider.complete(REQUEST)).data for _ in range(n)]


def wait_until(condition: Any, timeout: float = 5.0) -> bool:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


@pytest.mark.anyio
async def test_calls_from_one_loop_share_one_connection(
    server: ScriptedLlmServer, transport: str
) -> None:
    provider = provider_for(server, transport)
    assert await calls(provider, 8) == [json.loads(ANSWER)] * 8
    assert server.count == 8
    assert server.accepted == 1


@pytest.mark.anyio
async def test_a_server_restart_between_calls_does_not_fail_the_next_call(
    server: ScriptedLlmServer, transport: str
) -> None:
    provider = provider_for(server, transport)
    await provider.complete(REQUEST)
    server.stop()  # closes the kept-alive connection, as an exiting server process does
    server.start()  # the same port / socket path
    response = await provider.complete(REQUEST)
    assert response.data == json.loads(ANSWER)
    assert server.count == 2
    assert server.accepted == 2  # the stale connection was dropped, a new one opened


@pytest.mark.anyio
async def test_aclose_closes_the_connection_and_a_later_call_opens_another(
    server: ScriptedLlmServer, transport: str
) -> None:
    provider = provider_for(server, transport)
    await provider.complete(REQUEST)
    await provider.aclose()
    assert wait_until(lambda: server.open_connections == 0)
    await provider.complete(REQUEST)
    assert server.accepted == 2


def test_each_loop_has_its_own_client_closed_when_the_loop_ends(
    server: ScriptedLlmServer, transport: str
) -> None:
    """Two `anyio.run`s one after the other and two threads at once (folder ingestion): no
    client crosses loops, and each loop's connection is closed by that loop's shutdown."""
    provider = provider_for(server, transport)
    anyio.run(calls, provider, 3)
    assert provider._clients.loops() == 0  # closed by the loop's shutdown
    assert wait_until(lambda: server.open_connections == 0)
    anyio.run(calls, provider, 3)
    assert server.accepted == 2

    results: list[list[dict[str, Any] | None]] = []
    threads = [
        threading.Thread(target=lambda: results.append(anyio.run(calls, provider, 4)))
        for _ in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert results == [[json.loads(ANSWER)] * 4] * 2
    assert server.accepted == 4
    assert provider._clients.loops() == 0
    assert wait_until(lambda: server.open_connections == 0)


@pytest.mark.anyio
async def test_a_provider_dropped_while_its_loop_runs_does_not_break_the_next_ones_calls(
    server: ScriptedLlmServer, transport: str
) -> None:
    """The garbage collector must not close a dropped provider's sockets behind the loop's back:
    the next connections reuse those descriptor numbers, and the loop's stale registrations for
    them lost replies (calls hung until their timeout)."""
    dropped = provider_for(server, transport)
    async with anyio.create_task_group() as tg:
        for _ in range(8):
            tg.start_soon(dropped.complete, REQUEST)
    del dropped
    gc.collect()
    provider = OpenAICompatProvider(
        uds_path=str(server.uds_path) if transport == "uds" else None,
        base_url=server.url if transport == "http" else None,
        timeout_s=5.0,
    )
    with anyio.fail_after(10):
        async with anyio.create_task_group() as tg:
            for _ in range(16):
                tg.start_soon(provider.complete, REQUEST)
    assert server.count == 24
