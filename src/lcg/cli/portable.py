"""`lcg export` / `lcg import`: the graph as a portable JSONL file (lcg.curation.portable).

Routed through the running service when one answers on the socket, else run on an engine opened
here. The methods accept paths inside the workspace only; the user's file, wherever it is, is
staged in the export directory (lcg.cli.staging). `lcg export` replaces an existing FILE.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import click

from lcg.cli.staging import deliver, staged, workspace_settings
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
    target = Path(path).resolve()
    settings = workspace_settings(ctx.obj.get("home") if ctx.obj else None)
    with staged(settings, target, ".jsonl") as stand_in:
        params = {"path": str(stand_in), "group_ids": list(groups) or None}
        result = call_method(ctx, socket_path, "knowledge_export_graph", params, label="export")
        result = deliver(stand_in, target, result, "path")
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))


@click.command("import")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@_SOCKET
@click.pass_context
def import_command(ctx: click.Context, path: str, socket_path: str | None) -> None:
    """Import a portable JSONL file through the WAL; rows already present are skipped."""
    source = Path(path).resolve()
    settings = workspace_settings(ctx.obj.get("home") if ctx.obj else None)
    with staged(settings, source, ".jsonl", create=True) as stand_in:
        shutil.copyfile(source, stand_in)
        params = {"path": str(stand_in)}
        result = call_method(
            ctx, socket_path, "knowledge_import_graph", params, label="import", create=True
        )
    click.echo(json.dumps({**result, "path": str(source)}, indent=2, ensure_ascii=False))
