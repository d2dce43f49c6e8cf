"""`knowledge_status` and `health_check`: what the graph holds and whether it is caught up (API.md
§3.1), answered also while no database is open (degraded, §3.1.3).

Counts, WAL positions and problems, index and embedder state, the cross-group pointers by state
(`lcg.curation.pointers`), the ontology and extractor in use. Positions are the kernel's
(`Engine.wal_state`, `Engine.backfill_positions`).
"""

from __future__ import annotations

from typing import Any

import anyio.to_thread

from lcg.curation.pointers import counts_by_state
from lcg.embedding import stamp
from lcg.engine import Engine
from lcg.extraction.extractor import extractor_status
from lcg.models import DEFAULT_GROUP_ID
from lcg.ontology import ontology_status
from lcg.storage import graph
from lcg.storage.store import Conn, schema_version
from lcg.timeutil import to_iso_z, to_read_format
from lcg.wal.layout import group_dir, ordered_files


async def status(engine: Engine) -> dict[str, Any]:
    """`knowledge_status` (API.md §3.1): counts, WAL positions, index and embedder state."""
    if not engine.is_open:
        return degraded_status(engine)
    await anyio.to_thread.run_sync(engine.backfill_positions)

    def read(conn: Conn) -> dict[str, Any]:
        c = graph.counts(conn)
        default_dir = group_dir(engine.wal.root, DEFAULT_GROUP_ID)
        files = ordered_files(default_dir)
        wal = {
            "exists": default_dir.is_dir(),
            "file_count": len(files),
            "byte_size": sum(p.stat().st_size for p in files),
            **engine.wal_state(conn, DEFAULT_GROUP_ID),
        }
        identity = engine.embedder.identity
        out: dict[str, Any] = {
            "database_path": engine.settings.database_path_text,
            # The store serving this graph (issue 19): only the embedded Kuzu one runs so far.
            "storage": {
                "backend": "kuzu",
                "server": engine.settings.database_path_text,
                "role": "embedded",
            },
            "embedding_model": identity.model,
            "embedding_dim": identity.dim,
            "embedding_lexical_only": identity.lexical_only,
            "search_vector_floor": engine.search_index.vector_floor,
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
                "wal_groups": {g: engine.wal_state(conn, g) for g in engine.wal.groups()},
                "wal_problems": engine.wal_problems(conn),
                "indices_built": engine.indices_built,
                "name_index_trusted": engine.name_index_trusted,
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
    """`knowledge_status` while no database is open (API.md §3.1.3)."""
    return {
        "running": True,
        "degraded": True,
        "reason": engine.degraded_reason or "unknown",
        "context_graph_initialized": False,
        "connected": False,
        "queryable": False,
        "initializing": False,
        "recovery_available": ["drop_lbug_wal", "rebuild_from_workspace_wal"],
        "ontology": ontology_status(engine.settings),
        "indices_built": engine.indices_built,
        "name_index_trusted": None,
        "name_index_fallback_scans": None,
        "cross_group_pointers": None,
    }


async def health(engine: Engine) -> dict[str, Any]:
    if not engine.is_open:
        return {
            "ok": False,
            "healthy": False,
            "state": "degraded",
            "reason": engine.degraded_reason or "unknown",
        }

    def probe(conn: Conn) -> dict[str, Any]:
        conn.scalar("RETURN 1")
        return {"ok": True, "healthy": True, "state": "healthy"}

    return await engine.read(probe)
