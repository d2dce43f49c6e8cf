"""The Cypher lcg runs on FalkorDB: one group's graph, the statements of each semantic operation,
and the row decoders. Pure functions (no client), so they can be read and tested alone.

Every operation is written to have the effect `lcg.storage.graph.apply_ops` has on Kuzu, as
statements that run in order inside one MULTI/EXEC with no reads in between (the state each one
needs is matched in Cypher when it runs):

- `entity.upsert`, `episode.add`: `MERGE` by uuid and set every column (last row of a uuid wins);
- `fact.upsert`: `MERGE` by uuid, marking the facts that are new or whose endpoints changed; only
  those lose their hops and get new ones to the endpoints that exist (a fact whose endpoints are
  unchanged keeps its hops, as on Kuzu);
- `fact.invalidate`, `episode.delete` (and its embedding rows), `mentions.add` (once each),
  `group.purge` (every row of the group; the graph's position stays);
- `cypher.exec` (raw Kuzu Cypher from the WAL) is refused: its text is Kuzu's dialect.

Unlike Kuzu, FalkorDB's `UNWIND ... MATCH` by an indexed key is an index lookup per row, so
batches need none of the one-statement-per-row paths of the Kuzu code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lcg.errors import StorageError
from lcg.models import EmbeddingRow, Entity, Episode, Fact
from lcg.storage import rows as records
from lcg.storage.falkordb.keys import from_micros, to_micros
from lcg.wal.changes import (
    Change,
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
    decode_all,
    runs,
)
from lcg.wal.records import Op

__all__ = [
    "ENTITY_COLS",
    "EPISODE_COLS",
    "FACT_COLS",
    "HOPS",
    "INDEXES",
    "Statement",
    "embedding_statements",
    "entity",
    "episode",
    "fact",
    "guarded",
    "op_statements",
]

Statement = tuple[str, dict[str, Any]]

# Range indexes every group graph gets when it is created (FalkorDB answers "already indexed"
# for an existing one).
INDEXES = (
    "CREATE INDEX FOR (x:Entity) ON (x.uuid)",
    "CREATE INDEX FOR (x:Fact) ON (x.uuid)",
    "CREATE INDEX FOR (x:Episode) ON (x.uuid)",
    "CREATE INDEX FOR (x:Embedding) ON (x.key)",
    "CREATE INDEX FOR (x:Meta) ON (x.key)",
)
# The group's position: how many WAL lines (seq 0 .. position-1) the graph holds.
POSITION_NODE = "LcgPosition"
ENSURE_POSITION = f"MERGE (p:{POSITION_NODE}) ON CREATE SET p.pos = 0"
_GUARD = f"MATCH (lcg_guard:{POSITION_NODE}) WHERE lcg_guard.pos = $lcg_pos WITH lcg_guard "
ADVANCE = f"MATCH (p:{POSITION_NODE}) WHERE p.pos = $lcg_pos SET p.pos = $lcg_next"
# The position set back to $lcg_pos when it is past it: after an EXEC that ran the advance
# but not every statement before it (Redis runs the rest of a transaction after an error).
REWIND = f"MATCH (p:{POSITION_NODE}) WHERE p.pos > $lcg_pos SET p.pos = $lcg_pos"

ENTITY_COLS = (
    "e.uuid, e.group_id, e.name, e.labels, e.summary, e.attributes, e.created_at, e.merged_into"
)
FACT_COLS = (
    "f.uuid, f.group_id, f.source_uuid, f.target_uuid, f.name, f.fact, f.relation_type, "
    "f.attributes, f.episodes, f.valid_at, f.invalid_at, f.created_at, f.expired_at"
)
EPISODE_COLS = (
    "ep.uuid, ep.group_id, ep.name, ep.content, ep.source, ep.source_description, "
    "ep.source_file, ep.chunk_id, ep.created_at, ep.valid_at"
)
HOPS = "(a:Entity)-[:RELATES_TO]->(f:Fact)-[:RELATES_TO]->(b:Entity)"


def guarded(statement: Statement, position: int) -> Statement:
    """`statement` made to run only while the group is at `position` (the optimistic check)."""
    query, params = statement
    return _GUARD + query, {**params, "lcg_pos": position}


# -- rows -------------------------------------------------------------------------------------


def entity(row: Sequence[Any]) -> Entity:
    return records.entity(row, from_micros)


def fact(row: Sequence[Any]) -> Fact:
    return records.fact(row, from_micros)


def episode(row: Sequence[Any]) -> Episode:
    return records.episode(row, from_micros)


def entity_row(e: Entity) -> dict[str, Any]:
    return {
        "uuid": e.uuid,
        "group_id": e.group_id,
        "name": e.name,
        "labels": list(e.labels),
        "summary": e.summary,
        "attributes": e.attributes,
        "created_at": to_micros(e.created_at),
        "merged_into": e.merged_into,
    }


def fact_row(f: Fact) -> dict[str, Any]:
    return {
        "uuid": f.uuid,
        "group_id": f.group_id,
        "source_uuid": f.source_uuid,
        "target_uuid": f.target_uuid,
        "name": f.name,
        "fact": f.fact,
        "relation_type": f.relation_type,
        "attributes": f.attributes,
        "episodes": list(f.episodes),
        "valid_at": to_micros(f.valid_at),
        "invalid_at": to_micros(f.invalid_at),
        "created_at": to_micros(f.created_at),
        "expired_at": to_micros(f.expired_at),
    }


def episode_row(ep: Episode) -> dict[str, Any]:
    return {
        "uuid": ep.uuid,
        "group_id": ep.group_id,
        "name": ep.name,
        "content": ep.content,
        "source": ep.source,
        "source_description": ep.source_description,
        "source_file": ep.source_file,
        "chunk_id": ep.chunk_id,
        "created_at": to_micros(ep.created_at),
        "valid_at": to_micros(ep.valid_at),
    }


def _last_by(rows: Sequence[dict[str, Any]], key: str) -> list[dict[str, Any]]:
    return list({row[key]: row for row in rows}.values())


# -- writes -----------------------------------------------------------------------------------


def upsert(label: str, rows: Sequence[dict[str, Any]]) -> list[Statement]:
    """Replace-or-create rows by uuid (within one batch the last row of a uuid wins).

    Every row replaces all of its node's properties with one map (`SET x = r`): FalkorDB 4.16.3
    mis-applies a SET of several properties when some are null (removed), e.g. setting
    `invalid_at` and removing `created_at` in one statement kept the old `created_at` and
    dropped the new `invalid_at` (measured; `test_storage_backends` found it)."""
    last = _last_by(rows, "uuid")
    if not last:
        return []
    return [(f"UNWIND $rows AS r MERGE (x:{label} {{uuid: r.uuid}}) SET x = r", {"rows": last})]


def create(label: str, rows: Sequence[dict[str, Any]]) -> list[Statement]:
    """Create rows (their keys must be new), 100 a statement: measured as fast per row as
    1,000-row batches at a tenth of the latency (docs/server-mode-design.md §4)."""
    return [
        (f"UNWIND $rows AS r CREATE (x:{label}) SET x = r", {"rows": list(rows[i : i + 100])})
        for i in range(0, len(rows), 100)
    ]


def upsert_facts(rows: Sequence[dict[str, Any]]) -> list[Statement]:
    """Replace-or-create facts; new facts and facts whose endpoints changed get their hops (to
    whichever endpoints exist) rebuilt, the others keep theirs (`graph.upsert_facts`)."""
    last = _last_by(rows, "uuid")
    if not last:
        return []
    uuids = [r["uuid"] for r in last]
    moved = "coalesce(x.source_uuid, '') <> r.source_uuid OR coalesce(x.target_uuid, '') <> r.target_uuid"
    return [
        (
            # A new node has no source_uuid yet; `SET x = r` (see `upsert`) then the mark.
            f"UNWIND $rows AS r MERGE (x:Fact {{uuid: r.uuid}}) WITH x, r, "
            f"(x.source_uuid IS NULL OR {moved}) AS rewire SET x = r SET x.lcg_rewire = rewire",
            {"rows": last},
        ),
        (
            "UNWIND $uuids AS u MATCH (:Entity)-[h:RELATES_TO]->(x:Fact {uuid: u}) "
            "WHERE x.lcg_rewire DELETE h",
            {"uuids": uuids},
        ),
        (
            "UNWIND $uuids AS u MATCH (x:Fact {uuid: u})-[h:RELATES_TO]->(:Entity) "
            "WHERE x.lcg_rewire DELETE h",
            {"uuids": uuids},
        ),
        (
            "UNWIND $uuids AS u MATCH (x:Fact {uuid: u}) WHERE x.lcg_rewire "
            "MATCH (a:Entity {uuid: x.source_uuid}) CREATE (a)-[:RELATES_TO]->(x)",
            {"uuids": uuids},
        ),
        (
            "UNWIND $uuids AS u MATCH (x:Fact {uuid: u}) WHERE x.lcg_rewire "
            "MATCH (b:Entity {uuid: x.target_uuid}) CREATE (x)-[:RELATES_TO]->(b)",
            {"uuids": uuids},
        ),
        (
            "UNWIND $uuids AS u MATCH (x:Fact {uuid: u}) SET x.lcg_rewire = null",
            {"uuids": uuids},
        ),
    ]


def embedding_statements(rows: Sequence[EmbeddingRow]) -> list[Statement]:
    """Replace-or-create Embedding rows by key (last row of a key wins)."""
    params = [
        {
            "key": r.key,
            "owner": r.owner,
            "kind": r.kind,
            "group_id": r.group_id,
            "text_hash": r.text_hash,
        }
        for r in rows
    ]
    last = _last_by(params, "key")
    if not last:
        return []
    return [("UNWIND $rows AS r MERGE (x:Embedding {key: r.key}) SET x = r", {"rows": last})]


def delete_embeddings(keys: Sequence[str]) -> list[Statement]:
    unique = list(dict.fromkeys(keys))
    if not unique:
        return []
    return [("UNWIND $keys AS k MATCH (v:Embedding {key: k}) DELETE v", {"keys": unique})]


def set_meta(key: str, value: str | None) -> Statement:
    if value is None:
        return "MATCH (m:Meta {key: $k}) DELETE m", {"k": key}
    return "MERGE (m:Meta {key: $k}) SET m.value = $v", {"k": key, "v": value}


def op_statements(group_id: str, ops: Sequence[Op]) -> list[Statement]:
    """The statements that apply `ops` to the group's graph, in order.

    Raises:
        WalOpError: an operation is unknown or its data is malformed (nothing is built).
        StorageError: the operation cannot run on FalkorDB (`cypher.exec`).
    """
    out: list[Statement] = []
    for run in runs(decode_all(ops, group_id)):
        out += _run(run)
    return out


def _run(run: Sequence[Change]) -> list[Statement]:
    match run[0]:
        case EntityUpsert():
            return upsert(
                "Entity", [entity_row(c.entity) for c in run if isinstance(c, EntityUpsert)]
            )
        case FactUpsert():
            return upsert_facts([fact_row(c.fact) for c in run if isinstance(c, FactUpsert)])
        case EpisodeAdd():
            return upsert(
                "Episode", [episode_row(c.episode) for c in run if isinstance(c, EpisodeAdd)]
            )
        case FactInvalidate():
            rows = [
                {
                    "uuid": c.uuid,
                    "invalid_at": to_micros(c.invalid_at),
                    "expired_at": to_micros(c.expired_at),
                }
                for c in run
                if isinstance(c, FactInvalidate)
            ]
            # One property a statement: see `upsert` (a SET of several with nulls is mis-applied).
            return [
                (
                    f"UNWIND $rows AS r MATCH (f:Fact {{uuid: r.uuid}}) SET f.{col} = r.{col}",
                    {"rows": rows},
                )
                for col in ("invalid_at", "expired_at")
            ]
        case EpisodeDelete():
            uuids = [c.uuid for c in run if isinstance(c, EpisodeDelete)]
            return [
                (
                    "UNWIND $uuids AS u MATCH (ep:Episode {uuid: u}) DETACH DELETE ep",
                    {"uuids": uuids},
                ),
                *delete_embeddings([f"episode:{u}" for u in uuids]),
            ]
        case MentionsAdd(episode, entities):
            wanted = list(dict.fromkeys(entities))
            if not wanted:
                return []
            return [
                (
                    "MATCH (ep:Episode {uuid: $ep}) UNWIND $ents AS u MATCH (e:Entity {uuid: u}) "
                    "MERGE (ep)-[:MENTIONS]->(e)",
                    {"ep": episode, "ents": wanted},
                )
            ]
        case GroupPurge():
            return [
                (f"MATCH (x:{label}) DETACH DELETE x", {})
                for label in ("Fact", "Entity", "Episode", "Embedding")
            ]
        case CypherExec():
            raise StorageError(
                "cypher.exec: raw Cypher operations are Kuzu's dialect and do not run on the "
                "falkordb backend"
            )
