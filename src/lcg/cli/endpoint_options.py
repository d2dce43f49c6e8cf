"""`--embedder-http URL` / `--embedder-uds PATH` and `--extractor-http URL` / `--extractor-uds
PATH` for `lcg serve` and `lcg mcp`: one local OpenAI-compatible endpoint each.

The options store their values in the click context (`ctx.meta`), so commands only merge
`embedder_overrides(ctx)` / `extractor_overrides(ctx)` into their settings overrides. An
embedder flag selects the `http` embedder over `LCG_EMBEDDER`, `LCG_EMBEDDING_URL` and
`LCG_EMBEDDING_UDS` (docs/api.md §startup, the embedding endpoint: the socket, then the URL); the
extractor flags win over every variable except `LCG_REPLAY_LLM` (docs/api.md §ingest-pipeline).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlsplit

import click

__all__ = ["embedder_options", "embedder_overrides", "extractor_options", "extractor_overrides"]

F = TypeVar("F", bound=Callable[..., Any])


@dataclass(frozen=True)
class _EndpointFlags:
    """The two flags of one endpoint kind and the settings they set."""

    kind: str  # the flag prefix: "embedder" or "extractor"
    http_setting: str
    uds_setting: str
    endpoint: str  # what the endpoint serves, for the help text
    selects: Mapping[str, str] = field(default_factory=dict)  # set too when a flag is given

    @property
    def _meta_key(self) -> str:
        return f"lcg.{self.kind}_overrides"

    def _store(self, name: str) -> Callable[[click.Context, click.Parameter, str | None], None]:
        def callback(ctx: click.Context, param: click.Parameter, value: str | None) -> None:
            if value is None:
                return
            if name == self.http_setting:
                parts = urlsplit(value)
                if parts.scheme not in ("http", "https") or not parts.hostname:
                    raise click.BadParameter("must be an http:// or https:// URL with a host")
            else:
                value = str(Path(value).resolve())
            ctx.meta.setdefault(self._meta_key, {})[name] = value

        return callback

    def options(self, command: F) -> F:
        """Add the two flags to a click command."""
        command = click.option(
            f"--{self.kind}-uds",
            metavar="PATH",
            type=click.Path(exists=True, dir_okay=False),
            expose_value=False,
            callback=self._store(self.uds_setting),
            help=f"{self.endpoint} on this Unix socket.",
        )(command)
        return click.option(
            f"--{self.kind}-http",
            metavar="URL",
            expose_value=False,
            callback=self._store(self.http_setting),
            help=f"{self.endpoint} at this URL.",
        )(command)

    def overrides(self, ctx: click.Context) -> dict[str, Any]:
        """The settings overrides the flags asked for.

        Raises:
            click.UsageError: both flags were given.
        """
        values: dict[str, Any] = dict(ctx.meta.get(self._meta_key, {}))
        if len(values) > 1:
            raise click.UsageError(
                f"--{self.kind}-uds and --{self.kind}-http are mutually exclusive"
            )
        if values:
            values.update(self.selects)
        return values


_EMBEDDER = _EndpointFlags(
    "embedder",
    "embedding_url",
    "embedding_uds",
    "OpenAI-compatible /v1/embeddings endpoint",
    {"embedder": "http"},
)
_EXTRACTOR = _EndpointFlags(
    "extractor",
    "extractor_http",
    "extractor_uds",
    "OpenAI-compatible chat-completions endpoint (extraction)",
)

embedder_options = _EMBEDDER.options
embedder_overrides = _EMBEDDER.overrides
extractor_options = _EXTRACTOR.options
extractor_overrides = _EXTRACTOR.overrides
