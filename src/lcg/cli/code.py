"""`lcg code ingest PATH`: a repository's structure, or its git history, into the graph
(lcg.code does the work; docs/code-graph.md).

Runs in this process with a progress bar; when a service answers on the socket (it owns the
database), the run is sent to it as `knowledge_code_ingest` and its summary printed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from lcg.cli.remote import service_client
from lcg.code.extract import INSTALL_HINT
from lcg.code.history import Commit, ingest_history
from lcg.code.ingest import ingest_tree
from lcg.config import load_settings
from lcg.engine import open_engine
from lcg.errors import LcgError
from lcg.models import DEFAULT_GROUP_ID

__all__ = ["code"]

console = Console(stderr=True)


def _tree_sitter_installed() -> bool:
    try:
        import tree_sitter_language_pack  # noqa: F401  only checks that the extra is installed
    except ImportError:
        return False
    return True


@click.group()
def code() -> None:
    """The code graph: a repository's symbols and their history."""


@code.command("ingest")
@click.argument("path", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("--group", "group_id", default=DEFAULT_GROUP_ID, show_default=True)
@click.option(
    "--history",
    default=None,
    is_flag=False,
    flag_value="all",
    metavar="[N|A..B]",
    help="Walk git history, oldest first, one episode per commit: all commits (no value), the "
    "latest N, or a range A..B. Re-runs walk only new commits.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON.")
@click.option("--socket", "socket_path", default=None, help="Service socket to use.")
@click.pass_context
def ingest_code(
    ctx: click.Context,
    path: Path,
    group_id: str,
    history: str | None,
    as_json: bool,
    socket_path: str | None,
) -> None:
    """Ingest the source files under PATH (Python, TypeScript/JavaScript, Go, Rust): symbols
    with signatures, first docstring lines and line ranges, never bodies. Re-runs write only
    what changed."""
    home = ctx.obj.get("home")
    started = time.monotonic()
    client = service_client(home, socket_path)
    if client is not None:
        params: dict[str, Any] = {"path": str(path.resolve()), "group_id": group_id}
        if history is not None:
            params["history"] = history
        with client:
            result = client.call("knowledge_code_ingest", params)
    else:
        if not _tree_sitter_installed():
            raise click.ClickException(INSTALL_HINT)
        engine = open_engine(load_settings(overrides={"home": home} if home else {}))
        try:
            result = anyio.run(_run_local, engine, path, group_id, history, as_json)
        except LcgError as exc:
            raise click.ClickException(str(exc)) from exc
        finally:
            engine.close()
    result["seconds"] = round(time.monotonic() - started, 3)
    if as_json:
        click.echo(json.dumps(result, indent=2))
        return
    _print_summary(result, history is not None)


async def _run_local(
    engine: Any, path: Path, group_id: str, history: str | None, quiet: bool
) -> dict[str, Any]:
    with Progress(
        TextColumn("[bold]code"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        console=console,
        disable=quiet,
    ) as progress:
        task = progress.add_task("", total=None)
        if history is not None:

            def on_commit(commit: Commit, i: int, n: int) -> None:
                progress.update(task, completed=i, total=n, description=escape(commit.subject[:60]))

            report = await ingest_history(engine, path, group_id, history, on_progress=on_commit)
            return report.to_dict()

        def on_file(name: str, i: int, n: int) -> None:
            progress.update(task, completed=i, total=n, description=escape(name))

        return (await ingest_tree(engine, path, group_id, on_progress=on_file)).to_dict()


def _print_summary(result: dict[str, Any], history: bool) -> None:
    if history:
        click.echo(
            f"{result['commits_walked']} commits walked, {result['episodes']} episodes written "
            f"in {result['seconds']:.1f} s"
        )
        added = sum(len(c["added"]) for c in result["per_commit"])
        removed = sum(len(c["removed"]) for c in result["per_commit"])
        click.echo(f"symbols added {added}, removed {removed}")
    else:
        click.echo(
            f"{result['files_seen']} files: {result['files_parsed']} parsed, "
            f"{result['files_unchanged']} unchanged, {result['files_deleted']} deleted "
            f"in {result['seconds']:.1f} s"
        )
        click.echo(
            f"symbols added {result['symbols_added']}, removed {result['symbols_removed']}, "
            f"signature changed {result['signatures_changed']}; facts started "
            f"{result['facts_started']}, ended {result['facts_ended']}; calls not resolved "
            f"within the repository {result['unresolved_calls']}"
        )
    for skipped in result["skipped"]:
        where = f"{skipped['commit'][:12]} " if "commit" in skipped else ""
        click.echo(f"skipped {where}{skipped['path']}: {skipped['reason']}", err=True)
