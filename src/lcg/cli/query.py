"""Asking the graph from the shell: `lcg search`, `lcg context`, `lcg changes`, `lcg as-of`,
`lcg timeline` and `lcg facts` (docs/cli.md).

Each command is one wire method: its options are the method's parameters under shell names,
passed through unparsed, so the method validates them and fails with its own message. The
answer comes from the workspace's running service when one answers on its socket (it owns the
database), else from the workspace opened here (never created: a read of nothing says so).
Results print as tables that fit the terminal (80 columns when it is not one; dates, status,
source); `--json` prints the method's result as it is.

Groups: a read names groups with `--group` (repeatable) and otherwise reads every group; a
method that needs one group (the timeline of a name) takes the workspace's only group, or fails
naming the groups when there are several (`lcg.graph.reads.one_group`).
"""

from __future__ import annotations

import io
import json
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import click
from rich import box
from rich.console import Console
from rich.table import Table
from rich.text import Text

from lcg.cli.remote import existing_settings, service_client
from lcg.engine import open_engine
from lcg.service.registry import dispatch

__all__ = ["QUERY_COMMANDS"]

F = Callable[..., Any]


def call(ctx: click.Context, socket_path: str | None, method: str, params: dict[str, Any]) -> Any:
    """`method` on the running service, else on the workspace opened in this process."""
    params = {k: v for k, v in params.items() if v is not None and v != []}
    home = ctx.find_root().obj.get("home")
    client = service_client(home, socket_path)
    if client is not None:
        with client:
            return client.call(method, params)
    engine = open_engine(existing_settings(home))
    try:
        return anyio.run(dispatch, engine, method, params)
    finally:
        engine.close()


# -- rendering -----------------------------------------------------------------------------------


def _width() -> int:
    return shutil.get_terminal_size((80, 24)).columns


def _when(value: Any) -> str:
    """A read-format timestamp as its date, with the time only when it is not midnight."""
    if not value:
        return ""
    text = str(value).replace("T", " ")
    day, _, clock = text.partition(" ")
    clock = clock[:5]
    return day if clock in ("", "00:00") else f"{day} {clock}"


def _status(fact: dict[str, Any]) -> str:
    if fact.get("status"):
        return str(fact["status"])
    if fact.get("invalid_at"):
        return "ended"
    return "retracted" if fact.get("expired_at") else "current"


def _source(record: dict[str, Any]) -> str:
    """The first source of a record and how many more: a chunk's id (its source description is
    `<file>:<chunk id>`), else the description without its directories."""
    sources = [str(s) for s in record.get("source_descriptions") or [] if s]
    if not sources:
        return ""
    first = sources[0].rsplit("/", 1)[-1]
    first = first.rsplit(":", 1)[-1] or first
    return first if len(sources) == 1 else f"{first} +{len(sources) - 1}"


def _table(*columns: tuple[str, dict[str, Any]]) -> Table:
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False, expand=False)
    for header, options in columns:
        table.add_column(header, **options)
    return table


_DATE: dict[str, Any] = {"no_wrap": True}
_TEXT: dict[str, Any] = {"overflow": "fold", "ratio": 1}
_SOURCE: dict[str, Any] = {"overflow": "ellipsis", "no_wrap": True, "max_width": 18}


def _render(*parts: Table | str) -> None:
    buffer = io.StringIO()
    console = Console(file=buffer, width=_width(), color_system=None, highlight=False, emoji=False)
    for part in parts:
        console.print(Text(part) if isinstance(part, str) else part)
    click.echo(buffer.getvalue(), nl=False)


def _fact_table(facts: Sequence[dict[str, Any]]) -> Table:
    """Facts as rows: when each became true and stopped (a column shown only when some did),
    its status, its sentence and (when known) its source."""
    sourced = any(_source(f) for f in facts)
    ended = any(f.get("invalid_at") for f in facts)
    columns = [("valid from", _DATE)]
    if ended:
        columns.append(("until", _DATE))
    columns += [("status", {"no_wrap": True}), ("fact", _TEXT)]
    if sourced:
        columns.append(("source", _SOURCE))
    table = _table(*columns)
    for f in facts:
        row = [_when(f.get("valid_at"))]
        if ended:
            row.append(_when(f.get("invalid_at")))
        row += [_status(f), f.get("fact", "")]
        if sourced:
            row.append(_source(f))
        table.add_row(*(Text(str(cell)) for cell in row))
    return table


def _count(n: int, noun: str, plural: str | None = None) -> str:
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _print_facts(result: dict[str, Any], what: str) -> None:
    facts = result.get("facts", [])
    if not facts:
        _render(f"no {what}")
        return
    _render(_fact_table(facts), _count(len(facts), "fact"))


# -- shared options ------------------------------------------------------------------------------


def _options(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(command: F) -> F:
        for decorate in reversed(decorators):
            command = decorate(command)
        return command

    return apply


_SOCKET = click.option(
    "--socket",
    "socket_path",
    type=click.Path(dir_okay=False),
    default=None,
    help="Service socket to use when a service is running (default: the configured one).",
)
_JSON = click.option("--json", "as_json", is_flag=True, help="Print the method's result as JSON.")
_GROUPS = click.option(
    "--group",
    "groups",
    multiple=True,
    help="Only this group (repeatable; default: every group).",
)
_LIMIT = click.option("--limit", type=int, default=None, help="At most this many results.")
_AS_OF = click.option(
    "--as-of", "as_of", default=None, help="Valid time: what was true then (a date or timestamp)."
)
_KNOWN_AT = click.option(
    "--known-at", "known_at", default=None, help="System time: the graph as it was then."
)
_ALL = click.option(
    "--all",
    "include_invalidated",
    is_flag=True,
    default=None,
    help="Superseded and ended facts too.",
)
_COMMON = _options(_GROUPS, _JSON, _SOCKET)


def _json(result: Any) -> None:
    click.echo(json.dumps(result, indent=2, ensure_ascii=False))


# -- the commands --------------------------------------------------------------------------------


@click.command()
@click.argument("query")
@click.option(
    "--kind",
    type=click.Choice(["facts", "entities", "passages"]),
    default="facts",
    show_default=True,
    help="What to search: knowledge_find_relationships, _find_entities or _search_passages.",
)
@_LIMIT
@_AS_OF
@_KNOWN_AT
@_ALL
@click.option("--strategy", default=None, help="hybrid_rrf, hybrid_mmr, lexical or vector.")
@_COMMON
@click.pass_context
def search(
    ctx: click.Context,
    query: str,
    kind: str,
    limit: int | None,
    as_of: str | None,
    known_at: str | None,
    include_invalidated: bool | None,
    strategy: str | None,
    groups: tuple[str, ...],
    as_json: bool,
    socket_path: str | None,
) -> None:
    """Search facts (default), entities or passages for QUERY."""
    params: dict[str, Any] = {
        "query": query,
        "num_results": limit,
        "group_ids": list(groups),
        "search_strategy": strategy,
    }
    if kind == "facts":
        params.update(as_of=as_of, known_at=known_at, include_invalidated=include_invalidated)
    elif as_of or known_at or include_invalidated:
        raise click.UsageError("--as-of, --known-at and --all apply to --kind facts only")
    method = {
        "facts": "knowledge_find_relationships",
        "entities": "knowledge_find_entities",
        "passages": "knowledge_search_passages",
    }[kind]
    result = call(ctx, socket_path, method, params)
    if as_json:
        _json(result)
    elif kind == "facts":
        _print_facts(result, "matching facts")
    elif kind == "entities":
        _print_entities(result)
    else:
        _print_passages(result)


def _print_entities(result: dict[str, Any]) -> None:
    nodes = result.get("nodes", [])
    if not nodes:
        _render("no matching entities")
        return
    table = _table(
        ("name", {"overflow": "fold", "max_width": 28}),
        ("type", {"overflow": "fold", "max_width": 16}),
        ("summary", _TEXT),
    )
    for node in nodes:
        labels = [label for label in node.get("labels", []) if label != "Entity"]
        table.add_row(Text(node.get("name", "")), Text(", ".join(labels)), Text(node["summary"]))
    _render(table, _count(len(nodes), "entity", "entities"))


def _print_passages(result: dict[str, Any]) -> None:
    passages = result.get("passages", [])
    if not passages:
        _render("no matching passages")
        return
    table = _table(
        ("date", _DATE),
        ("score", {"no_wrap": True, "justify": "right"}),
        ("source", _SOURCE),
        ("passage", _TEXT),
    )
    for p in passages:
        content = " ".join(str(p.get("content", "")).split())
        if len(content) > 240:
            content = content[:239] + "…"
        table.add_row(
            Text(_when(p.get("valid_at") or p.get("created_at"))),
            Text(f"{float(p.get('score') or 0):.2f}"),
            Text(str(p.get("source_description") or p.get("name") or "")),
            Text(content),
        )
    _render(table, _count(len(passages), "passage"))


@click.command("as-of")
@click.argument("date")
@click.argument("query")
@_LIMIT
@_COMMON
@click.pass_context
def as_of_command(
    ctx: click.Context,
    date: str,
    query: str,
    limit: int | None,
    groups: tuple[str, ...],
    as_json: bool,
    socket_path: str | None,
) -> None:
    """The facts matching QUERY that were true on DATE (a date or timestamp)."""
    result = call(
        ctx,
        socket_path,
        "knowledge_find_relationships",
        {"query": query, "as_of": date, "num_results": limit, "group_ids": list(groups)},
    )
    if as_json:
        _json(result)
    else:
        _print_facts(result, f"matching facts on {date}")


@click.command()
@_LIMIT
@_AS_OF
@_KNOWN_AT
@_ALL
@_COMMON
@click.pass_context
def facts(
    ctx: click.Context,
    limit: int | None,
    as_of: str | None,
    known_at: str | None,
    include_invalidated: bool | None,
    groups: tuple[str, ...],
    as_json: bool,
    socket_path: str | None,
) -> None:
    """List facts, newest first: current ones, or as of a time (knowledge_list_relationships)."""
    result = call(
        ctx,
        socket_path,
        "knowledge_list_relationships",
        {
            "group_ids": list(groups),
            "num_results": limit,
            "as_of": as_of,
            "known_at": known_at,
            # Current facts unless --all: the method's own default is the reference's (every
            # edge, superseded ones too).
            "include_invalidated": bool(include_invalidated),
        },
    )
    if as_json:
        _json(result)
    else:
        _print_facts(result, "facts")


@click.command()
@click.option("--since", required=True, help="Start of the window, inclusive (a date or time).")
@click.option("--until", default=None, help="End of the window, exclusive (default: now).")
@click.option("--entity", "entity_uuid", default=None, help="Only facts touching this entity uuid.")
@_LIMIT
@_COMMON
@click.pass_context
def changes(
    ctx: click.Context,
    since: str,
    until: str | None,
    entity_uuid: str | None,
    limit: int | None,
    groups: tuple[str, ...],
    as_json: bool,
    socket_path: str | None,
) -> None:
    """What changed in [SINCE, UNTIL): facts that started, ended, were learned or retired."""
    result = call(
        ctx,
        socket_path,
        "knowledge_get_changes",
        {
            "since": since,
            "until": until,
            "entity_uuid": entity_uuid,
            "num_results": limit,
            "group_ids": list(groups),
        },
    )
    if as_json:
        _json(result)
        return
    entries = result.get("changes", [])
    window = f"from {_when(result.get('since'))} to {_when(result.get('until'))}"
    if not entries:
        _render(f"no changes {window}")
        return
    sourced = any(_source(e.get("fact", {})) for e in entries)
    columns = [("date", _DATE), ("change", {"no_wrap": True}), ("fact", _TEXT)]
    if sourced:
        columns.append(("source", _SOURCE))
    table = _table(*columns)
    for entry in entries:
        fact = entry.get("fact", {})
        row = [_when(entry.get("at")), str(entry.get("kind", "")), str(fact.get("fact", ""))]
        if sourced:
            row.append(_source(fact))
        table.add_row(*(Text(cell) for cell in row))
    footer = f"{_count(len(entries), 'change')} {window}"
    if result.get("truncated"):
        footer += " (truncated: raise --limit)"
    _render(table, footer)


@click.command()
@click.argument("name")
@click.option(
    "--group",
    "group_id",
    default=None,
    help="The entity's group (default: the workspace's only group; required when it has several).",
)
@_JSON
@_SOCKET
@click.pass_context
def timeline(
    ctx: click.Context, name: str, group_id: str | None, as_json: bool, socket_path: str | None
) -> None:
    """Every fact about the entity NAME, current and superseded, in the order they became true."""
    result = call(
        ctx, socket_path, "knowledge_get_entity_timeline", {"name": name, "group_id": group_id}
    )
    if as_json:
        _json(result)
        return
    entity = result.get("entity", {})
    title = f"{entity.get('name', name)} (group {entity.get('group_id', '')})"
    entries = result.get("facts", [])
    if not entries:
        _render(title, "no facts")
        return
    _render(title, _fact_table(entries), _count(len(entries), "fact"))


@click.command()
@click.argument("query")
@click.option("--budget", "token_budget", type=int, default=None, help="Tokens (default 2000).")
@click.option("--hops", type=int, default=None, help="Expansion steps, 0-3 (default 1).")
@_AS_OF
@_COMMON
@click.pass_context
def context(
    ctx: click.Context,
    query: str,
    token_budget: int | None,
    hops: int | None,
    as_of: str | None,
    groups: tuple[str, ...],
    as_json: bool,
    socket_path: str | None,
) -> None:
    """The graph's context for QUERY, as a cited text block ready for a prompt."""
    result = call(
        ctx,
        socket_path,
        "knowledge_get_context",
        {
            "query": query,
            "token_budget": token_budget,
            "hops": hops,
            "as_of": as_of,
            "group_ids": list(groups),
        },
    )
    if as_json:
        _json(result)
        return
    click.echo(str(result.get("context", "")).rstrip("\n"))


QUERY_COMMANDS = (search, context, changes, as_of_command, timeline, facts)
