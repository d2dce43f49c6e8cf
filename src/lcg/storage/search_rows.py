"""Bulk reads that load the in-process search index (lcg.search): one group's rows, columnar.

Read through Arrow: loading 100k entities and 150k facts as Python row lists costs seconds; as
columns it is a fraction of that. Timestamps come back as integer microseconds since the epoch
(UTC), with `None` as the given sentinel. Also the point lookups that fetch a search's winners.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyarrow as pa

from lcg.errors import StorageError

# Re-exported: the search module fetches its winning rows by uuid through these.
from lcg.storage.graph import entities_by_uuids, episodes_by_uuids, facts_by_uuids
from lcg.storage.store import Conn

__all__ = [
    "EntityColumns",
    "EpisodeColumns",
    "FactColumns",
    "TemporalTables",
    "entities_by_uuids",
    "entity_columns",
    "episode_columns",
    "episodes_by_uuids",
    "fact_columns",
    "facts_by_uuids",
    "group_ids",
    "temporal_tables",
]

Micros = npt.NDArray[np.int64]


@dataclass(frozen=True)
class EntityColumns:
    uuid: list[str]
    name: list[str]
    summary: list[str]
    labels: list[tuple[str, ...]]


@dataclass(frozen=True)
class FactColumns:
    uuid: list[str]
    name: list[str]
    fact: list[str]
    relation_type: list[str | None]
    source_uuid: list[str]
    target_uuid: list[str]
    valid_at: Micros
    invalid_at: Micros
    created_at: Micros
    expired_at: Micros


@dataclass(frozen=True)
class EpisodeColumns:
    uuid: list[str]
    content: list[str]


def _table(conn: Conn, query: str, params: dict[str, Any]) -> Any:
    result = conn.run(query, params)
    try:
        return result.get_as_arrow()
    except RuntimeError as exc:
        raise StorageError(str(exc)) from exc


def _texts(table: Any, name: str) -> list[str]:
    return [v or "" for v in table.column(name).to_pylist()]


def _micros(table: Any, name: str, missing: int) -> Micros:
    col = table.column(name).cast(pa.timestamp("us")).cast(pa.int64()).fill_null(missing)
    return np.asarray(col.to_numpy(), dtype=np.int64)


def group_ids(conn: Conn, table: str) -> list[str]:
    """Distinct group ids of `Entity`, `Fact` or `Episode` rows."""
    if table not in ("Entity", "Fact", "Episode"):
        raise ValueError(f"unknown table {table!r}")
    return [r[0] for r in conn.rows(f"MATCH (x:{table}) RETURN DISTINCT x.group_id")]


def entity_columns(conn: Conn, group_id: str) -> EntityColumns:
    t = _table(
        conn,
        "MATCH (e:Entity) WHERE e.group_id = $g "
        "RETURN e.uuid AS uuid, e.name AS name, e.summary AS summary, e.labels AS labels",
        {"g": group_id},
    )
    return EntityColumns(
        uuid=t.column("uuid").to_pylist(),
        name=_texts(t, "name"),
        summary=_texts(t, "summary"),
        labels=[tuple(v or ()) for v in t.column("labels").to_pylist()],
    )


def fact_columns(conn: Conn, group_id: str, never: int, always: int) -> FactColumns:
    """A group's facts; absent `valid_at`/`created_at` read as `always`, absent
    `invalid_at`/`expired_at` as `never`."""
    t = _table(
        conn,
        "MATCH (f:Fact) WHERE f.group_id = $g RETURN f.uuid AS uuid, f.name AS name, "
        "f.fact AS fact, f.relation_type AS relation_type, f.source_uuid AS source_uuid, "
        "f.target_uuid AS target_uuid, f.valid_at AS valid_at, f.invalid_at AS invalid_at, "
        "f.created_at AS created_at, f.expired_at AS expired_at",
        {"g": group_id},
    )
    return FactColumns(
        uuid=t.column("uuid").to_pylist(),
        name=_texts(t, "name"),
        fact=_texts(t, "fact"),
        relation_type=t.column("relation_type").to_pylist(),
        source_uuid=_texts(t, "source_uuid"),
        target_uuid=_texts(t, "target_uuid"),
        valid_at=_micros(t, "valid_at", always),
        invalid_at=_micros(t, "invalid_at", never),
        created_at=_micros(t, "created_at", always),
        expired_at=_micros(t, "expired_at", never),
    )


def episode_columns(conn: Conn, group_id: str) -> EpisodeColumns:
    t = _table(
        conn,
        "MATCH (ep:Episode) WHERE ep.group_id = $g RETURN ep.uuid AS uuid, ep.content AS content",
        {"g": group_id},
    )
    return EpisodeColumns(uuid=t.column("uuid").to_pylist(), content=_texts(t, "content"))


@dataclass(frozen=True)
class TemporalTables:
    """What the temporal lists' in-memory rows (lcg.search.factrows) are built from, as Arrow
    tables: every fact row (`graph.FACT_COLS`, times as `timestamp[us]`), the uuids of the facts
    missing a structural hop, every MENTIONS edge (entity uuid, episode uuid) and every
    episode's provenance columns (uuid, source_description, created_at, valid_at)."""

    facts: pa.Table
    hopless: list[str]
    mentions: pa.Table
    episodes: pa.Table


# Fact columns in `graph.FACT_COLS` order; the string columns with few distinct values are
# dictionary encoded (at 1M facts the entity uuids of the endpoints alone are ~70 MB plain).
_ENCODED = ("group_id", "source_uuid", "target_uuid", "name", "relation_type")


def temporal_tables(conn: Conn) -> TemporalTables:
    """Scan the tables `TemporalTables` holds (seconds at 1M facts: a background build)."""
    facts = _table(
        conn,
        "MATCH (f:Fact) RETURN f.uuid AS uuid, f.group_id AS group_id, "
        "f.source_uuid AS source_uuid, f.target_uuid AS target_uuid, f.name AS name, "
        "f.fact AS fact, f.relation_type AS relation_type, f.attributes AS attributes, "
        "f.episodes AS episodes, f.valid_at AS valid_at, f.invalid_at AS invalid_at, "
        "f.created_at AS created_at, f.expired_at AS expired_at",
        {},
    ).combine_chunks()
    columns = []
    for name in facts.column_names:
        col = facts.column(name)
        if name in _ENCODED:
            col = col.dictionary_encode()
        elif name.endswith("_at"):
            col = col.cast(pa.timestamp("us"))
        columns.append(col)
    facts = pa.table(columns, names=facts.column_names)
    hopless = conn.rows(
        "MATCH (f:Fact) WHERE NOT EXISTS { MATCH (:Entity)-[:RELATES_TO]->(f) } "
        "OR NOT EXISTS { MATCH (f)-[:RELATES_TO]->(:Entity) } RETURN f.uuid"
    )
    mentions = _table(
        conn,
        "MATCH (ep:Episode)-[:MENTIONS]->(e:Entity) RETURN e.uuid AS entity, ep.uuid AS episode",
        {},
    ).combine_chunks()
    episodes = _table(
        conn,
        "MATCH (ep:Episode) RETURN ep.uuid AS uuid, "
        "ep.source_description AS source_description, ep.created_at AS created_at, "
        "ep.valid_at AS valid_at",
        {},
    )
    episodes = pa.table(
        [
            episodes.column("uuid"),
            episodes.column("source_description"),
            episodes.column("created_at").cast(pa.timestamp("us")),
            episodes.column("valid_at").cast(pa.timestamp("us")),
        ],
        names=["uuid", "source_description", "created_at", "valid_at"],
    ).combine_chunks()
    return TemporalTables(facts, [row[0] for row in hopless], mentions, episodes)
