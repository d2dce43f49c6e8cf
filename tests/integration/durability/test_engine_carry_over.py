"""A workspace written by the other embedded engine carries over through its WAL.

A child process (the two engines' bindings cannot share a process) writes the scripted
changelog with `LCG_EMBEDDED_STORE` set to the engine this process does not use (Kuzu, in the
default run: today's workspaces), reads it back and prints the answers; this process then opens
the same workspace on its own engine. The open finds the old files, moves them aside, rebuilds
the database from the WAL, checks every group reached the end of its WAL and removes them; the
answers (search, facts, as-of reads, changes, status counts) are the same.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.storage.store import ENGINES, database_engine, default_engine
from lcg.telemetry import ListSink

pytestmark = pytest.mark.anyio

_READS = textwrap.dedent(
    """
    import json
    G = "changelog"

    async def reads(call):
        search = await call("knowledge_find_entities", {"query": "Atlas", "group_ids": [G]})
        passages = await call("knowledge_search_passages", {"query": "Atlas launch due"})
        edges = await call("knowledge_get_edges_by_group", {"group_ids": [G]})
        then = await call(
            "knowledge_get_edges_by_group", {"group_ids": [G], "as_of": "2025-02-15T00:00:00Z"}
        )
        now = await call(
            "knowledge_get_edges_by_group", {"group_ids": [G], "include_invalidated": False}
        )
        timeline = await call("knowledge_get_entity_timeline", {"name": "Atlas", "group_id": G})
        for listing in (edges, then, now):  # rows that tie on every sort key come in storage order
            listing["edges"].sort(key=lambda e: e["uuid"])
        status = await call("knowledge_status", {})
        counts = {k: status[k] for k in ("entity_count", "relationship_count", "episode_count")}
        return json.loads(json.dumps(
            {"search": search, "passages": passages, "edges": edges, "then": then, "now": now,
             "timeline": timeline, "counts": counts}, default=str, sort_keys=True))
    """
)

_WRITER = textwrap.dedent(
    """
    import json, sys
    import anyio
    from pathlib import Path
    from lcg import Settings, open_engine
    from lcg.service.registry import dispatch
    sys.path.insert(0, sys.argv[4])
    from changelog_support import write_changelog
    exec(sys.argv[3])

    async def main():
        settings = Settings.for_home(
            Path(sys.argv[1]), embedder="hash", kuzu_buffer_pool_mb=256,
            embedded_store=sys.argv[2],
        )
        engine = open_engine(settings)
        try:
            call = lambda method, params: dispatch(engine, method, params)
            await write_changelog(call)
            print(json.dumps(await reads(call)))
        finally:
            engine.close()

    anyio.run(main)
    """
)


def _reads_here() -> Any:
    scope: dict[str, Any] = {}
    exec(_READS, scope)  # the same reads the child ran
    return scope["reads"]


def _write_with(engine: str, home: Path) -> str:
    """Run the writer child on `engine`; its last line of output (the answers)."""
    here = Path(__file__).resolve()
    child = subprocess.run(
        [sys.executable, "-c", _WRITER, str(home), engine, _READS, str(here.parents[1])],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=here.parents[3],
        env={"PATH": "/usr/bin:/bin", "HOME": str(home.parent)},
        check=False,
    )
    assert child.returncode == 0, child.stderr[-3000:]
    return child.stdout.strip().splitlines()[-1]


async def test_a_workspace_of_the_other_engine_is_rebuilt_from_its_wal(tmp_path: Path) -> None:
    here = default_engine()
    other = next(e for e in ENGINES if e != here)
    home = tmp_path / ".lcg"
    before = json.loads(_write_with(other, home))
    settings = Settings.for_home(
        home, embedder="hash", kuzu_buffer_pool_mb=256, embedded_store=here
    )
    assert database_engine(settings.db_path) == other

    events = ListSink()
    engine = open_engine(settings, events=events)
    try:
        assert database_engine(settings.db_path) == here
        status = await dispatch(engine, "knowledge_status", {})
        carry = status["storage"]["carry_over"]
        assert carry["from"] == other and carry["to"] == here
        assert carry["state"] == "completed" and carry["old_files"] is None
        assert not settings.db_path.with_name(f"{settings.db_path.name}.{other}-old").exists()
        assert [e["phase"] for e in events.of_type("embedded_store_carry_over")] == [
            "moved_aside",
            "completed",
        ]
        after = await _reads_here()(lambda method, params: dispatch(engine, method, params))
        assert after["counts"] == before["counts"] and before["counts"]["relationship_count"] > 0
        assert after == before
    finally:
        engine.close()

    again = open_engine(settings)  # an ordinary open now: nothing to carry over
    try:
        assert "carry_over" not in (await dispatch(again, "knowledge_status", {}))["storage"]
    finally:
        again.close()
