"""`knowledge_status` and `health_check`: what the graph holds and whether it is caught up
(docs/api.md §status-fields), answered also while no database is open (§status-degraded).

Counts, WAL positions and problems, index and embedder state, the cross-group pointers by state
(`lcg.curation.pointers`), the ontology and extractor in use. Positions and WAL problems are
kept by the kernel's catch-up (`lcg.engine.catchup`); this module reads them and back-fills a
position where that is certain.
"""

from __future__ import annotations

import logging
from typing import Any

import anyio.to_thread

from lcg.curation.pointers import counts_by_state
from lcg.embedding import stamp
from lcg.engine import Engine, exclusive
from lcg.engine.catchup import group_has_data
from lcg.engine.replay import applied_position, write_position
from lcg.errors import LcgError
from lcg.extraction.extractor import extractor_status
from lcg.ontology import ontology_status
from lcg.storage.backend import GraphReader, schema_version
from lcg.timeutil import to_iso_z, to_read_format

logger = logging.getLogger(__name__)


async def status(engine: Engine) -> dict[str, Any]:
    """`knowledge_status` (docs/api.md §status-fields): counts, WAL positions, index and embedder
    state."""
    if not exclusive.is_open(engine):
        return degraded_status(engine)
    await anyio.to_thread.run_sync(backfill_positions, engine)

    storage = await anyio.to_thread.run_sync(exclusive.store(engine).status)
    storage.update(await anyio.to_thread.run_sync(exclusive.mode(engine).status))

    def read(conn: GraphReader) -> dict[str, Any]:
        c = conn.counts()
        wal, wal_groups = exclusive.mode(engine).wal_states(conn)
        identity = engine.parts.embedder.identity
        out: dict[str, Any] = {
            "database_path": engine.settings.database_path_text,
            # The store serving this graph: the backend, its server (no password)
            # and the server's replication role.
            "storage": storage,
            "embedding_model": identity.model,
            "embedding_dim": identity.dim,
            "embedding_lexical_only": identity.lexical_only,
            "search_vector_floor": engine.parts.search.vector_floor,
            # The model search answers with: the stamped one until a re-embed completes
            # (docs/embeddings.md), so it may differ from embedding_model.
            "search_embedding_model": engine.parts.search.embedder.identity.model,
            "search_embedding_dim": engine.parts.search.embedder.identity.dim,
            **stamp.model_status(conn, identity),
            "entity_count": c["entities"],
            "relationship_count": c["facts"],
            "episode_count": c["episodes"],
            "last_index_time": to_read_format(c["last_episode"]),
        }
        if c["first_episode"] is not None:
            out["index_created_at"] = to_iso_z(c["first_episode"])
        out.update(
            {
                "context_graph_initialized": True,
                "connected": True,
                "queryable": True,
                "initializing": False,
                "wal": wal,
                "wal_groups": wal_groups,
                "wal_problems": exclusive.wal_problems(engine).wal_problems(conn),
                # What the saved derived indexes' checksums found (lcg.search.sealed).
                "derived_indexes": {
                    **engine.parts.search.integrity(),
                    "name_index_damaged": engine.names.damaged,
                },
                "indices_built": engine.state.indices_built,
                "name_index_trusted": engine.names.trusted,
                "name_index_fallback_scans": 0,
                "cross_group_pointers": counts_by_state(conn),
                "ontology": ontology_status(engine.settings, has_episodes=c["episodes"] > 0),
                "extractor": extractor_status(engine),
                "schema_version": schema_version(conn),
            }
        )
        return out

    return await engine.read(read)


def degraded_status(engine: Engine) -> dict[str, Any]:
    """`knowledge_status` while no database is open (docs/api.md §status-degraded)."""
    return {
        "running": True,
        "degraded": True,
        "reason": engine.state.degraded_reason or "unknown",
        "context_graph_initialized": False,
        "connected": False,
        "queryable": False,
        "initializing": False,
        "recovery_available": ["drop_lbug_wal", "rebuild_from_workspace_wal"],
        "ontology": ontology_status(engine.settings),
        "indices_built": engine.state.indices_built,
        "name_index_trusted": None,
        "name_index_fallback_scans": None,
        "cross_group_pointers": None,
    }


async def health(engine: Engine) -> dict[str, Any]:
    if not exclusive.is_open(engine):
        return {
            "ok": False,
            "healthy": False,
            "state": "degraded",
            "reason": engine.state.degraded_reason or "unknown",
        }

    def probe(conn: GraphReader) -> dict[str, Any]:
        conn.rows("RETURN 1")
        derived = engine.parts.search.integrity()
        if derived["temporal_rows_rebuilding"]:  # answers may be wrong until it is replaced
            return {
                "ok": False,
                "healthy": False,
                "state": "degraded",
                "reason": "derived_index_damaged",
                "derived_indexes": derived,
            }
        return {"ok": True, "healthy": True, "state": "healthy"}

    return await engine.read(probe)


def backfill_positions(engine: Engine) -> None:
    """Record a position for groups that have none where that is certain (docs/api.md §status-wal).

    Only the first backfill rule applies here: a group with no data and no WAL line gets
    `(0, on-disk generation)`. A group whose WAL has lines but no data is hydrated by the
    next startup's bulk catch-up, which recording 0 would turn into a tail replay from seq
    1; a group with data and no position stays unknown — guessing it from the latest
    episode would make startup tail-replay from the guess (`CatchUp.catch_up_plan` refuses to
    guess: it asks for an explicit rebuild). See README, "Differences from the reference".
    """
    # Only a group without WAL lines can qualify: most calls need no lock at all (a running
    # background rebuild holds it for its whole replay).
    wal = engine.parts.wal
    candidates = [g for g in wal.groups() if wal.bounds(g).max_seq is None]
    if not candidates:
        return
    with engine.writer() as writer:
        for group_id in candidates:
            try:
                with writer.connection() as conn:
                    position = applied_position(conn, group_id)
                    if position is not None and position[0] is not None:
                        continue
                    if group_has_data(conn, group_id):
                        continue
                generation = engine.parts.wal.generation(group_id)
                with exclusive.store(engine).transaction() as tx:
                    write_position(tx, group_id, 0, generation)
            except (LcgError, OSError, ValueError) as exc:  # degrade to null, never fail
                logger.warning("group %r: WAL position backfill failed: %s", group_id, exc)
