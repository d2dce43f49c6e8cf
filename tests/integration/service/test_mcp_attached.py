"""Attached MCP mode against a fake JSON-RPC service on a real Unix socket (docs/api.md §mcp-attached).

The fake service answers by method name: `knowledge_status` echoes, `knowledge_rebuild_from_wal`
streams progress frames (spaced wider than the idle timeout in total) and a stale reply before
its answer, `knowledge_build_indices` never answers, `knowledge_clear_all` closes the connection
after reading the request, `knowledge_get_episodes` answers and then closes the connection,
`knowledge_delete_by_group` answers with a service error.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream
from anyio.streams.buffered import BufferedByteReceiveStream
from mcp import Client, MCPError

from lcg.service.attach import AttachedClient, AttachedServiceError
from lcg.service.mcp import AttachedBackend, build_server, parse_scopes, tool_table

pytestmark = pytest.mark.anyio

TIMEOUT_MS = 400
PROGRESS_GAP = (
    0.15  # four gaps (0.6 s) outlast one idle timeout: only the reset lets the call finish
)


@dataclass
class FakeService:
    path: str
    requests: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    connections: int = 0
    closed: anyio.Event = field(default_factory=anyio.Event)

    async def handle(self, stream: SocketStream) -> None:
        self.connections += 1
        conn = self.connections
        reader = BufferedByteReceiveStream(stream)
        async with stream:
            while True:
                try:
                    line = await reader.receive_until(b"\n", 1 << 20)
                except (anyio.IncompleteRead, anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                request = json.loads(line)
                self.requests.append((conn, request))
                if not await self.answer(stream, request):
                    break
        self.closed.set()  # only once our end is really closed

    async def answer(self, stream: SocketStream, request: dict[str, Any]) -> bool:
        async def send(message: dict[str, Any]) -> None:
            await stream.send(json.dumps(message).encode() + b"\n")

        method, rid = request["method"], request["id"]
        if method == "knowledge_status":
            await send({"jsonrpc": "2.0", "id": rid, "result": {"echo": request["params"]}})
        elif method == "knowledge_rebuild_from_wal":
            for i in range(4):
                await send(
                    {
                        "type": "progress",
                        "message": f"replayed {i + 1}000 mutations",
                        "mutations_replayed_so_far": (i + 1) * 1000,
                    }
                )
                await anyio.sleep(PROGRESS_GAP)
            await send({"type": "progress", "files_processed_so_far": 1})  # a frame with no message
            await send({"jsonrpc": "2.0", "id": rid - 1, "result": {"stale": True}})
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "result": {"success": True, "params": request["params"]},
                }
            )
        elif method == "knowledge_build_indices":
            await anyio.sleep_forever()
        elif method == "knowledge_clear_all":
            return False
        elif method == "knowledge_get_episodes":
            await send({"jsonrpc": "2.0", "id": rid, "result": {"episodes": []}})
            return False
        elif method == "knowledge_delete_by_group":
            await send(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "error": {
                        "code": -32001,
                        "message": "DB unavailable, recovery required",
                        "data": {"reason": "x"},
                    },
                }
            )
        return True


@pytest.fixture
def socket_dir() -> Iterator[Path]:
    directory = Path(tempfile.mkdtemp(prefix="lcg-", dir="/tmp"))  # AF_UNIX paths must be short
    try:
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.fixture
async def service(socket_dir: Path) -> AsyncIterator[FakeService]:
    fake = FakeService(str(socket_dir / "svc.sock"))
    listener = await anyio.create_unix_listener(fake.path)
    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, fake.handle)
        yield fake
        tg.cancel_scope.cancel()


@pytest.fixture
async def attached(service: FakeService) -> AsyncIterator[AttachedClient]:
    client = AttachedClient(service.path, TIMEOUT_MS)
    await client.connect()
    try:
        yield client
    finally:
        await client.aclose()


def mcp_client(
    client: AttachedClient, scope: str = "all", allow_remote_close: bool = False
) -> Client:
    scopes = parse_scopes(scope)
    server = build_server(
        AttachedBackend(client),
        tool_table(scopes, expose_close=allow_remote_close),
        scopes=scopes,
        always_bridge_progress=False,
    )
    return Client(server, mode="legacy")


async def test_calls_are_forwarded_as_numbered_json_rpc_requests(
    service: FakeService, attached: AttachedClient
) -> None:
    async with mcp_client(attached) as client:
        first = await client.call_tool("knowledge_status", {})
        second = await client.call_tool("knowledge_status", {"verbose": 1})
    assert first.structured_content == {"echo": {}}
    assert second.structured_content == {"echo": {"verbose": 1}}
    assert [r for _, r in service.requests] == [
        {"jsonrpc": "2.0", "id": 1, "method": "knowledge_status", "params": {}},
        {"jsonrpc": "2.0", "id": 2, "method": "knowledge_status", "params": {"verbose": 1}},
    ]
    assert service.connections == 1


async def test_progress_frames_are_forwarded_and_reset_the_idle_timeout(
    service: FakeService, attached: AttachedClient
) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with mcp_client(attached) as client:
        with anyio.fail_after(5):
            result = await client.call_tool(
                "knowledge_rebuild_from_wal", {"group_id": "g"}, progress_callback=on_progress
            )
            plain = await client.call_tool("knowledge_rebuild_from_wal", {})
    assert result.structured_content == {
        "success": True,
        "params": {"group_id": "g", "_progress_token": True},
    }
    assert plain.structured_content == {
        "success": True,
        "params": {},
    }  # no token: no streaming asked
    assert seen == [
        (1.0, None, "replayed 1000 mutations"),
        (2.0, None, "replayed 2000 mutations"),
        (3.0, None, "replayed 3000 mutations"),
        (4.0, None, "replayed 4000 mutations"),
        (5.0, None, None),
    ]


async def test_service_errors_become_tool_errors_verbatim(attached: AttachedClient) -> None:
    async with mcp_client(attached) as client:
        result = await client.call_tool("knowledge_delete_by_group", {"group_ids": ["g"]})
    assert result.is_error
    assert result.structured_content == {
        "code": -32001,
        "message": "DB unavailable, recovery required",
        "data": {"reason": "x"},
    }


async def test_a_silent_service_times_out_and_the_next_call_redials(
    service: FakeService, attached: AttachedClient
) -> None:
    async with mcp_client(attached) as client:
        with anyio.fail_after(5):
            result = await client.call_tool("knowledge_build_indices", {})
            after = await client.call_tool("knowledge_status", {})
    assert result.is_error and result.structured_content is not None
    assert result.structured_content["code"] == -32000
    assert result.structured_content["message"].startswith(
        f"attached service call timed out after {TIMEOUT_MS}ms with no response"
    )
    assert after.structured_content == {"echo": {}}
    assert service.connections == 2
    assert [r["method"] for _, r in service.requests].count("knowledge_build_indices") == 1


async def test_a_connection_lost_after_the_request_was_written_is_not_retried(
    service: FakeService, attached: AttachedClient
) -> None:
    with pytest.raises(AttachedServiceError) as caught:
        await attached.call("knowledge_clear_all", {"confirm": True})
    assert caught.value.message == "attached service closed the connection unexpectedly"
    assert [r["method"] for _, r in service.requests] == ["knowledge_clear_all"]  # sent once only
    assert await attached.call("knowledge_status", {}) == {"echo": {}}
    assert service.connections == 2  # the dead connection was replaced before the next call


async def test_a_write_to_a_broken_connection_is_retried_once_on_a_new_one(
    service: FakeService, attached: AttachedClient, caplog: pytest.LogCaptureFixture
) -> None:
    assert await attached.call("knowledge_get_episodes", {}) == {"episodes": []}
    with anyio.fail_after(5):
        await (
            service.closed.wait()
        )  # the service hung up after answering; the client has not noticed
    assert await attached.call("knowledge_status", {"n": 2}) == {"echo": {"n": 2}}
    assert any("write failed" in r.getMessage() for r in caplog.records)  # the retry path, not luck
    assert [(conn, r["method"]) for conn, r in service.requests] == [
        (1, "knowledge_get_episodes"),
        (2, "knowledge_status"),
    ]


async def test_when_the_retried_write_fails_too_the_error_names_both_failures(
    service: FakeService, attached: AttachedClient
) -> None:
    assert await attached.call("knowledge_get_episodes", {}) == {"episodes": []}
    with anyio.fail_after(5):
        await service.closed.wait()
    await anyio.Path(service.path).unlink()  # nothing to redial
    with pytest.raises(AttachedServiceError) as caught:
        await attached.call("knowledge_status", {})
    assert caught.value.code == -32000
    assert caught.value.message.startswith(
        f"failed to send the request to attached service at '{service.path}'"
    )
    assert (
        "the retry after redialling failed too: failed to connect to attached service"
        in caught.value.message
    )
    assert len(service.requests) == 1


async def test_connecting_to_a_missing_socket_names_the_path(socket_dir: Path) -> None:
    client = AttachedClient(str(socket_dir / "nobody.sock"), TIMEOUT_MS)
    with pytest.raises(AttachedServiceError) as caught:
        await client.connect()
    assert caught.value.message.startswith(
        f"failed to connect to attached service at '{socket_dir}/nobody.sock'"
    )


async def test_knowledge_close_is_hidden_unless_remote_close_is_allowed(
    attached: AttachedClient,
) -> None:
    async with mcp_client(attached) as client:
        hidden = [t.name for t in (await client.list_tools()).tools]
        with pytest.raises(MCPError) as caught:
            await client.call_tool("knowledge_close", {})
    assert "knowledge_close" not in hidden
    assert caught.value.code == -32601
    async with mcp_client(attached, allow_remote_close=True) as client:
        shown = [t.name for t in (await client.list_tools()).tools]
    assert "knowledge_close" in shown
