"""`lcg models pull|list`: local embedding models in the user's model cache (lcg.embedding.catalog)."""

from __future__ import annotations

import click
from rich.console import Console
from rich.progress import BarColumn, DownloadColumn, Progress, TextColumn, TransferSpeedColumn

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
    """Download model NAME (default all-MiniLM-L6-v2), verify its checksum and cache it."""
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
        f"+{m['memory_mb']} MB resident, {m['texts_per_s']} texts/s here"
    )
    click.echo("LCG_EMBEDDER=auto (the default) now uses it; re-embed existing groups with")
    click.echo("knowledge_backfill_summary_embeddings (knowledge_status shows `mismatch`).")


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
            f"  {m.name:24} cached  {m.size_bytes / 1e6:7.1f} MB  dim {man.get('dim', '?')}  "
            f"memory +{man.get('memory_mb', '?')} MB  {man.get('texts_per_s', '?')} texts/s"
        )
    for entry in CATALOG.values():
        if entry.name not in cached:
            click.echo(
                f"  {entry.name:24} not cached ({entry.download_mb:.0f} MB download, "
                f"dim {entry.dim}): lcg models pull {entry.name}"
            )
