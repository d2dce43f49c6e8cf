"""The `lcg` command line: a thin layer that builds settings, opens the engine and prints.

Every `LcgError` is turned into a one-line message and the error's `exit_code` by `main`; error
and user text is printed literally (never as Rich markup, which would eat `[fastembed]`).
The group's options (`--home`) are accepted after any subcommand too (`lcg status --home X`).
Commands that only read never create a workspace: where none exists they say so.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from lcg.admin.cypher import is_mutation
from lcg.admin.rebuild import rebuild_groups
from lcg.cli.code import code
from lcg.cli.endpoint_options import (
    embedder_options,
    embedder_overrides,
    extractor_options,
    extractor_overrides,
)
from lcg.cli.evaluate import eval_command
from lcg.cli.export_html import export_html
from lcg.cli.ingest import ingest
from lcg.cli.mcpconfig import CLIENTS, client_config
from lcg.cli.models import models
from lcg.cli.portable import export_command, import_command
from lcg.cli.query import QUERY_COMMANDS
from lcg.cli.remote import existing_settings, service_client
from lcg.cli.serve import serve
from lcg.cli.wal import wal
from lcg.config import load_settings
from lcg.engine import Engine, open_engine
from lcg.engine.recovery import is_lock_conflict
from lcg.errors import LcgError, StorageError
from lcg.fsmodes import private_umask
from lcg.service.registry import dispatch
from lcg.wal.lock import WalLockedError

__all__ = ["cli", "main"]

T = TypeVar("T")
console = Console(stderr=True)


class DatabaseInUseError(LcgError):
    """`lcg mcp` found the database locked and no service to attach to; says what to do."""

    wire_prefix: ClassVar[str] = ""


def _engine(ctx: click.Context, *, create: bool = False) -> Engine:
    """An engine on the workspace; unless `create`, one that must already exist."""
    home = ctx.obj.get("home")
    if create:
        return open_engine(load_settings(overrides={"home": home} if home else {}))
    return open_engine(existing_settings(home))


def _run(engine: Engine, fn: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        return anyio.run(fn)
    finally:
        engine.close()


def _print(result: Any) -> None:
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))


@click.group()
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    default=None,
    help="State directory (default: $LCG_HOME or ./.lcg).",
)
@click.version_option(package_name="lcg")
@click.pass_context
def cli(ctx: click.Context, home: str | None) -> None:
    """lcg: a local-first, bi-temporal context graph."""
    ctx.ensure_object(dict)
    ctx.obj["home"] = home


_SOCKET_OPTION = click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Service socket to use when a service is running (default: the configured one).",
)


def _remote(
    ctx: click.Context, socket_path: str | None, method: str, params: dict[str, Any]
) -> bool:
    """Call `method` on a running service and print the result; False when none answers."""
    client = service_client(ctx.obj.get("home"), socket_path)
    if client is None:
        return False
    with client:
        _print(client.call(method, params))
    return True


@cli.command()
@_SOCKET_OPTION
@click.pass_context
def status(ctx: click.Context, socket_path: str | None) -> None:
    """Print knowledge_status as JSON (from the running service, if there is one)."""
    if _remote(ctx, socket_path, "knowledge_status", {}):
        return
    engine = _engine(ctx)
    _print(_run(engine, lambda: dispatch(engine, "knowledge_status", {})))


@cli.command()
@click.argument("query")
@_SOCKET_OPTION
@click.pass_context
def cypher(ctx: click.Context, query: str, socket_path: str | None) -> None:
    """Run one Cypher statement (knowledge_query_cypher) and print the rows."""
    if _remote(ctx, socket_path, "knowledge_query_cypher", {"query": query}):
        return
    engine = _engine(ctx, create=is_mutation(query))
    _print(_run(engine, lambda: dispatch(engine, "knowledge_query_cypher", {"query": query})))


@cli.command()
@click.option(
    "--group",
    "groups",
    multiple=True,
    help="Group to rebuild (repeatable; default: every group with a WAL).",
)
@click.option(
    "--force-clear/--no-force-clear",
    default=True,
    show_default=True,
    help="Purge a group that holds data before replaying it.",
)
@click.option("--dry-run", is_flag=True, help="Count what would be replayed; change nothing.")
@click.pass_context
def rebuild(ctx: click.Context, groups: tuple[str, ...], force_clear: bool, dry_run: bool) -> None:
    """Re-derive groups of the graph from the write-ahead log."""
    engine = _engine(ctx)
    targets = list(groups) or engine.parts.wal.groups()
    if not targets:
        raise click.ClickException(f"no WAL groups under {engine.parts.wal.root}")

    async def run_all() -> list[dict[str, Any]]:
        with Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            TextColumn("{task.completed} ops"),
            TimeElapsedColumn(),
            console=console,
            transient=True,
        ) as bar:
            task = bar.add_task(escape(f"rebuild {', '.join(targets)}"), total=None)

            def progress(frame: dict[str, Any]) -> None:
                bar.update(task, completed=frame.get("mutations_replayed_so_far", 0))

            # One engine call for all groups, under one hold of the write lock.
            return await rebuild_groups(
                engine, targets, force_clear=force_clear, dry_run=dry_run, progress=progress
            )

    for result in _run(engine, run_all):
        console.print(
            f"[bold]{escape(result['group_id'])}[/]: {result['mutations_replayed']} operations "
            f"replayed ({escape(str(result.get('replay_mode')))}), {result['failed_lines']} "
            f"failed, {result['unparseable_lines']} unparseable, in "
            f"{result.get('duration_seconds')} s"
        )
        if result.get("fidelity_warning"):
            console.print(f"[yellow]warning:[/] {escape(result['fidelity_warning'])}")
        _print(result)


@cli.command()
@click.option(
    "--dir",
    "directory",
    type=click.Path(file_okay=False),
    default=".lcg-demo",
    show_default=True,
    help="Workspace for the demo; it is reset on every run.",
)
def demo(directory: str) -> None:
    """Build a small bi-temporal graph from the bundled examples and show what it knows.

    20 short articles about a fictional software company (examples/demo/) and a dated changelog
    (examples/changelog/atlas.md), offline unless an LLM is configured.
    """
    from lcg.cli.demo import run_demo

    run_demo(Path(directory), console)


cli.add_command(serve)
cli.add_command(export_html)
cli.add_command(wal)
cli.add_command(export_command)
cli.add_command(import_command)
cli.add_command(ingest)
cli.add_command(eval_command)
cli.add_command(models)
cli.add_command(code)
for _query in QUERY_COMMANDS:
    cli.add_command(_query)


@cli.command("mcp")
@click.option(
    "--scope",
    default="all",
    show_default=True,
    help="Tools to expose: comma list of read, write, cypher, admin, all.",
)
@click.option(
    "--connect",
    "socket_path",
    default=None,
    metavar="SOCKET",
    help="Attached mode: forward every call to the lcg service listening on SOCKET.",
)
@click.option(
    "--allow-remote-close",
    is_flag=True,
    help="Attached mode: expose knowledge_close (stops the remote service).",
)
@click.option(
    "--reference-scopes",
    is_flag=True,
    help="Group tools by the reference's scopes (knowledge_clear_all in write); by default "
    "destructive tools need admin.",
)
@click.option(
    "--print-config",
    "print_config",
    type=click.Choice(list(CLIENTS)),
    is_flag=False,
    flag_value="claude-desktop",
    default=None,
    help="Print the MCP client config that starts this command on this workspace (the "
    "absolute path of this lcg, LCG_HOME) and exit; default client: claude-desktop.",
)
@extractor_options
@embedder_options
@click.pass_context
def mcp_command(
    ctx: click.Context,
    scope: str,
    socket_path: str | None,
    allow_remote_close: bool,
    reference_scopes: bool,
    print_config: str | None,
) -> None:
    """Serve the knowledge tools over MCP on stdin/stdout (logs go to stderr).

    When the workspace's service answers on its socket (`lcg serve` owns the database), calls
    are forwarded to it, as with --connect; otherwise the database is opened here.
    """
    home = ctx.obj.get("home")
    if print_config is not None:
        settings = load_settings(overrides={"home": home} if home else {})
        args = ["mcp", "--scope", scope]
        if socket_path is not None:
            args += ["--connect", str(Path(socket_path).absolute())]
        if reference_scopes:
            args.append("--reference-scopes")
        config, where = client_config(print_config, args, settings.home)
        click.echo(json.dumps(config, indent=2))
        click.echo(where, err=True)
        return

    from lcg.cli.mcp_stdio import serve_mcp  # imports the MCP SDK only for this command

    overrides: dict[str, Any] = {"home": home} if home else {}
    overrides.update(extractor_overrides(ctx))
    overrides.update(embedder_overrides(ctx))
    if socket_path is None:
        client = service_client(home)  # the detection `lcg status` and `lcg ingest` use
        if client is not None:
            with client:
                socket_path = str(client.socket_path)
            click.echo(f"lcg mcp: attached to the running lcg service at {socket_path}", err=True)
    try:
        serve_mcp(
            scope,
            socket_path,
            allow_remote_close,
            overrides,
            prog="lcg mcp",
            reference_scopes=reference_scopes,
        )
    except (StorageError, WalLockedError) as exc:
        # Another process holds the workspace: Kuzu's file lock on the database, or (taken
        # first, since open_engine locks the WAL root before opening the database) the WAL lock.
        held = isinstance(exc, WalLockedError) or is_lock_conflict(exc)
        if socket_path is not None or not held:
            raise
        settings = load_settings(overrides={"home": home} if home else {})
        raise DatabaseInUseError(
            f"the database {settings.db_path} is in use by another process, and no lcg "
            f"service answers on {settings.socket_path}. Either stop that process, or run "
            f"`lcg serve` on this workspace (`lcg mcp` then attaches to it by itself; "
            f"`lcg mcp --connect SOCKET` names another socket). ({exc.message.splitlines()[0]})"
        ) from exc


def _set_home(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
    if value is not None:
        ctx.find_root().obj["home"] = value


def _accept_group_options(group: click.Group) -> None:
    """Give every subcommand (nested ones too) the group's `--home`, so `lcg status --home X`
    means `lcg --home X status`; the later one wins when both are given."""
    for command in group.commands.values():
        if not any("--home" in getattr(p, "opts", ()) for p in command.params):
            command.params.append(
                click.Option(
                    ["--home"],
                    type=click.Path(file_okay=False),
                    expose_value=False,
                    callback=_set_home,
                    help="State directory (same as `lcg --home`).",
                )
            )
        if isinstance(command, click.Group):
            _accept_group_options(command)


_accept_group_options(cli)


def main() -> None:
    private_umask()  # the database's own files too: nothing lcg creates is for other users
    try:
        cli.main(standalone_mode=False)
    except click.exceptions.Abort:
        console.print("aborted")
        sys.exit(130)
    except click.ClickException as exc:
        exc.show()
        sys.exit(exc.exit_code)
    except LcgError as exc:
        console.print(
            f"[red]error:[/] {escape(exc.wire_message())}", highlight=False, soft_wrap=True
        )
        sys.exit(exc.exit_code)
