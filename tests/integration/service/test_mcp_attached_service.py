"""Attached MCP mode end to end: `liminis-context-graph --mcp-stdio --connect` in front of a real
`lcg serve`, which is killed and restarted between calls (docs/api.md §mcp-attached, the reconnect rule)."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from rpc_support import ServiceProcess, short_socket_dir, wait_healthy

pytestmark = pytest.mark.anyio


async def test_attached_mode_survives_a_restart_of_the_service(tmp_path: Path) -> None:
    with short_socket_dir() as directory:
        sock = directory / "s.sock"
        service = ServiceProcess(tmp_path, sock).start()
        params = StdioServerParameters(
            command=sys.executable,
            args=["-m", "lcg.cli.compat", "--mcp-stdio", "--connect", str(sock)],
            env={"PATH": os.environ.get("PATH", ""), "LCG_ATTACHED_CALL_TIMEOUT_MS": "20000"},
            cwd=tmp_path,
        )
        try:
            await anyio.to_thread.run_sync(wait_healthy, sock)
            with anyio.fail_after(120), (tmp_path / "mcp-stderr.txt").open("w") as errlog:
                async with (
                    stdio_client(params, errlog=errlog) as (read, write),
                    ClientSession(read, write) as session,
                ):
                    await session.initialize()
                    first = await session.call_tool("knowledge_assert_entity", {"name": "Apollo 8"})
                    assert not first.is_error, first.content

                    service.stop(signal.SIGKILL)  # no goodbye: the attached connection just breaks
                    service = ServiceProcess(tmp_path, sock).start()
                    await anyio.to_thread.run_sync(wait_healthy, sock)

                    # A break noticed while writing the request is retried once on a new
                    # connection; one noticed after the request went out is reported, not
                    # retried (the service may have acted on it). Either way the next call works.
                    maybe = await session.call_tool("knowledge_assert_entity", {"name": "Apollo 9"})
                    if maybe.is_error:
                        text = maybe.content[0].text  # type: ignore[union-attr]
                        assert "connection" in text.lower() or "closed" in text.lower(), text
                        again = await session.call_tool(
                            "knowledge_assert_entity", {"name": "Apollo 9"}
                        )
                        assert not again.is_error, again.content
                    listed = await session.call_tool("knowledge_list_entities", {})
                    assert not listed.is_error, listed.content
        finally:
            service.stop()
    assert listed.structured_content is not None
    names = sorted(n["name"] for n in listed.structured_content["nodes"])
    assert names == ["Apollo 8", "Apollo 9"]  # acknowledged before the kill, and exactly once after
