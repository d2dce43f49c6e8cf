"""`--embedder-http URL` / `--embedder-uds PATH` for `lcg serve` and `lcg mcp`.

The options store their values in the click context (`ctx.meta`), so commands only merge
`embedder_overrides(ctx)` into their settings overrides. Either flag selects the `http`
embedder (lcg.embedding.http) over `LCG_EMBEDDER`, `LCG_EMBEDDING_URL` and
`LCG_EMBEDDING_UDS` (spec/API.md §4.7 step 6: the socket, then the URL).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

__all__ = ["embedder_options", "embedder_overrides"]

F = TypeVar("F", bound=Callable[..., Any])
_META_KEY = "lcg.embedder_overrides"


def _store(name: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        if name == "embedding_url":
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise click.BadParameter("must be an http:// or https:// URL with a host")
        else:
            value = str(Path(value).resolve())
        ctx.meta.setdefault(_META_KEY, {})[name] = value

    return callback


def embedder_options(command: F) -> F:
    """Add the two embedder flags to a click command."""
    command = click.option(
        "--embedder-uds",
        metavar="PATH",
        type=click.Path(exists=True, dir_okay=False),
        expose_value=False,
        callback=_store("embedding_uds"),
        help="OpenAI-compatible /v1/embeddings endpoint on this Unix socket.",
    )(command)
    command = click.option(
        "--embedder-http",
        metavar="URL",
        expose_value=False,
        callback=_store("embedding_url"),
        help="OpenAI-compatible /v1/embeddings endpoint at this URL.",
    )(command)
    return command


def embedder_overrides(ctx: click.Context) -> dict[str, Any]:
    """The settings overrides the flags asked for (with `embedder: http` when one was given).

    Raises:
        click.UsageError: both flags were given.
    """
    values: dict[str, Any] = dict(ctx.meta.get(_META_KEY, {}))
    if len(values) > 1:
        raise click.UsageError("--embedder-uds and --embedder-http are mutually exclusive")
    if values:
        values["embedder"] = "http"
    return values
