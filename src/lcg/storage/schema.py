"""The graph schema as named, ordered migrations, each applied once and recorded in `Meta`.

    (:Episode)-[:MENTIONS]->(:Entity)
    (:Entity)-[:RELATES_TO]->(:Fact)-[:RELATES_TO]->(:Entity)     a fact is a node, so it is indexed

`Embedding` records, per `<kind>:<owner uuid>`, the hash of the text that was embedded; the
vectors themselves live in the embedding cache (lcg.embedding.cache), never in Kuzu (no HNSW,
and 384 floats a row made bulk loads and opens slow); `Meta` holds the schema version,
per-group WAL positions and embedding identities as JSON values. There is no Kuzu index
besides primary keys: search is served by lcg's in-process index (lcg.search), and Kuzu's
full-text indexes forced one-row writes and index rebuilds (bench/results/kuzu-0.11.3.md), so
migration 003 drops the ones older databases have.

Migrations run in autocommit mode (Kuzu runs index DDL only there), so each step is written
to be safe to re-run: a crash between a step and its record re-runs the step at the next open.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["FULLTEXT_INDEXES", "MIGRATIONS", "Migration"]

Execute = Callable[[str], Any]
Migration = tuple[str, Callable[[Execute], None]]

# (table, index name) of the full-text indexes that migration 002 used to create.
FULLTEXT_INDEXES: tuple[tuple[str, str], ...] = (
    ("Entity", "entity_text"),
    ("Fact", "fact_text"),
    ("Episode", "episode_text"),
)


def _m001_core_tables(run: Execute) -> None:
    run(
        "CREATE NODE TABLE IF NOT EXISTS Episode(uuid STRING PRIMARY KEY, group_id STRING, name STRING, "
        "content STRING, source STRING, source_description STRING, source_file STRING, "
        "chunk_id STRING, created_at TIMESTAMP, valid_at TIMESTAMP)"
    )
    run(
        "CREATE NODE TABLE IF NOT EXISTS Entity(uuid STRING PRIMARY KEY, group_id STRING, name STRING, "
        "labels STRING[], summary STRING, attributes STRING, created_at TIMESTAMP, "
        "merged_into STRING)"
    )
    run(
        "CREATE NODE TABLE IF NOT EXISTS Fact(uuid STRING PRIMARY KEY, group_id STRING, source_uuid STRING, "
        "target_uuid STRING, name STRING, fact STRING, relation_type STRING, attributes STRING, "
        "episodes STRING[], valid_at TIMESTAMP, invalid_at TIMESTAMP, created_at TIMESTAMP, "
        "expired_at TIMESTAMP)"
    )
    run(
        "CREATE NODE TABLE IF NOT EXISTS Embedding(key STRING PRIMARY KEY, owner STRING, kind STRING, "
        "group_id STRING, text_hash STRING)"
    )
    run("CREATE REL TABLE IF NOT EXISTS RELATES_TO(FROM Entity TO Fact, FROM Fact TO Entity)")
    run("CREATE REL TABLE IF NOT EXISTS MENTIONS(FROM Episode TO Entity)")


def _m002_fulltext_indexes(run: Execute) -> None:
    """Kept for the record, and does nothing: it created Kuzu full-text indexes on Entity
    (name, summary), Fact (name, fact) and Episode (content, source_description), which 003
    drops again. A new database runs it as a no-op, so it never builds them."""


def _m003_drop_fulltext_indexes(run: Execute) -> None:
    existing = {row[1] for row in run("CALL SHOW_INDEXES() RETURN *").get_all()}
    for table, name in FULLTEXT_INDEXES:
        if name in existing:
            run(f"CALL DROP_FTS_INDEX('{table}', '{name}')")


MIGRATIONS: tuple[Migration, ...] = (
    ("001_core_tables", _m001_core_tables),
    ("002_fulltext_indexes", _m002_fulltext_indexes),
    ("003_drop_fulltext_indexes", _m003_drop_fulltext_indexes),
)
