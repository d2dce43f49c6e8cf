"""Bulk loading a folded group with `COPY ... FROM` pyarrow tables, or `UNWIND` batches.

`COPY` from pyarrow is 50-100x faster than `UNWIND` batches. The caller guarantees the group
holds no rows yet (a full replay starts from an empty or purged group) and runs this inside one
transaction. On LadybugDB, `COPY` runs only into a database that holds nothing but bulk loads
(`Conn.copy_ok`, set by the store): each one keeps ~17 MB of native memory until the handle
closes (the store reopens it after the commit), it would keep each table alive until then
(`Conn.copy_from` drops the binding's cached statement that holds it: `lcg.storage.spool`), and a
failed one is recovered by starting that database over (`Store._rolled_back`). Into any other database (a rebuild of one group beside
others) the same tables go in `UNWIND ... CREATE` batches (`_BATCH` rows a statement).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime

import pyarrow as pa

from lcg.models import EmbeddingRow, Fact
from lcg.storage.store import Conn
from lcg.wal.fold import FoldedGroup

__all__ = ["load_folded"]

_TS = pa.timestamp("us")
_STRS = pa.list_(pa.string())
# Rows per `UNWIND ... CREATE` statement when COPY is not used.
_BATCH = 2000
# The primary key of each node table a relationship table joins.
_KEYS = {"Episode": "uuid", "Entity": "uuid", "Fact": "uuid"}


def _cast(kind: pa.DataType, value: str) -> str:
    """`value` cast to the column's type: a struct field null in every row of an `UNWIND`
    would otherwise be typed STRING."""
    if pa.types.is_timestamp(kind):
        return f"CAST({value} AS TIMESTAMP)"
    if pa.types.is_list(kind):
        return f"CAST({value} AS STRING[])"
    return f"CAST({value} AS STRING)"


def _put(conn: Conn, table: str, frame: pa.Table, rel: tuple[str, str] | None = None) -> None:
    """Load `frame` into `table` (a relationship table from `rel[0]` to `rel[1]`, its columns
    `from` and `to` the endpoints' keys): COPY where `conn.copy_ok`, else UNWIND batches."""
    if conn.copy_ok:
        conn.copy_from(table, frame, f" (from='{rel[0]}', to='{rel[1]}')" if rel else "")
        return
    if rel is not None:
        rows = [
            {"a": a, "b": b}
            for a, b in zip(
                frame.column("from").to_pylist(), frame.column("to").to_pylist(), strict=True
            )
        ]
        text = (
            # One MATCH per endpoint: one comma-joined MATCH scans on LadybugDB (lcg.storage.graph
            # `_NEW_FACTS`).
            f"UNWIND $rows AS r MATCH (a:{rel[0]} {{{_KEYS[rel[0]]}: r.a}}) MATCH "
            f"(b:{rel[1]} {{{_KEYS[rel[1]]}: r.b}}) CREATE (a)-[:{table}]->(b)"
        )
    else:
        rows = frame.to_pylist()
        fields = ", ".join(
            f"{name}: {_cast(frame.schema.field(name).type, 'r.' + name)}"
            for name in frame.column_names
        )
        text = f"UNWIND $rows AS r CREATE (:{table} {{{fields}}})"
    for start in range(0, len(rows), _BATCH):
        conn.run(text, {"rows": rows[start : start + _BATCH]})


def _times(values: Iterable[datetime | None]) -> pa.Array:
    """A timestamp column in Kuzu's naive-UTC form (`lcg.timeutil.to_db`): pyarrow converts
    aware datetimes to UTC itself, 4x faster than converting each value in Python first (the
    rows' datetimes are always aware: `lcg.timeutil` parses every stored time to UTC)."""
    return pa.array(list(values), type=_TS)


def load_folded(conn: Conn, folded: FoldedGroup, embeddings: Sequence[EmbeddingRow]) -> None:
    """Load every row of `folded` (and its embeddings) into the graph (`_put`)."""
    conn.bulk_loads += 1
    episodes = list(folded.episodes.values())
    if episodes:
        _put(
            conn,
            "Episode",
            pa.table(
                {
                    "uuid": [e.uuid for e in episodes],
                    "group_id": [e.group_id for e in episodes],
                    "name": [e.name for e in episodes],
                    "content": [e.content for e in episodes],
                    "source": [e.source for e in episodes],
                    "source_description": [e.source_description for e in episodes],
                    "source_file": [e.source_file for e in episodes],
                    "chunk_id": [e.chunk_id for e in episodes],
                    "created_at": _times(e.created_at for e in episodes),
                    "valid_at": _times(e.valid_at for e in episodes),
                }
            ),
        )
    entities = list(folded.entities.values())
    if entities:
        _put(
            conn,
            "Entity",
            pa.table(
                {
                    "uuid": [e.uuid for e in entities],
                    "group_id": [e.group_id for e in entities],
                    "name": [e.name for e in entities],
                    "labels": pa.array([list(e.labels) for e in entities], type=_STRS),
                    "summary": [e.summary for e in entities],
                    "attributes": [e.attributes for e in entities],
                    "created_at": _times(e.created_at for e in entities),
                    "merged_into": pa.array([e.merged_into for e in entities], type=pa.string()),
                }
            ),
        )
    facts = list(folded.facts.values())
    if facts:
        _put(conn, "Fact", fact_table(facts))
    if embeddings:
        _put(
            conn,
            "Embedding",
            pa.table(
                {
                    "key": [r.key for r in embeddings],
                    "owner": [r.owner for r in embeddings],
                    "kind": [r.kind for r in embeddings],
                    "group_id": [r.group_id for r in embeddings],
                    "text_hash": [r.text_hash for r in embeddings],
                }
            ),
        )
    wired = folded.hops()
    if wired:
        _put(
            conn,
            "RELATES_TO",
            pa.table({"from": [f.source_uuid for f in wired], "to": [f.uuid for f in wired]}),
            ("Entity", "Fact"),
        )
        _put(
            conn,
            "RELATES_TO",
            pa.table({"from": [f.uuid for f in wired], "to": [f.target_uuid for f in wired]}),
            ("Fact", "Entity"),
        )
    pairs = folded.mention_pairs()
    if pairs:
        _put(
            conn,
            "MENTIONS",
            pa.table({"from": [p[0] for p in pairs], "to": [p[1] for p in pairs]}),
            ("Episode", "Entity"),
        )


def fact_table(facts: Sequence[Fact]) -> pa.Table:
    """The Fact rows as one pyarrow table in the Fact table's column order, for `COPY Fact`
    (the bulk load here, and `graph.upsert_facts` when an episode brings many new facts)."""
    return pa.table(
        {
            "uuid": [f.uuid for f in facts],
            "group_id": [f.group_id for f in facts],
            "source_uuid": [f.source_uuid for f in facts],
            "target_uuid": [f.target_uuid for f in facts],
            "name": [f.name for f in facts],
            "fact": [f.fact for f in facts],
            # "" for none, as storage/graph._fact_params writes it (never NULL)
            "relation_type": pa.array([f.relation_type or "" for f in facts], type=pa.string()),
            "attributes": [f.attributes for f in facts],
            "episodes": pa.array([list(f.episodes) for f in facts], type=_STRS),
            "valid_at": _times(f.valid_at for f in facts),
            "invalid_at": _times(f.invalid_at for f in facts),
            "created_at": _times(f.created_at for f in facts),
            "expired_at": _times(f.expired_at for f in facts),
        }
    )
