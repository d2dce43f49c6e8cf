"""`lcg serve`: the JSON-RPC socket service in the foreground (logs and telemetry on stderr)."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import click

from lcg.cli.endpoint_options import (
    embedder_options,
    embedder_overrides,
    extractor_options,
    extractor_overrides,
)
from lcg.config import load_settings
from lcg.service.rpc.server import serve as serve_socket

if TYPE_CHECKING:
    from lcg.service.http import HttpService

__all__ = ["serve"]


@click.command()
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Unix socket to listen on (default: $LCG_SOCKET_PATH or <home>/service.sock).",
)
@click.option("--http", "http", is_flag=True, help="Also serve the HTTP API and browser UI.")
@click.option("--host", default=None, help="HTTP address (default: $LCG_HTTP_HOST or 127.0.0.1).")
@click.option("--port", type=int, default=None, help="HTTP port (default: $LCG_HTTP_PORT or 8471).")
@click.option(
    "--http-scope",
    default=None,
    help="Methods served over HTTP: comma list of read, write, cypher, admin, all "
    "(default: $LCG_HTTP_SCOPE or read,write).",
)
@click.option(
    "--http-no-token",
    "no_token",
    is_flag=True,
    help="Serve the HTTP API on loopback without a token (any local user can then read and "
    "write the graph): only on a machine with one user. Default: $LCG_HTTP_AUTH or token.",
)
@extractor_options
@embedder_options
@click.pass_context
def serve(
    ctx: click.Context,
    socket_path: str | None,
    http: bool,
    host: str | None,
    port: int | None,
    http_scope: str | None,
    no_token: bool,
) -> None:
    """Serve JSON-RPC on a Unix socket (and HTTP with --http) until SIGTERM/SIGINT or
    knowledge_close.

    With --http, the address to open is printed on stderr, with the workspace's token
    (<home>/http-token) in its fragment; API clients send 'Authorization: Bearer <token>'.
    """
    overrides: dict[str, Any] = {"http_host": host, "http_port": port, "http_scope": http_scope}
    if no_token:
        overrides["http_auth"] = "none"
    if ctx.obj.get("home"):
        overrides["home"] = ctx.obj["home"]
    overrides.update(extractor_overrides(ctx))
    overrides.update(embedder_overrides(ctx))
    if socket_path:
        overrides["socket_path"] = str(Path(socket_path).resolve())
    settings = load_settings(overrides=overrides)
    if not logging.getLogger().handlers:
        logging.basicConfig(
            level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
    if http:
        from lcg.service.http import serve_with_http  # imports FastAPI only for --http

        anyio.run(lambda: serve_with_http(settings, ready=_announce))
    else:
        anyio.run(lambda: serve_socket(settings))


def _announce(http: HttpService) -> None:
    """Where the UI is, and how API clients authenticate (once, on stderr)."""
    click.echo(f"lcg: browser UI and HTTP API at {http.browser_url}", err=True)
    if http.token_file is not None:
        click.echo(
            f"lcg: API clients send 'Authorization: Bearer <token>', the token in "
            f"{http.token_file}",
            err=True,
        )
    elif http.token is not None:
        click.echo("lcg: API clients and the page send the token of LCG_API_TOKEN", err=True)
    else:
        click.echo(
            "lcg: no token (--http-no-token / LCG_HTTP_AUTH=none): every local user can "
            "read and write this graph",
            err=True,
        )
