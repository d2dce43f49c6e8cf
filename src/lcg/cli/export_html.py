"""`lcg export-html`: write the graph (or its best-connected part) as one offline HTML file.

Reads entities and facts through the registry's read methods: from the running service when one
answers on the socket (Kuzu allows one process per database), else from the database opened
here. The page itself is built by `lcg.service.htmlexport`.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import click

from lcg.cli.remote import existing_settings, service_client
from lcg.engine import open_engine
from lcg.service.htmlexport import DEFAULT_LIMIT, render_html
from lcg.service.registry import dispatch
from lcg.timeutil import parse_timestamp

__all__ = ["export_html"]


def _parse_as_of(value: str | None) -> datetime | None:
    if value is None:
        return None
    text = value.strip()
    if len(text) == 10:  # a bare date means its midnight, UTC
        text += "T00:00:00Z"
    try:
        return parse_timestamp(text)
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a date (YYYY-MM-DD) or an RFC 3339 timestamp", param_hint="--as-of"
        ) from None


def _fetch(
    home: str | None, socket_path: str | None, groups: list[str] | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    params: dict[str, Any] = {"group_ids": groups} if groups else {}
    client = service_client(home, socket_path)
    if client is not None:
        with client:
            nodes = client.call("knowledge_get_nodes_by_group", params)["nodes"]
            edges = client.call("knowledge_get_edges_by_group", params)["edges"]
        return nodes, edges
    engine = open_engine(existing_settings(home))

    async def read() -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        nodes = await dispatch(engine, "knowledge_get_nodes_by_group", params)
        edges = await dispatch(engine, "knowledge_get_edges_by_group", params)
        return nodes["nodes"], edges["edges"]

    try:
        return anyio.run(read)
    finally:
        engine.close()


@click.command("export-html")
@click.option(
    "--group", "groups", multiple=True, help="Group to export (repeatable; default: all groups)."
)
@click.option(
    "--limit",
    type=click.IntRange(min=1),
    default=DEFAULT_LIMIT,
    show_default=True,
    help="Keep at most this many entities, the best connected first.",
)
@click.option(
    "--as-of",
    "as_of",
    default=None,
    metavar="T",
    help="Show the graph as of this instant (YYYY-MM-DD or RFC 3339): facts true then, and "
    "those already superseded by then.",
)
@click.option("--title", default=None, help="Page title (default: 'lcg graph' and the groups).")
@click.option(
    "-o",
    "--output",
    type=click.Path(dir_okay=False, writable=True),
    required=True,
    help="HTML file to write.",
)
@click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Service socket to read from when a service is running (default: the configured one).",
)
@click.pass_context
def export_html(
    ctx: click.Context,
    groups: tuple[str, ...],
    limit: int,
    as_of: str | None,
    title: str | None,
    output: str,
    socket_path: str | None,
) -> None:
    """Write one self-contained HTML file with the graph: no network needed to open it."""
    when = _parse_as_of(as_of)
    nodes, edges = _fetch(ctx.obj.get("home"), socket_path, list(groups) or None)
    heading = title or ("lcg graph: " + ", ".join(groups) if groups else "lcg graph")
    page, summary = render_html(nodes, edges, limit=limit, as_of=when, title=heading)
    Path(output).write_text(page, encoding="utf-8")
    click.echo(
        f"wrote {output}: {summary.nodes} of {summary.total_nodes} entities, "
        f"{summary.edges} facts ({summary.superseded} superseded)",
        err=True,
    )
