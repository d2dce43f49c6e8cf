"""`lcg ingest PATH...`: sync a folder of documents into the graph (lcg.folder does the work).

Calls go to the running service when one answers on the socket (it owns the database), else to
an engine opened in this process. The command checks the extractor and the embedder with one
real request each before a long run, shows a progress bar, prints a summary, and exits non-zero
when any file failed.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

from lcg.cli.remote import service_client
from lcg.config import Settings, load_settings
from lcg.engine import Engine, open_engine
from lcg.errors import LcgError
from lcg.extraction.select import UNCONFIGURED_MESSAGE, plan_llm
from lcg.folder.documents import DocumentKind
from lcg.folder.preflight import PreflightError, check_embedder, check_extractor
from lcg.folder.sync import IngestStats, SyncPlan, estimate, plan_sync, run_sync
from lcg.folder.syncstate import SyncState
from lcg.folder.walk import DEFAULT_GLOBS, SourceFile, scan_sources
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.registry import dispatch
from lcg.service.rpc.client import RpcClient

__all__ = ["ingest"]

console = Console(stderr=True)


class _EngineCaller:
    """Runs methods in this process."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        return await dispatch(self.engine, method, params)


class _ServiceCaller:
    """Runs methods on the service, one socket connection per concurrent call."""

    def __init__(self, socket_path: Path) -> None:
        self.socket_path = socket_path
        self._idle: list[RpcClient] = []

    async def call(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        client = self._idle.pop() if self._idle else RpcClient(self.socket_path, timeout=None)
        try:
            result = await anyio.to_thread.run_sync(client.call, method, params)
        except BaseException:
            client.close()
            raise
        self._idle.append(client)
        return result

    def close(self) -> None:
        for client in self._idle:
            client.close()


def _summary_line(stats: IngestStats) -> str:
    """The running totals, each label saying exactly what it counts.

    `entity mentions` adds up what every chunk kept (a name in three chunks counts three);
    `new entities` is what this run added to the graph, the number `lcg status` grows by.
    """
    cost = f" · ${stats.cost_usd:.4f}" if stats.cost_usd is not None else ""
    return (
        f"{stats.chunks_done}/{stats.chunks_total} chunks · {stats.entities} entity mentions "
        f"({stats.entities_created} new entities) · {stats.facts} facts inserted · "
        f"{stats.llm_calls} LLM calls · {stats.input_tokens + stats.output_tokens} tokens{cost}"
    )


def _extractor_for_run(
    settings: Settings, home: str | None, socket_path: str | None
) -> dict[str, Any]:
    """Which extractor a run would use, without calling it: the running service's (it does the
    extraction when it answers), else this environment's. Keys: where, kind, description,
    warning (None, or why a run would stop)."""
    client = service_client(home, socket_path)
    if client is not None:
        with client:
            extractor = client.call("knowledge_status").get("extractor") or {}
        where = "service"
        kind = extractor.get("kind") or "llm"
        configured = kind == "heuristic" or bool(extractor.get("configured"))
        model = ":".join(str(p) for p in (extractor.get("provider"), extractor.get("model")) if p)
    else:
        where = "local"
        kind = settings.extractor
        plan = None if kind == "heuristic" else plan_llm(settings)
        configured = kind == "heuristic" or plan is not None
        model = f"{plan.provider}:{plan.model} (from {plan.source})" if plan else ""
    if kind == "heuristic":
        description = "heuristic extractor (offline, no model: no LLM calls)"
    elif configured:
        description = f"LLM extractor {model}"
    else:
        description = "LLM extractor, but none is configured"
    warning = None if configured else f"a run would stop: {UNCONFIGURED_MESSAGE}"
    where_text = "the running service's" if where == "service" else "this environment's"
    return {
        "where": where,
        "kind": kind,
        "description": f"{description} ({where_text})",
        "warning": warning,
    }


def _print_plan(
    plan: SyncPlan, extractor: dict[str, Any], as_json: bool, single_call_max_chars: int
) -> None:
    info = estimate(plan, single_call_max_chars, llm=extractor["kind"] != "heuristic")
    if as_json:
        click.echo(json.dumps({"dry_run": True, "extractor": extractor, **info}, indent=2))
        return
    click.echo(
        f"{info['files']} files: {info['to_ingest']} to ingest, {info['unchanged']} unchanged, "
        f"{info['unreadable']} unreadable, {info['to_prune']} to prune"
    )
    click.echo(f"extractor: {extractor['description']}")
    if extractor["warning"]:
        click.echo(f"warning: {extractor['warning']}", err=True)
    click.echo(
        f"{info['chunks']} chunks → about {info['llm_calls']} LLM calls and "
        f"{info['input_tokens']} input tokens"
    )
    for f in plan.of("new", "changed"):
        click.echo(f"  {f.action:8} {f.source.source_file} ({len(f.chunks)} chunks)")
    for f in plan.of("failed"):
        click.echo(f"  failed   {f.source.source_file}: {f.error}")
    for name in plan.removed:
        click.echo(f"  prune    {name}")
    if info["undated_files"]:
        click.echo(
            "Dated only by modification time (add front matter `date:` or a date in the name):"
        )
        for name in info["undated_files"]:
            click.echo(f"  {name}")
    _print_notes(info["notes"])


def _print_notes(notes: list[dict[str, str]]) -> None:
    for note in notes:
        click.echo(f"warning: {note['source_file']}: {note['note']}", err=True)


_SKIPPED_SHOWN = 10


def _print_skipped(skipped: list[SourceFile], globs: tuple[str, ...]) -> None:
    """Which files were left out because no --glob takes them (on stderr)."""
    if not skipped:
        return
    click.echo(
        f"skipped {len(skipped)} file{'s' if len(skipped) != 1 else ''} of a type lcg does not "
        f"ingest (taken: "
        f"{' '.join(globs)}; --glob adds more):",
        err=True,
    )
    for source in skipped[:_SKIPPED_SHOWN]:
        click.echo(f"  {source.source_file}", err=True)
    if len(skipped) > _SKIPPED_SHOWN:
        click.echo(f"  ... and {len(skipped) - _SKIPPED_SHOWN} more", err=True)


def _print_outside(outside: list[SourceFile]) -> None:
    """Which symbolic links were refused because they lead out of their folder (on stderr)."""
    if not outside:
        return
    count = f"{len(outside)} symbolic link{'s' if len(outside) != 1 else ''}"
    click.echo(f"skipped {count} leading outside the folder (not followed):", err=True)
    for source in outside[:_SKIPPED_SHOWN]:
        click.echo(f"  {source.source_file}", err=True)
    if len(outside) > _SKIPPED_SHOWN:
        click.echo(f"  ... and {len(outside) - _SKIPPED_SHOWN} more", err=True)


def _print_summary(stats: IngestStats, seconds: float, as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps({**stats.to_dict(), "seconds": round(seconds, 3)}, indent=2))
        return
    click.echo(
        f"{stats.files_done} files ingested, {stats.files_skipped} unchanged, "
        f"{stats.files_pruned} pruned, {stats.files_failed} failed in {seconds:.1f} s"
    )
    click.echo(_summary_line(stats))
    if stats.undated_files:
        click.echo(f"{len(stats.undated_files)} files dated only by modification time:")
        for name in stats.undated_files:
            click.echo(f"  {name}")
    _print_notes(stats.notes)
    for failure in stats.failures:
        click.echo(f"FAILED {failure['source_file']}: {failure['error']}", err=True)


async def _preflight_local(settings: Settings, engine: Engine, quiet: bool) -> None:
    for line in (await check_extractor(settings), await check_embedder(engine.parts.embedder)):
        if not quiet:
            console.print(f"preflight: {line}", markup=False, highlight=False)


async def _preflight_remote(settings: Settings, status: dict[str, Any], quiet: bool) -> None:
    """The service probed its embedder when it started; its extractor is probed here with this
    environment's settings when they name the same kind, else its status must say it is
    configured."""
    extractor = status.get("extractor") or {}
    if extractor.get("kind") == "heuristic":
        line = "service uses the heuristic extractor (offline, no model)"
    elif settings.extractor != "heuristic" and plan_llm(settings) is not None:
        line = await check_extractor(settings)
    elif extractor.get("configured"):
        line = f"service extractor {extractor.get('provider')} is configured (not probed here)"
    else:
        raise PreflightError(f"the service's extractor is not configured: {UNCONFIGURED_MESSAGE}")
    if not quiet:
        console.print(f"preflight: {line}", markup=False, highlight=False)


async def _run(
    caller: Any, plan: SyncPlan, state: SyncState, concurrency: int, quiet: bool
) -> IngestStats:
    with Progress(
        TextColumn("[bold]ingest"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.description}"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
    ) as progress:
        task = progress.add_task("", total=sum(len(f.chunks) for f in plan.of("new", "changed")))

        def show(stats: IngestStats) -> None:
            progress.update(
                task,
                completed=stats.chunks_done,
                description=escape(f"{stats.files_done} files · " + _summary_line(stats)),
            )

        return await run_sync(caller, plan, state, concurrency=concurrency, on_progress=show)


@click.command()
@click.argument("paths", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--group", "group_id", default=DEFAULT_GROUP_ID, show_default=True)
@click.option(
    "--glob",
    "globs",
    multiple=True,
    help=f"Files to take (repeatable; default: {' '.join(DEFAULT_GLOBS)}).",
)
@click.option("--exclude", "excludes", multiple=True, help="gitignore-style pattern to skip.")
@click.option("--concurrency", default=4, show_default=True, type=click.IntRange(1, 64))
@click.option("--prune", is_flag=True, help="Delete the episodes of files that no longer exist.")
@click.option(
    "--dry-run",
    is_flag=True,
    help="Print the plan, the extractor a run would use and estimates; call no model.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the plan or summary as JSON.")
@click.option("--socket", "socket_path", default=None, help="Service socket to use.")
@click.option("--max-chars", type=click.IntRange(300), default=None, help="Chunk size limit.")
@click.option(
    "--skip-preflight", is_flag=True, help="Do not probe the extractor and embedder first."
)
@click.option(
    "--as",
    "kind",
    type=click.Choice(["auto", "document", "changelog"]),
    default="auto",
    show_default=True,
    help="How to read Markdown/text files: recognise changelogs (auto), or force one reading.",
)
@click.option(
    "--project", default=None, help="The project a changelog is about (default: from the file)."
)
@click.pass_context
def ingest(
    ctx: click.Context,
    paths: tuple[Path, ...],
    group_id: str,
    globs: tuple[str, ...],
    excludes: tuple[str, ...],
    concurrency: int,
    prune: bool,
    dry_run: bool,
    as_json: bool,
    socket_path: str | None,
    max_chars: int | None,
    skip_preflight: bool,
    kind: DocumentKind,
    project: str | None,
) -> None:
    """Ingest Markdown, text and JSON Lines files under PATHS; re-runs sync only what changed.

    A changelog (release headings with versions and dates) becomes one dated episode per
    release (docs/changelogs.md). Files of other types under PATHS are listed as skipped; when PATHS hold nothing to ingest
    at all (and nothing to prune), the command exits with status 1, the dry run included.
    """
    home = ctx.obj.get("home")
    settings: Settings = load_settings(overrides={"home": home} if home else {})
    taken = globs or DEFAULT_GLOBS
    try:
        scan = scan_sources(list(paths), taken, excludes)
    except FileNotFoundError as exc:
        raise click.BadParameter(str(exc), param_hint="PATHS") from exc
    state = SyncState(settings.home, group_id)
    plan = plan_sync(
        scan.sources,
        state,
        max_chars or settings.chunk_text_advisory_max_chars,
        prune=prune,
        kind=kind,
        project=project,
    )
    _print_skipped(scan.skipped, taken)
    _print_outside(scan.outside)
    nothing = not plan.files and not plan.removed
    if dry_run:
        extractor = _extractor_for_run(settings, home, socket_path)
        _print_plan(plan, extractor, as_json, settings.extraction_single_call_max_chars)
    if nothing:
        shown = " ".join(str(p) for p in paths)
        raise click.ClickException(
            f"nothing to ingest under {shown}: no file matches {' '.join(taken)}"
        )
    if dry_run:
        return

    started = time.monotonic()
    # Nothing to extract (every file unchanged): no probe either, so a no-op re-run calls nothing.
    probe = not skip_preflight and bool(plan.of("new", "changed"))
    client = service_client(home, socket_path)
    if client is not None:
        with client:
            status = client.call("knowledge_status")
        remote = _ServiceCaller(client.socket_path)
        try:
            if probe:
                anyio.run(_preflight_remote, settings, status, as_json)
            stats = anyio.run(_run, remote, plan, state, concurrency, as_json)
        finally:
            remote.close()
    else:
        engine = open_engine(settings)
        try:
            if probe:
                anyio.run(_preflight_local, settings, engine, as_json)
            stats = anyio.run(_run, _EngineCaller(engine), plan, state, concurrency, as_json)
        finally:
            engine.close()
    _print_summary(stats, time.monotonic() - started, as_json)
    if stats.files_failed:
        raise LcgError(f"{stats.files_failed} of {stats.files_total} files failed")
