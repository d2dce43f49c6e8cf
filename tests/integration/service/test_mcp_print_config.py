"""`lcg mcp --print-config` prints a config that works as written: the MCP SDK's client starts
the printed command with the printed arguments and environment, as Claude Desktop, Claude Code
or Cursor would (no shell, another working directory), lists the tools and answers a call."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any, TextIO

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

LCG = Path(sys.executable).parent / "lcg"  # the installed console script, as a user runs it


def _printed(home: Path, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [str(LCG), "mcp", "--home", str(home), *args],
        capture_output=True,
        timeout=60,
        check=True,
    )
    config: dict[str, Any] = json.loads(done.stdout)
    assert set(config) == {"mcpServers"}
    server: dict[str, Any] = config["mcpServers"]["lcg"]
    return server


def test_the_printed_config_starts_lists_tools_and_answers(tmp_path: Path) -> None:
    home = tmp_path / "project" / ".lcg"
    server = _printed(home, "--print-config", "claude-desktop", "--scope", "read,write")
    assert Path(server["command"]).is_absolute() and Path(server["command"]).exists()
    assert server["args"] == ["mcp", "--scope", "read,write"]
    assert server["env"] == {"LCG_HOME": str(home)}
    elsewhere = tmp_path / "client"
    elsewhere.mkdir()
    params = StdioServerParameters(
        command=server["command"], args=server["args"], env=server["env"], cwd=elsewhere
    )
    with (tmp_path / "stderr.txt").open("w") as errlog:
        names, listed = anyio.run(_session, params, errlog)
    assert "knowledge_add_facts" in names and "knowledge_get_entity_timeline" in names
    assert listed.structured_content is not None
    assert [n["name"] for n in listed.structured_content["nodes"]] == ["Ada Lovelace"]
    assert (home / "db").exists()  # the workspace the config names, not the client's directory


async def _session(params: StdioServerParameters, errlog: TextIO) -> tuple[list[str], Any]:
    """Start the server as a client does; list the tools, write an entity, list entities."""
    with anyio.fail_after(60):
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            names = [t.name for t in (await session.list_tools()).tools]
            made = await session.call_tool("knowledge_assert_entity", {"name": "Ada Lovelace"})
            assert not made.is_error, made.content
            return names, await session.call_tool("knowledge_list_entities", {})


def test_each_client_gets_its_own_shape(tmp_path: Path) -> None:
    home = tmp_path / ".lcg"
    assert _printed(home, "--print-config") == _printed(home, "--print-config", "claude-desktop")
    code = _printed(home, "--print-config", "claude-code")
    assert code["type"] == "stdio" and code["args"] == ["mcp", "--scope", "all"]
    cursor = _printed(home, "--print-config", "cursor")
    assert "type" not in cursor and cursor["command"] == code["command"]
    assert not home.exists()  # printing a config creates nothing
