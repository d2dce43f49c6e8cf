"""Lifecycle methods: health_check, knowledge_status, knowledge_close (docs/api.md §lifecycle,
§status-fields)."""

from __future__ import annotations

from typing import Any

from lcg.admin import status
from lcg.engine import Engine
from lcg.service import params as p
from lcg.service.declare import Context, Declarations

declare = Declarations()


# -- lifecycle and status -----------------------------------------------------------------------


@declare("health_check", None, p.Empty, "Liveness and readiness probe.", degraded_ok=True)
async def _health(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await status.health(engine)


@declare(
    "knowledge_status",
    "read",
    p.Empty,
    "Graph counts, per-group WAL positions, index state and the embedder in use. Call it to "
    "see whether the graph is populated and fully caught up with its write-ahead log.",
    degraded_ok=True,
)
async def _status(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    return await status.status(engine)


@declare(
    "knowledge_close",
    "admin",
    p.Empty,
    "Shut the service down gracefully: in-flight calls finish, the log is flushed.",
    degraded_ok=True,
)
async def _close(engine: Engine, a: p.Empty, ctx: Context) -> dict[str, Any]:
    # The transport that received the call performs the shutdown after writing this answer.
    return {"status": "closed"}
