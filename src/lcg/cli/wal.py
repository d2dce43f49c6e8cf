"""`lcg wal dump|mark|marks|rebuild|recover|export|import`: WAL administration from the shell.

Each command calls one registry method: on the running service when one answers on the socket
(Kuzu allows one process per database), else on an engine opened here. Long runs show a
progress bar on stderr fed by the method's progress frames; the result is printed as JSON.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from lcg.cli.remote import existing_settings, service_client
from lcg.cli.staging import deliver, staged, workspace_settings
from lcg.config import load_settings
from lcg.engine import open_engine
from lcg.engine.recovery import open_or_degraded
from lcg.errors import InvalidRequestError
from lcg.service.registry import Context, dispatch

__all__ = ["call_method", "wal"]

console = Console(stderr=True)
Frame = Callable[[dict[str, Any]], None]


@contextlib.contextmanager
def _bar(label: str | None) -> Iterator[Frame | None]:
    """A transient progress bar fed by progress frames (None when the call is short)."""
    if label is None:
        yield None
        return
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task(escape(label), total=None)

        def frame(f: dict[str, Any]) -> None:
            if "total" in f:  # import: rows done of rows
                bar.update(task, completed=f.get("done", 0), total=f["total"])
            elif f.get("files_total"):  # a replay: files read of files
                bar.update(
                    task, completed=f.get("files_processed_so_far", 0), total=f["files_total"]
                )
            if f.get("message"):
                bar.update(task, description=escape(f"{label}: {f['message']}"))

        yield frame


def call_method(
    ctx: click.Context,
    socket_path: str | None,
    method: str,
    params: dict[str, Any],
    *,
    label: str | None = None,
    degraded_ok: bool = False,
    create: bool = False,
) -> dict[str, Any]:
    """Call `method` on the running service, or on an engine opened for this command (on an
    existing workspace unless `create`)."""
    home = ctx.obj.get("home") if ctx.obj else None
    client = service_client(home, socket_path)
    if client is not None:
        with client, _bar(label) as frame:
            return client.call(method, params, progress=frame)
    if create:
        settings = load_settings(overrides={"home": home} if home else {})
    else:
        settings = existing_settings(home)
    engine = open_or_degraded(settings) if degraded_ok else open_engine(settings)
    try:
        with _bar(label) as frame:

            async def run() -> dict[str, Any]:
                return await dispatch(engine, method, params, Context(progress=frame))

            return anyio.run(run)
    finally:
        engine.close()


def _print(result: Any) -> None:
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))


_SOCKET = click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Service socket to use when a service is running (default: the configured one).",
)
_GROUP = click.option("--group", "group_id", default="liminis", show_default=True, help="Group.")


@click.group()
def wal() -> None:
    """Administer the write-ahead log: dumps, marks, rebuilds, recovery."""


@wal.command()
@click.option("--group", "group_id", default=None, help="One group (default: every group).")
@click.option(
    "--target-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Empty or new directory (default: <home>/wal-compacted).",
)
@_SOCKET
@click.pass_context
def dump(
    ctx: click.Context, group_id: str | None, target_dir: str | None, socket_path: str | None
) -> None:
    """Write the current graph as a fresh, compacted WAL (knowledge_dump_wal)."""
    params: dict[str, Any] = {"group_id": group_id}
    if not target_dir:
        _print(call_method(ctx, socket_path, "knowledge_dump_wal", params, label="dump"))
        return
    # The method writes inside the workspace only: dump there, then move it where the user said.
    target = Path(target_dir).resolve()
    if target.exists() and (not target.is_dir() or any(target.iterdir())):
        raise InvalidRequestError(
            f"knowledge_dump_wal: target_dir '{target}' already exists and is not empty; supply "
            "a clean path or remove existing files first",
            field="target_dir",
        )
    settings = workspace_settings(ctx.obj.get("home") if ctx.obj else None)
    wal_root = settings.wal_dir.resolve()
    if target == wal_root or wal_root in target.parents or target in wal_root.parents:
        raise InvalidRequestError(
            f"knowledge_dump_wal: target_dir '{target}' overlaps the live WAL directory "
            f"'{wal_root}'; choose a path outside it",
            field="target_dir",
        )
    with staged(settings, target) as stand_in:
        params["target_dir"] = str(stand_in)
        result = call_method(ctx, socket_path, "knowledge_dump_wal", params, label="dump")
        _print(deliver(stand_in, target, result, "target_dir"))


@wal.command()
@click.argument("name")
@_GROUP
@click.option("--delete", is_flag=True, help="Delete the mark instead of creating it.")
@_SOCKET
@click.pass_context
def mark(
    ctx: click.Context, name: str, group_id: str, delete: bool, socket_path: str | None
) -> None:
    """Record the group's applied position as mark NAME (or --delete it)."""
    method = "knowledge_wal_mark_delete" if delete else "knowledge_wal_mark_create"
    params = {"name": name, "group_id": group_id}
    _print(call_method(ctx, socket_path, method, params, degraded_ok=delete))


@wal.command()
@_GROUP
@_SOCKET
@click.pass_context
def marks(ctx: click.Context, group_id: str, socket_path: str | None) -> None:
    """List the group's marks, with whether the WAL can still reach each one."""
    params = {"group_id": group_id}
    _print(call_method(ctx, socket_path, "knowledge_wal_mark_list", params, degraded_ok=True))


@wal.command()
@_GROUP
@click.option("--from-seq", type=click.IntRange(min=0), default=0, show_default=True)
@click.option("--to-seq", type=click.IntRange(min=0), default=None, help="Last seq (a mark's).")
@click.option("--force-clear", is_flag=True, help="Purge the group first if it holds data.")
@click.option("--dry-run", is_flag=True, help="Count what would be replayed; change nothing.")
@_SOCKET
@click.pass_context
def rebuild(
    ctx: click.Context,
    group_id: str,
    from_seq: int,
    to_seq: int | None,
    force_clear: bool,
    dry_run: bool,
    socket_path: str | None,
) -> None:
    """Replay one group's WAL (knowledge_rebuild_from_wal, synchronously, with progress)."""
    params = {
        "group_id": group_id,
        "from_seq": from_seq,
        "to_seq": to_seq,
        "force_clear": force_clear,
        "dry_run": dry_run,
    }
    label = None if dry_run else f"rebuild {group_id}"
    _print(call_method(ctx, socket_path, "knowledge_rebuild_from_wal", params, label=label))


@wal.command()
@click.option(
    "--strategy",
    type=click.Choice(["rebuild_from_workspace_wal", "drop_lbug_wal", "restore_from_backup"]),
    default=None,
    help="One strategy (knowledge_recover); default: knowledge_recover_full.",
)
@_SOCKET
@click.pass_context
def recover(ctx: click.Context, strategy: str | None, socket_path: str | None) -> None:
    """Recover a damaged database from the WAL (never silently lossy: the report says what)."""
    method, params = (
        ("knowledge_recover", {"strategy": strategy})
        if strategy
        else ("knowledge_recover_full", {})
    )
    _print(call_method(ctx, socket_path, method, params, label="recover", degraded_ok=True))


def _local_engine(ctx: click.Context) -> Any:
    """An engine on this command's workspace (the store `LCG_STORAGE` names), opened here: export
    and import hold the write lock for their whole run, so they are not service methods."""
    home = ctx.obj.get("home") if ctx.obj else None
    return open_engine(load_settings(overrides={"home": home} if home else {}))


@wal.command(name="export")
@click.argument("directory", type=click.Path(file_okay=False))
@click.pass_context
def export_(ctx: click.Context, directory: str) -> None:
    """Write every group's WAL as plain JSONL files under DIRECTORY (new or empty), from the
    embedded store or the server: `lcg wal import` loads it into the other mode."""
    from lcg.admin.walmove import export_wal

    engine = _local_engine(ctx)
    try:
        _print(export_wal(engine, Path(directory).resolve()))
    finally:
        engine.close()


@wal.command(name="import")
@click.argument("directory", type=click.Path(file_okay=False, exists=True))
@click.option(
    "--accept-damage",
    is_flag=True,
    help="Import a WAL with seqs missing or lines unreadable: what reads whole is loaded, "
    "and the replay reports the rest in wal_problems (refused without it).",
)
@click.pass_context
def import_(ctx: click.Context, directory: str, accept_damage: bool) -> None:
    """Load a `lcg wal export` DIRECTORY into this workspace's store (groups still empty)."""
    from lcg.admin.walmove import import_wal

    engine = _local_engine(ctx)
    try:
        with _bar("import") as _:
            result = import_wal(engine, Path(directory).resolve(), accept_damage=accept_damage)
        _print(result)
    finally:
        engine.close()
