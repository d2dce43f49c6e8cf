"""`lcg export-html`: one self-contained HTML file showing (part of) the graph.

Input is what the read methods return (entity and edge records, docs/api.md §records), so the
command works the same against a running service or a database it opens itself. The file holds
the data, the stylesheet and the force layout of the browser UI inline and loads nothing: its
Content-Security-Policy forbids every fetch, and the embedded JSON escapes `/` so no URL from
the graph's text appears literally in it. It works emailed or opened offline.

What is kept:
- facts: with `as_of`, those true at that instant plus those that had already ended (drawn as
  superseded); facts that started later are left out. Without it, every fact, current and
  superseded. A fact is superseded when its `invalid_at` is at or before the instant shown;
- nodes: ranked by degree over the kept facts (then by name), the first `limit` kept, so a
  capped view keeps the hubs; facts only among kept nodes. A name that entities of more than one
  group share is shown with its group ("Mercury (alpha)"), so same-named entities of different
  groups can be told apart; every node carries its group (shown in its details).

The page's own files (graph.js, style.css, export.html, export.js) live with the browser UI in
`lcg/service/ui/`; they are read as package data, not imported.
"""

from __future__ import annotations

import html
from collections import Counter
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import orjson

from lcg.timeutil import now, parse_timestamp, to_read_format

__all__ = ["ExportSummary", "render_html", "select_graph"]

UI_DIR = Path(__file__).resolve().parent / "ui"
DEFAULT_LIMIT = 300


@dataclass(frozen=True)
class ExportSummary:
    """What the export kept, for the command's report."""

    nodes: int
    edges: int
    superseded: int
    total_nodes: int
    total_edges: int


def _time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    return parse_timestamp(value)


def _millis(value: datetime | None) -> int | None:
    return None if value is None else int(value.timestamp() * 1000)


def _entity_type(labels: list[str]) -> str:
    specific = [label for label in labels if label != "Entity"]
    return specific[-1] if specific else "Entity"


def select_graph(
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    *,
    limit: int = DEFAULT_LIMIT,
    as_of: datetime | None = None,
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The normalised nodes and edges the page draws (module docstring's rules).

    Raises:
        ValueError: `limit` is not positive.
    """
    if limit <= 0:
        raise ValueError("limit must be > 0")
    at = as_of or now()
    by_id = {n["uuid"]: n for n in nodes}
    kept_edges: list[dict[str, Any]] = []
    for e in edges:
        if e["source_node_uuid"] not in by_id or e["target_node_uuid"] not in by_id:
            continue
        valid_from, valid_to = _time(e.get("valid_at")), _time(e.get("invalid_at"))
        if as_of is not None and valid_from is not None and valid_from > as_of:
            continue
        superseded = valid_to is not None and valid_to <= at
        kept_edges.append(
            {
                "id": e["uuid"],
                "source": e["source_node_uuid"],
                "target": e["target_node_uuid"],
                "label": e.get("name", ""),
                "fact": e.get("fact", ""),
                "validFrom": _millis(valid_from),
                "validTo": _millis(valid_to),
                "superseded": superseded,
                "status": "superseded" if superseded else "current",
            }
        )
    degree: Counter[str] = Counter()
    for e in kept_edges:
        degree[e["source"]] += 1
        degree[e["target"]] += 1
    ranked = sorted(by_id.values(), key=lambda n: (-degree[n["uuid"]], n["name"], n["uuid"]))
    keep = ranked[:limit]
    kept_ids = {n["uuid"] for n in keep}
    groups_of: dict[str, set[str]] = {}
    for n in keep:
        groups_of.setdefault(n["name"].casefold(), set()).add(n.get("group_id", ""))

    def shown(n: dict[str, Any]) -> str:
        shared = len(groups_of[n["name"].casefold()]) > 1
        return f"{n['name']} ({n.get('group_id', '')})" if shared else str(n["name"])

    out_nodes = [
        {
            "id": n["uuid"],
            "name": shown(n),
            "type": _entity_type(n.get("labels", [])),
            "group": n.get("group_id", ""),
            "labels": n.get("labels", []),
            "summary": n.get("summary", ""),
        }
        for n in keep
    ]
    out_edges = [e for e in kept_edges if e["source"] in kept_ids and e["target"] in kept_ids]
    return out_nodes, out_edges


def _script_json(value: Any) -> str:
    """JSON safe inside a <script> element, with no literal URL in it (`/` escaped)."""
    text = orjson.dumps(value).decode()
    for raw, escaped in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("/", "\\/")):
        text = text.replace(raw, escaped)
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _asset(name: str) -> str:
    return (UI_DIR / name).read_text(encoding="utf-8")


def render_html(
    nodes: list[dict[str, Any]],
    edges: list[dict[str, Any]],
    *,
    limit: int = DEFAULT_LIMIT,
    as_of: datetime | None = None,
    title: str = "lcg graph",
    generated_at: datetime | None = None,
) -> tuple[str, ExportSummary]:
    """The self-contained page for these entity and edge records, and what it kept.

    Raises:
        ValueError: `limit` is not positive.
    """
    kept_nodes, kept_edges = select_graph(nodes, edges, limit=limit, as_of=as_of)
    payload = {
        "title": title,
        "generatedAt": to_read_format(generated_at or now()),
        "asOf": to_read_format(as_of),
        "totalNodes": len(nodes),
        "totalEdges": len(edges),
        "nodes": kept_nodes,
        "edges": kept_edges,
    }
    page = _asset("export.html")
    # Inline code must not close its <script>/<style> element early; the data never contains
    # "<" at all (_script_json).
    for marker, value in (
        ("/*STYLE*/", _asset("style.css").replace("</", "<\\/")),
        ("/*GRAPH_JS*/", _asset("graph.js").replace("</", "<\\/")),
        ("/*EXPORT_JS*/", _asset("export.js").replace("</", "<\\/")),
        ("/*DATA*/", _script_json(payload)),
        ("<!--TITLE-->", html.escape(title).replace("/", "&#47;")),
    ):
        page = page.replace(marker, value)
    summary = ExportSummary(
        nodes=len(kept_nodes),
        edges=len(kept_edges),
        superseded=sum(1 for e in kept_edges if e["superseded"]),
        total_nodes=len(nodes),
        total_edges=len(edges),
    )
    return page, summary
