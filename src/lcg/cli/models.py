"""`lcg models pull|list|reembed`: local embedding models in the user's model cache
(lcg.embedding.catalog), and re-embedding a workspace after the model changed."""

from __future__ import annotations

from typing import Any

import anyio
import click
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from lcg.cli.endpoint_options import embedder_options, embedder_overrides
from lcg.cli.remote import existing_settings, service_client
from lcg.config import load_settings
from lcg.embedding.catalog import CATALOG, DEFAULT_MODEL, cached_models, pull
from lcg.embedding.select import models_dir

__all__ = ["models"]

console = Console(stderr=True)


@click.group()
def models() -> None:
    """Local embedding models for semantic search (needs: pip install 'lcg[embeddings]')."""


@models.command("pull")
@click.argument("name", required=False, default=DEFAULT_MODEL)
def pull_command(name: str) -> None:
    """Download model NAME, verify its checksum and cache it.

    The default, all-MiniLM-L6-v2-int8, is all-MiniLM-L6-v2 quantised to int8 here after the
    download (~1.7x less CPU per text than float32 at the same search quality); the float32
    model is `lcg models pull all-MiniLM-L6-v2`.
    """
    settings = load_settings()
    target = models_dir(settings)
    with Progress(
        TextColumn(f"pulling {name}"),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("pull", total=None)

        def progress(done: int, total: int | None) -> None:
            bar.update(task, completed=done, total=total)

        model = pull(name, target, mirror=settings.models_url, progress=progress)
    m = model.manifest
    click.echo(
        f"{model.name}: {model.size_bytes / 1e6:.1f} MB in {model.path}, {m['dim']}-d, "
        f"+{m['memory_mb']} MB resident, {m['texts_per_s']} texts/s here "
        f"({m['cpu_ms_per_text']} ms CPU per text)"
    )
    if model.name == DEFAULT_MODEL:
        click.echo("LCG_EMBEDDER=auto (the default) now uses it; re-embed existing workspaces with")
    else:
        click.echo(
            f"LCG_EMBEDDER=auto uses it unless {DEFAULT_MODEL} is cached too "
            f"(LCG_EMBEDDING_MODEL={model.name} selects it); re-embed existing workspaces with"
        )
    click.echo("`lcg models reembed` (knowledge_status shows `mismatch` until then).")


@models.command("list")
def list_command() -> None:
    """What is cached (size, dimension, memory, texts/s measured at pull) and what can be pulled."""
    settings = load_settings()
    target = models_dir(settings)
    cached = {m.name: m for m in cached_models(target)}
    click.echo(f"model cache: {target}")
    for m in cached.values():
        man = m.manifest
        click.echo(
            f"  {_named(m.name):34} cached  {m.size_bytes / 1e6:7.1f} MB  "
            f"dim {man.get('dim', '?')}  "
            f"memory +{man.get('memory_mb', '?')} MB  {man.get('texts_per_s', '?')} texts/s  "
            f"{man.get('cpu_ms_per_text', '?')} ms CPU/text"
        )
    for entry in CATALOG.values():
        if entry.name not in cached:
            made = f" of {entry.base}, quantised to {entry.derive} here" if entry.base else ""
            command = "lcg models pull" + ("" if entry.name == DEFAULT_MODEL else f" {entry.name}")
            click.echo(
                f"  {_named(entry.name):34} not cached ({entry.download_mb:.0f} MB download{made}, "
                f"dim {entry.dim}): {command}"
            )


def _named(name: str) -> str:
    return f"{name} (default)" if name == DEFAULT_MODEL else name


@models.command("reembed")
@click.option("--group", "groups", multiple=True, help="Group to re-embed (default: all).")
@click.option("--batch-size", default=256, show_default=True, type=click.IntRange(1, 4096))
@click.option("--socket", "socket_path", default=None, help="Service socket to use, if running.")
@embedder_options
@click.pass_context
def reembed_command(
    ctx: click.Context, groups: tuple[str, ...], batch_size: int, socket_path: str | None
) -> None:
    """Re-embed the workspace with the embedding model in use, with progress.

    What to run when knowledge_status says `mismatch` (the workspace was embedded with another
    model). Search keeps answering from the old model's vectors until every group is done,
    then swaps to the new ones at once. With a service running, the service does the work
    (it keeps serving meanwhile); otherwise this process does.
    """
    home = (ctx.find_root().obj or {}).get("home")
    params: dict[str, Any] = {"batch_size": batch_size}
    if groups:
        params["group_ids"] = list(groups)
    with Progress(
        TextColumn("re-embedding"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    ) as bar:
        task = bar.add_task("reembed", total=None)

        def progress(frame: dict[str, Any]) -> None:
            bar.update(task, completed=frame.get("processed", 0), total=frame.get("total"))

        client = service_client(home, socket_path)
        if client is not None:
            with client:
                result = client.call(
                    "knowledge_backfill_summary_embeddings", params, progress=progress
                )
        else:
            result = _reembed_here(home, embedder_overrides(ctx), params, progress)
    console.print(
        f"{escape(str(result['embedding_model']))}: {result['embedded']} vectors embedded, "
        f"{result['already_current']} already current, {result['removed']} removed"
    )


def _reembed_here(
    home: str | None, overrides: dict[str, Any], params: dict[str, Any], progress: Any
) -> dict[str, Any]:
    from lcg.engine import open_engine
    from lcg.service.registry import Context, dispatch

    settings = existing_settings(home)
    if overrides:
        settings = load_settings(overrides={"home": str(settings.home), **overrides})
    engine = open_engine(settings)
    try:
        method = "knowledge_backfill_summary_embeddings"
        result: dict[str, Any] = anyio.run(
            lambda: dispatch(engine, method, params, Context(progress=progress))
        )
        return result
    finally:
        engine.close()
