"""Temporal reads of the graph: facts filtered on both time axes, changes in a window, histories.

The time rule of `lcg.timefilter.TimeFilter.admits` is evaluated here in Cypher (`time_clause`),
so filtered reads never load facts they do not return. Like every read in `graph.py`, these
return only facts whose two structural hops (source -> fact -> target) both exist.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from lcg.models import Fact
from lcg.storage import graph
from lcg.storage.graph import _HOPS, FACT_COLS, _fact, _group_filter, _where
from lcg.storage.rows import provenance_of
from lcg.storage.store import Conn
from lcg.timefilter import TimeFilter
from lcg.timeutil import to_db

__all__ = [
    "endpoint_provenance",
    "fact_changes",
    "facts_around",
    "facts_at",
    "facts_with_hops_by_uuid",
    "neighbor_facts_at",
    "time_clause",
]


def time_clause(alias: str, time: TimeFilter, at: datetime) -> tuple[str, dict[str, Any]]:
    """The Cypher condition (and its parameters) equal to `time.admits(fact, at=at)`.

    Kuzu's three-valued logic does the null handling: a comparison with a null column is null,
    which an `OR` with a true branch turns true and a `WHERE` treats as false.
    """
    a = alias
    parts: list[str] = []
    params: dict[str, Any] = {}
    if time.known_at is not None or not time.include_invalidated:
        params["ts"] = to_db(time.known_at or at)
        parts.append(f"({a}.created_at IS NULL OR {a}.created_at <= $ts)")
        parts.append(
            f"({a}.expired_at IS NULL OR {a}.expired_at > $ts OR {a}.invalid_at IS NOT NULL)"
        )
        # Retired after the system instant: held then as open-ended.
        open_end = (
            f"({a}.expired_at IS NOT NULL AND {a}.expired_at > $ts) OR {a}.invalid_at IS NULL"
        )
    else:
        open_end = f"{a}.invalid_at IS NULL"
    if time.as_of is not None:
        params["ta"] = to_db(time.as_of)
        parts.append(f"({a}.valid_at IS NULL OR {a}.valid_at <= $ta)")
        parts.append(f"({open_end} OR {a}.invalid_at > $ta)")
    elif not time.include_invalidated:
        parts.append(f"({open_end} OR {a}.invalid_at > $ts)")
    return " AND ".join(parts), params


def facts_at(
    conn: Conn,
    groups: Sequence[str] | None,
    time: TimeFilter,
    at: datetime,
    limit: int | None = None,
) -> list[Fact]:
    """Facts of the groups visible under `time`; with `limit`, the first by uuid descending."""
    clause, params = _group_filter("f", groups)
    when, tparams = time_clause("f", time, at)
    params.update(tparams)
    tail = ""
    if limit is not None:
        tail = " ORDER BY f.uuid DESC LIMIT $limit"
        params["limit"] = limit
    rows = conn.rows(f"MATCH {_HOPS} {_where(clause, when)} RETURN {FACT_COLS}{tail}", params)
    return [_fact(r) for r in rows]


def neighbor_facts_at(
    conn: Conn,
    center: str,
    groups: Sequence[str] | None,
    limit: int,
    time: TimeFilter,
    at: datetime,
) -> list[Fact]:
    """`graph.neighbor_facts` restricted to facts visible under `time` (filtered before the limit)."""
    when, params = time_clause("f", time, at)
    return graph.neighbor_facts(conn, center, groups, limit, when, params)


def fact_changes(
    conn: Conn,
    groups: Sequence[str] | None,
    since: datetime,
    until: datetime,
    entity_uuid: str | None = None,
) -> list[Fact]:
    """Facts with any of valid_at, invalid_at, created_at, expired_at in `[since, until)`."""
    clause, params = _group_filter("f", groups)
    params.update({"s": to_db(since), "u": to_db(until)})
    window = " OR ".join(
        f"(f.{col} >= $s AND f.{col} < $u)"
        for col in ("valid_at", "invalid_at", "created_at", "expired_at")
    )
    entity = ""
    if entity_uuid is not None:
        params["e"] = entity_uuid
        entity = "(a.uuid = $e OR b.uuid = $e)"
    rows = conn.rows(
        f"MATCH {_HOPS} {_where(clause, entity, f'({window})')} RETURN {FACT_COLS}", params
    )
    return [_fact(r) for r in rows]


def facts_around(
    conn: Conn, entity_uuids: Iterable[str], groups: Sequence[str] | None = None
) -> list[Fact]:
    """Facts (any time) with at least one of the entities as an endpoint, each fact once,
    optionally restricted to groups. A fact whose other endpoint is missing (possible only for
    replayed or cross-group data) is found through the endpoint it has."""
    clause, params = _group_filter("f", groups)
    keys = list(dict.fromkeys(entity_uuids))
    # Two steps: the facts' uuids through each entity's RELATES_TO edges (either direction),
    # then their rows by primary key. Returning the fact's columns from the pattern itself cost
    # ~4.5 ms a key against ~1 ms for the uuid alone (Kuzu 0.11, 100k facts), so fetching the
    # rows afterwards halved facts_around (bench/scale.py: 64 keys 748 -> 366 ms CPU at 100k).
    one = f"MATCH (:Entity {{uuid: $u}})-[:RELATES_TO]-(f:Fact) {_where(clause)} RETURN f.uuid"
    many = (
        f"MATCH (e:Entity)-[:RELATES_TO]-(f:Fact) {_where('e.uuid IN $keys', clause)} RETURN f.uuid"
    )
    found = conn.point_rows(one, many, keys, params, table="Entity", lookup=False)
    uuids = list(dict.fromkeys(row[0] for row in found))
    rows = conn.point_rows(
        f"MATCH (f:Fact {{uuid: $u}}) RETURN {FACT_COLS}",
        f"UNWIND $keys AS u MATCH (f:Fact {{uuid: u}}) RETURN {FACT_COLS}",
        uuids,
        table="Fact",
    )
    return [_fact(row) for row in rows]


# Per fact, two queries from the fact's primary key (its row with the outgoing hop, then the
# incoming hop: ~1.1 ms each), against reading the rows by primary key with their node offsets
# and checking every hop in one query that filters the Fact table on those offsets (no column
# read: ~0.5 us a fact) before it follows the hops (Kuzu 0.11, 93k facts, CPU time on a loaded
# machine: 116 keys ~150 ms against ~250 ms key by key; at 1M facts a page of 100 is read
# key by key, ~370 ms, against ~590 ms with the offset scan).
_PER_FACT_MS = 2.2
_SCAN_MS_PER_ROW = 0.0005
_ROW_OUT = f"MATCH (f:Fact {{uuid: $u}})-[:RELATES_TO]->(:Entity) RETURN {FACT_COLS} LIMIT 1"
_HOP_IN = "MATCH (f:Fact {uuid: $u})<-[:RELATES_TO]-(:Entity) RETURN f.uuid LIMIT 1"
_ROW_AT = f"MATCH (f:Fact {{uuid: $u}}) RETURN offset(id(f)), {FACT_COLS}"
_HOPS_AT = f"MATCH {_HOPS} WHERE offset(id(f)) IN $offsets RETURN DISTINCT offset(id(f)), f.uuid"


def facts_with_hops_by_uuid(conn: Conn, uuids: Iterable[str]) -> dict[str, Fact]:
    """The facts among `uuids` whose two structural hops exist (`_HOPS`), by uuid; the others
    are absent. In a large Fact table they are read in batches (`_facts_with_hops_union`);
    otherwise a few keys are read one by one from the fact (the `_HOPS` pattern with the uuid
    fixed is planned from the entities: ~27 ms a key at 100k facts), more by primary key and their hops checked in one query on the rows' node offsets (a hop found is matched
    on offset and uuid, so a row deleted and its offset reused in between is not mistaken)."""
    keys = list(dict.fromkeys(uuids))
    if not keys:
        return {}
    if conn.table_rows("Fact") >= _UNION_FROM_ROWS:
        return _facts_with_hops_union(conn, keys)
    out: dict[str, Fact] = {}
    if len(keys) * _PER_FACT_MS <= conn.table_rows("Fact") * _SCAN_MS_PER_ROW:
        for uuid in keys:
            row = conn.rows(_ROW_OUT, {"u": uuid})
            if row and conn.rows(_HOP_IN, {"u": uuid}):
                out[uuid] = _fact(row[0])
        return out
    rows = [row for uuid in keys for row in conn.rows(_ROW_AT, {"u": uuid})]
    if not rows:
        return {}
    hopped = {(r[0], r[1]) for r in conn.rows(_HOPS_AT, {"offsets": [r[0] for r in rows]})}
    return {row[1]: _fact(row[1:]) for row in rows if (row[0], row[1]) in hopped}


# From how many rows in its table a batch of keys is read with `_union_rows` rather than one
# prepared statement per key. A statement per key costs more as the table grows (at 1M facts,
# 500k entities, 100k episodes: ~3.2 ms CPU a fact with its hops, ~2.3 ms an entity's
# provenance, whose plan joins the Episode table) while a `UNION ALL` branch stays near ~1.8 ms
# and ~1.3 ms; at 100k facts the statements per key are the cheaper (Kuzu 0.11, the shared
# 2-core machine, bench/scale.py's workspaces).
_UNION_FROM_ROWS = 300_000
# Keys per statement of `_union_rows`: one prepared statement per count up to this per pattern.
_UNION_MAX = 16


def _union_rows(conn: Conn, branch: str, keys: Sequence[str]) -> list[list[Any]]:
    """`branch`, a statement on one primary key `$u`, for every key: one statement per
    `_UNION_MAX` keys, the branches joined by `UNION ALL` (each a primary-key lookup: an
    `UNWIND $keys ... MATCH {uuid: u}` is a hash join that scans the table, seconds at 1M
    facts), so Kuzu's per-statement cost is paid once per 16 keys. On LadybugDB (an engine with
    `unwind_lookups`) one statement per key instead: it keeps ~4.5 MB of buffer pool per live
    16-branch statement (`graph._union_by_uuid`), and an `UNWIND` of these patterns scans (at
    1M facts it filled the pool); one by one, 16 facts' rows cost 3.2 ms CPU there."""
    if conn.traits.unwind_lookups:
        return [row for key in keys for row in conn.rows(branch, {"u": key})]
    out: list[list[Any]] = []
    for start in range(0, len(keys), _UNION_MAX):
        chunk = keys[start : start + _UNION_MAX]
        query = " UNION ALL ".join(branch.replace("$u", f"$u{i}") for i in range(len(chunk)))
        out += conn.rows(query, {f"u{i}": key for i, key in enumerate(chunk)})
    return out


_UNION_ROW_OUT = f"MATCH (f:Fact {{uuid: $u}})-[:RELATES_TO]->(:Entity) RETURN {FACT_COLS}"
_UNION_HOP_IN = "MATCH (:Entity)-[:RELATES_TO]->(f:Fact {uuid: $u}) RETURN f.uuid"


def _facts_with_hops_union(conn: Conn, keys: Sequence[str]) -> dict[str, Fact]:
    """`facts_with_hops_by_uuid` in two batched reads: the rows with their outgoing hop, then
    the incoming hop of the facts found (both hops in one branch are planned from the
    entities: seconds for 100 keys)."""
    rows: dict[str, list[Any]] = {}
    for row in _union_rows(conn, _UNION_ROW_OUT, keys):
        rows.setdefault(row[0], row)  # one row per outgoing hop
    hopped = {row[0] for row in _union_rows(conn, _UNION_HOP_IN, list(rows))}
    return {uuid: _fact(row) for uuid, row in rows.items() if uuid in hopped}


_MENTIONED = (
    "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity {uuid: $u}) "
    "RETURN e.uuid, ep.uuid, ep.source_description, ep.created_at"
)


def endpoint_provenance(
    conn: Conn, entity_uuids: Iterable[str]
) -> dict[str, list[tuple[str, str]]]:
    """`graph.provenance(conn, entity_uuids, None)`, in batched reads (`_union_rows`) when the
    Entity table is large: for the ~200 endpoints of a page of facts."""
    keys = list(dict.fromkeys(entity_uuids))
    if conn.table_rows("Entity") < _UNION_FROM_ROWS:
        return graph.provenance(conn, keys, None)
    rows = _union_rows(conn, _MENTIONED, keys)
    return provenance_of(rows)
