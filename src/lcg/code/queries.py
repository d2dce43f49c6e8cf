"""The questions asked of the code graph: where a symbol is defined, who calls it and what it
calls, which symbols a path held at a time, and what changed in a path between two dates.

Owns these reads (one snapshot each, through `Engine.read`). A symbol is named by its
qualified name (`lcg.code.sync.commit_changes`) or, when that is unambiguous, its short name
(`commit_changes`); answers carry `path:line_start-line_end`, never source text. Time follows
the facts: a symbol is present at `t` while the DEFINES/CONTAINS fact that places it is valid
at `t` (valid_at <= t < invalid_at).

The statements are in the Cypher both stores run (`x IN list`, `STARTS WITH`, `ENDS WITH`), and
times are compared here, not in the statement (Kuzu keeps TIMESTAMPs, FalkorDB integer
microseconds): the code graph works in server mode too.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

from lcg.engine import Engine
from lcg.storage.backend import GraphReader
from lcg.storage.rows import stored_time
from lcg.timeutil import to_read_format

__all__ = ["callers_and_callees", "code_changes", "symbols_at", "where_defined"]

_SYMBOL_LABELS = ("Class", "Function", "Method")


def _entity_rows(conn: GraphReader, group_id: str, name: str) -> list[list[Any]]:
    rows = conn.rows(
        "MATCH (e:Entity) WHERE e.group_id = $g AND 'Code' IN e.labels "
        "AND (e.name = $n OR e.name ENDS WITH $suffix) "
        "RETURN e.uuid, e.name, e.labels, e.attributes ORDER BY e.name",
        {"g": group_id, "n": name, "suffix": "." + name},
    )
    exact = [r for r in rows if r[1] == name]
    return exact or rows


def _valid(valid_at: Any, invalid_at: Any, at: datetime) -> bool:
    """Whether a fact with these stored times is valid at `at` (valid_at <= at < invalid_at)."""
    start, end = stored_time(valid_at), stored_time(invalid_at)
    return start is not None and start <= at and (end is None or end > at)


def _describe(row: list[Any]) -> dict[str, Any]:
    attrs = json.loads(row[3] or "{}")
    kind = next((label for label in row[2] if label in (*_SYMBOL_LABELS, "File", "Module")), "")
    out: dict[str, Any] = {"uuid": row[0], "name": row[1], "kind": kind}
    for key in ("path", "line_start", "line_end", "signature", "variants", "doc", "language"):
        if key in attrs:
            out[key] = attrs[key]
    if "path" in attrs and "line_start" in attrs:
        out["location"] = f"{attrs['path']}:{attrs['line_start']}-{attrs['line_end']}"
    out["present"] = not attrs.get("removed")
    if attrs.get("renamed_to"):
        out["renamed_to"] = attrs["renamed_to"]
    return out


async def where_defined(engine: Engine, group_id: str, name: str) -> dict[str, Any]:
    """Every code entity the name designates, with its location (path and line range)."""

    def read(conn: GraphReader) -> dict[str, Any]:
        return {"symbols": [_describe(r) for r in _entity_rows(conn, group_id, name)]}

    return await engine.read(read)


async def callers_and_callees(
    engine: Engine, group_id: str, name: str, *, as_of: datetime | None = None
) -> dict[str, Any]:
    """Who calls the symbol and what it calls (current CALLS facts, or those valid at `as_of`);
    `symbol` is None, and both lists empty, when no code symbol has that name."""

    def read(conn: GraphReader) -> dict[str, Any]:
        rows = _entity_rows(conn, group_id, name)
        if not rows:
            return {"symbol": None, "callers": [], "callees": []}
        row = rows[0]
        out: dict[str, Any] = {"symbol": _describe(row)}
        for side, query in (
            (
                "callers",
                "MATCH (o:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(e:Entity {uuid: $u})",
            ),
            (
                "callees",
                "MATCH (e:Entity {uuid: $u})-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(o:Entity)",
            ),
        ):
            current = (
                "" if as_of is not None else "AND f.invalid_at IS NULL AND f.expired_at IS NULL "
            )
            rows = conn.rows(
                f"{query} WHERE f.name = 'CALLS' {current}"
                "RETURN o.uuid, o.name, o.labels, o.attributes, f.valid_at, f.invalid_at "
                "ORDER BY o.name",
                {"u": row[0]},
            )
            out[side] = [_describe(r) for r in rows if as_of is None or _valid(r[4], r[5], as_of)]
        return out

    return await engine.read(read)


async def symbols_at(
    engine: Engine, group_id: str, at: datetime, path_prefix: str = ""
) -> dict[str, dict[str, Any]]:
    """qualified name -> {signature, path} of the symbols present at `at` (under a path prefix)."""

    def read(conn: GraphReader) -> dict[str, dict[str, Any]]:
        rows = conn.rows(
            "MATCH (a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(e:Entity) "
            "WHERE f.group_id = $g AND f.name IN ['DEFINES', 'CONTAINS'] "
            "RETURN e.name, e.labels, f.attributes, e.attributes, f.valid_at, f.invalid_at",
            {"g": group_id},
        )
        out: dict[str, dict[str, Any]] = {}
        for name, labels, attributes, entity_attributes, valid_at, invalid_at in rows:
            if not _valid(valid_at, invalid_at, at):
                continue
            if not any(label in labels for label in _SYMBOL_LABELS):
                continue
            path = str(json.loads(entity_attributes or "{}").get("path", ""))
            if path_prefix and not path.startswith(path_prefix):
                continue
            detail = json.loads(attributes or "{}").get("detail", "")
            out[name] = {"signature": detail, "path": path}
        return out

    return await engine.read(read)


async def _renames_between(
    engine: Engine, group_id: str, since: datetime, until: datetime
) -> list[tuple[str, str]]:
    """(first name, last name) of each symbol renamed in (since, until], chains composed."""

    def read(conn: GraphReader) -> list[list[Any]]:
        return conn.rows(
            "MATCH (a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity) "
            "WHERE f.group_id = $g AND f.name = 'RENAMED_TO' "
            "RETURN a.name, b.name, f.valid_at",
            {"g": group_id},
        )

    steps = []
    for old, new, valid_at in await engine.read(read):
        start = stored_time(valid_at)
        if start is not None and since < start <= until:
            steps.append((start, str(old), str(new)))
    origin: dict[str, str] = {}  # name now -> the name it had at `since`
    for _, old, new in sorted(steps):
        origin[new] = origin.pop(old, old)
    return sorted((first, last) for last, first in origin.items() if first != last)


async def code_changes(
    engine: Engine, group_id: str, since: datetime, until: datetime, path_prefix: str = ""
) -> dict[str, Any]:
    """Symbols added, removed, renamed (or moved) and re-signed under `path_prefix` between the
    state at `since` and the state at `until`: a symbol renamed is listed under `renamed` (`from`, `to`), not as a removal
    plus an addition."""
    before = await symbols_at(engine, group_id, since, path_prefix)
    after = await symbols_at(engine, group_id, until, path_prefix)
    added = sorted(set(after) - set(before))
    removed = sorted(set(before) - set(after))
    renamed = [
        {"from": first, "to": last}
        for first, last in await _renames_between(engine, group_id, since, until)
        if (first in removed or last in added) and first not in after and last not in before
    ]
    added = [n for n in added if n not in {r["to"] for r in renamed}]
    removed = [n for n in removed if n not in {r["from"] for r in renamed}]
    changed = [
        {"name": n, "before": before[n]["signature"], "after": after[n]["signature"]}
        for n in sorted(set(before) & set(after))
        if before[n]["signature"] != after[n]["signature"]
    ]
    return {
        "since": to_read_format(since),
        "until": to_read_format(until),
        "path": path_prefix,
        "added": added,
        "removed": removed,
        "renamed": renamed,
        "signature_changed": changed,
    }
