"""`lcg serve`: the JSON-RPC socket service in the foreground (logs and telemetry on stderr)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import anyio
import click

from lcg.config import load_settings
from lcg.service.rpc.server import serve as serve_socket

__all__ = ["serve"]


@click.command()
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Unix socket to listen on (default: $LCG_SOCKET_PATH or <home>/service.sock).",
)
@click.pass_context
def serve(ctx: click.Context, socket_path: str | None) -> None:
    """Serve JSON-RPC on a Unix socket until SIGTERM/SIGINT or knowledge_close."""
    overrides: dict[str, Any] = {}
    if ctx.obj.get("home"):
        overrides["home"] = ctx.obj["home"]
    if socket_path:
        overrides["socket_path"] = str(Path(socket_path).resolve())
    settings = load_settings(overrides=overrides)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    anyio.run(lambda: serve_socket(settings))
