"""Reads for curation and cross-group pointers, and the one derived repair they need.

A cross-group fact (docs/api.md §knowledge_add_cross_group_edge) is an ordinary `Fact` row of its
own group whose endpoints may be entities of other groups; its pointers live in its `attributes`
under `cross_group_pointers`, so every WAL, fold, bulk and dump path carries them unchanged.

`rewire_hops` is derived, never logged: a group replayed from its WAL gets the hops of its own
facts, but a fact of another group pointing into it loses its hop when the group is purged and
cannot get it back from the other group's replay if that ran first. The hop is fully determined
by the fact's `source_uuid`/`target_uuid`, so it is recreated from them after every replay.
"""

from __future__ import annotations

from collections.abc import Iterable

from lcg.models import Fact
from lcg.storage.graph import FACT_COLS, _fact, delete_embeddings
from lcg.storage.store import Conn

__all__ = [
    "POINTER_KEY",
    "active_facts_touching",
    "drop_dangling_facts",
    "episodes_mentioning",
    "pointer_facts",
    "rewire_hops",
]

POINTER_KEY = "cross_group_pointers"


def pointer_facts(conn: Conn) -> list[Fact]:
    """Non-invalidated facts that carry cross-group pointers, by uuid."""
    rows = conn.rows(
        f"MATCH (f:Fact) WHERE f.invalid_at IS NULL AND contains(f.attributes, $k) "
        f"RETURN {FACT_COLS} ORDER BY f.uuid",
        {"k": f'"{POINTER_KEY}"'},
    )
    return [_fact(r) for r in rows]


def active_facts_touching(conn: Conn, entity_uuids: Iterable[str]) -> list[Fact]:
    """Non-invalidated facts (any group) with an endpoint among the entities, by uuid."""
    rows = conn.rows(
        "MATCH (f:Fact) WHERE f.invalid_at IS NULL AND "
        "(f.source_uuid IN $u OR f.target_uuid IN $u) "
        f"RETURN {FACT_COLS} ORDER BY f.uuid",
        {"u": list(entity_uuids)},
    )
    return [_fact(r) for r in rows]


def episodes_mentioning(conn: Conn, entity_uuids: Iterable[str], group_id: str) -> list[str]:
    """Uuids of the group's episodes that mention any of the entities, sorted (one statement
    per key on LadybugDB, `point_rows(lookup=False)`: the `UNWIND` is a scan there, 457 ms CPU
    for 16 entities at 1M facts)."""
    rows = conn.point_rows(
        "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity {uuid: $u}) WHERE ep.group_id = $g "
        "RETURN DISTINCT ep.uuid",
        "UNWIND $keys AS u MATCH (ep:Episode)-[:MENTIONS]->(e:Entity {uuid: u}) "
        "WHERE ep.group_id = $g RETURN DISTINCT ep.uuid",
        list(dict.fromkeys(entity_uuids)),
        {"g": group_id},
        table="Entity",
        lookup=False,
    )
    return sorted({r[0] for r in rows})


def drop_dangling_facts(conn: Conn) -> list[str]:
    """Delete the facts whose source or target entity does not exist (with their hops and
    embeddings), cross-group facts excepted (their endpoints may live in other groups), and
    return their uuids: what a raw statement replayed from the WAL may leave behind, taken
    out as a bulk replay leaves such facts out."""
    found = conn.rows(
        "MATCH (f:Fact) WHERE NOT contains(f.attributes, $k) AND ("
        "NOT EXISTS { MATCH (a:Entity) WHERE a.uuid = f.source_uuid } "
        "OR NOT EXISTS { MATCH (b:Entity) WHERE b.uuid = f.target_uuid }) RETURN f.uuid",
        {"k": f'"{POINTER_KEY}"'},
    )
    uuids = [str(row[0]) for row in found]
    if uuids:
        conn.run("UNWIND $u AS x MATCH (f:Fact {uuid: x}) DETACH DELETE f", {"u": uuids})
        delete_embeddings(conn, [f"fact:{u}" for u in uuids])
    return uuids


def rewire_hops(conn: Conn) -> None:
    """Create the missing hops of cross-group facts whose resolved endpoints exist (in a tx)."""
    base = f"MATCH (f:Fact) WHERE contains(f.attributes, '\"{POINTER_KEY}\"') WITH f "
    conn.run(
        base + "MATCH (a:Entity) WHERE a.uuid = f.source_uuid "
        "AND NOT EXISTS { MATCH (a)-[:RELATES_TO]->(f) } CREATE (a)-[:RELATES_TO]->(f)"
    )
    conn.run(
        base + "MATCH (b:Entity) WHERE b.uuid = f.target_uuid "
        "AND NOT EXISTS { MATCH (f)-[:RELATES_TO]->(b) } CREATE (f)-[:RELATES_TO]->(b)"
    )
