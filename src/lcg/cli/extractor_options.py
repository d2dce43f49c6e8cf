"""`--extractor-http URL` / `--extractor-uds PATH` for `lcg serve` and `lcg mcp`.

The options store their values in the click context (`ctx.meta`), so commands only merge
`extractor_overrides(ctx)` into their settings overrides; the flags win over every variable
except `LCG_REPLAY_LLM` (spec/API.md §4.7 step 7).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

__all__ = ["extractor_options", "extractor_overrides"]

F = TypeVar("F", bound=Callable[..., Any])
_META_KEY = "lcg.extractor_overrides"


def _store(name: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
    def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
        if value is None:
            return
        if name == "extractor_http":
            parts = urlsplit(value)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise click.BadParameter("must be an http:// or https:// URL with a host")
        else:
            value = str(Path(value).resolve())
        ctx.meta.setdefault(_META_KEY, {})[name] = value

    return callback


def extractor_options(command: F) -> F:
    """Add the two extractor flags to a click command."""
    command = click.option(
        "--extractor-uds",
        metavar="PATH",
        type=click.Path(exists=True, dir_okay=False),
        expose_value=False,
        callback=_store("extractor_uds"),
        help="OpenAI-compatible chat-completions endpoint on this Unix socket (extraction).",
    )(command)
    command = click.option(
        "--extractor-http",
        metavar="URL",
        expose_value=False,
        callback=_store("extractor_http"),
        help="OpenAI-compatible chat-completions endpoint at this URL (extraction).",
    )(command)
    return command


def extractor_overrides(ctx: click.Context) -> dict[str, Any]:
    """The settings overrides the flags asked for.

    Raises:
        click.UsageError: both flags were given.
    """
    values: dict[str, Any] = dict(ctx.meta.get(_META_KEY, {}))
    if len(values) > 1:
        raise click.UsageError("--extractor-uds and --extractor-http are mutually exclusive")
    return values
