"""Helpers for `knowledge_rebuild_from_wal` background jobs (docs/api.md §knowledge_rebuild_from_wal, §knowledge_rebuild_status)."""

from __future__ import annotations

from typing import Any

import anyio

from lcg import Engine
from lcg.service.registry import dispatch


async def wait_for_job(engine: Engine, job_id: str) -> dict[str, Any]:
    """Poll `knowledge_rebuild_status` until the job is no longer running; its last status."""
    with anyio.fail_after(60):
        while True:
            status = await dispatch(engine, "knowledge_rebuild_status", {"job_id": job_id})
            if status["status"] != "running":
                return status
            await anyio.sleep(0.01)


async def rebuild_and_wait(engine: Engine, params: dict[str, Any]) -> dict[str, Any]:
    """Start a background rebuild, wait for it, and return its full result.

    The result is the completed job's `result` plus the `success` flag of the starting call,
    i.e. what the synchronous (streaming) form answers.
    """
    started = await dispatch(engine, "knowledge_rebuild_from_wal", params)
    assert set(started) == {"success", "job_id", "status"}, started
    assert started["status"] == "running", started
    status = await wait_for_job(engine, started["job_id"])
    assert status["status"] == "completed", status
    assert status["error"] is None, status
    assert status["result"] is not None and "success" not in status["result"], status
    assert status["result"]["dry_run"] is False, status
    return {"success": started["success"], **status["result"]}
