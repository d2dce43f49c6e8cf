"""One end-to-end smoke test: the real `liminis-context-graph --mcp-stdio` process over stdio."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

pytestmark = pytest.mark.anyio


async def test_the_stdio_server_lists_tools_and_writes_then_reads(tmp_path: Path) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "lcg.cli.compat", "--mcp-stdio", "--scope", "read,write"],
        env={
            "LCG_HOME": str(tmp_path / ".lcg"),
            "LCG_KUZU_BUFFER_POOL_MB": "256",
            "PATH": os.environ.get("PATH", ""),
        },
        cwd=tmp_path,
    )
    with anyio.fail_after(30), (tmp_path / "stderr.txt").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            assert init.server_info.name == "liminis-context-graph"
            names = [t.name for t in (await session.list_tools()).tools]
            assert "knowledge_assert_entity" in names and "knowledge_list_entities" in names
            assert "knowledge_query_cypher" not in names and "health_check" not in names
            created = await session.call_tool(
                "knowledge_assert_entity", {"name": "Katherine Johnson"}
            )
            assert not created.is_error, created.structured_content
            listed = await session.call_tool("knowledge_list_entities", {})
    assert listed.structured_content is not None
    assert [n["name"] for n in listed.structured_content["nodes"]] == ["Katherine Johnson"]
    assert json.loads(listed.content[0].text) == listed.structured_content  # type: ignore[union-attr]
    assert (tmp_path / ".lcg" / "db").is_dir()  # standalone mode opened its own database


def test_requests_piped_with_an_immediate_eof_are_still_answered(tmp_path: Path) -> None:
    # `printf ... | liminis-context-graph --mcp-stdio`: stdin ends before the call has run. The
    # SDK's stdio loop alone drops the answer; the drain before EOF must not.
    lines = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "knowledge_status", "arguments": {}},
        },
    ]
    done = subprocess.run(
        [sys.executable, "-m", "lcg.cli.compat", "--mcp-stdio"],
        input="".join(json.dumps(line) + "\n" for line in lines).encode(),
        capture_output=True,
        timeout=30,
        cwd=tmp_path,
        check=False,
        env={**os.environ, "LCG_HOME": str(tmp_path / ".lcg"), "LCG_KUZU_BUFFER_POOL_MB": "256"},
    )
    assert done.returncode == 0, done.stderr.decode()
    answers = {m["id"]: m for m in map(json.loads, done.stdout.decode().splitlines())}
    assert set(answers) == {1, 2}
    assert answers[2]["result"]["isError"] is False
    assert answers[2]["result"]["structuredContent"]["entity_count"] == 0


@pytest.mark.parametrize(
    ("args", "listed"),
    [
        (["-m", "lcg.cli", "mcp", "--scope", "read,write"], False),
        (["-m", "lcg.cli", "mcp", "--scope", "read,write", "--reference-scopes"], True),
        (["-m", "lcg.cli.compat", "--mcp-stdio", "--scope", "read,write"], True),
    ],
)
async def test_lcg_mcp_keeps_the_wipe_behind_admin_unless_asked_for_the_reference_scopes(
    tmp_path: Path, args: list[str], listed: bool
) -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=args,
        env={
            "LCG_HOME": str(tmp_path / ".lcg"),
            "LCG_KUZU_BUFFER_POOL_MB": "256",
            "PATH": os.environ.get("PATH", ""),
        },
        cwd=tmp_path,
    )
    with anyio.fail_after(30), (tmp_path / "stderr.txt").open("w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
    assert "knowledge_assert_entity" in names
    assert ("knowledge_clear_all" in names) is listed
