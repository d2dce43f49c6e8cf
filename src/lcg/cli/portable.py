"""`lcg export` / `lcg import`: the graph as a portable JSONL file (lcg.portable).

Routed through the running service when one answers on the socket (the path is made absolute
first: the service reads and writes it on the same machine), else run on an engine opened here.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from lcg.cli.wal import call_method

__all__ = ["export_command", "import_command"]

_SOCKET = click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Service socket to use when a service is running (default: the configured one).",
)


@click.command("export")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--group", "groups", multiple=True, help="Group to export (repeatable; default all).")
@_SOCKET
@click.pass_context
def export_command(
    ctx: click.Context, path: str, groups: tuple[str, ...], socket_path: str | None
) -> None:
    """Write the graph to PATH as portable JSONL (no embeddings)."""
    params = {"path": str(Path(path).resolve()), "group_ids": list(groups) or None}
    result = call_method(ctx, socket_path, "knowledge_export_graph", params, label="export")
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))


@click.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@_SOCKET
@click.pass_context
def import_command(ctx: click.Context, path: str, socket_path: str | None) -> None:
    """Import a portable JSONL file through the WAL; rows already present are skipped."""
    params = {"path": str(Path(path).resolve())}
    result = call_method(
        ctx, socket_path, "knowledge_import_graph", params, label="import", create=True
    )
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))
