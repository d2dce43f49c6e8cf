"""`lcg mcp --print-config [CLIENT]`: the MCP client config that starts this `lcg mcp` as written.

A config that names a bare `lcg` fails in a client (`spawn lcg ENOENT`): clients start servers
without the user's shell, so a virtualenv's `bin/` is not on their `PATH`. The printed config
names the absolute path of the `lcg` that is running (or, when it runs as `python -m`, this
interpreter with `-m lcg.cli`) and the workspace as an absolute `LCG_HOME`, so it works
wherever the client starts it (docs/cli.md, "Connecting an agent").
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["CLIENTS", "client_config", "lcg_command"]

# Where each client reads its servers from (all three take the `mcpServers` shape).
CLIENTS = {
    "claude-desktop": "Claude Desktop: add it to claude_desktop_config.json (Settings > "
    "Developer > Edit Config), then restart Claude Desktop.",
    "claude-code": "Claude Code: save it as .mcp.json in your project (or merge its "
    "mcpServers entry into an existing one).",
    "cursor": "Cursor: save it as .cursor/mcp.json in your project (or ~/.cursor/mcp.json "
    "for every project).",
}


def lcg_command() -> list[str]:
    """The absolute command line of the running `lcg`."""
    argv0 = Path(sys.argv[0])
    if argv0.name in ("lcg", "lcg.exe") and argv0.exists():
        return [str(argv0.absolute())]
    beside = Path(sys.executable).parent / "lcg"
    if beside.exists():
        return [str(beside.absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "lcg.cli"]


def client_config(client: str, args: list[str], home: Path) -> tuple[dict[str, Any], str]:
    """The config for `client` that runs `lcg <args>` on the workspace `home`, and a sentence
    saying where the client reads it from."""
    command, *prefix = lcg_command()
    server: dict[str, Any] = {
        "command": command,
        "args": [*prefix, *args],
        "env": {"LCG_HOME": str(home.absolute())},
    }
    if client == "claude-code":
        server = {"type": "stdio", **server}
    return {"mcpServers": {"lcg": server}}, CLIENTS[client]
