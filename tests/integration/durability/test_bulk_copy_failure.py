"""A bulk load whose COPYs succeeded and which then fails in Python must not end the process.

Once a COPY appended to a table holding committed rows not yet checkpointed has been rolled
back, any checkpoint of that database handle overruns a heap buffer (LadybugDB aborts with
"malloc_consolidate(): invalid chunk size", Kuzu segfaults), and closing the handle runs one
(`bench/engine_check.py --only copy_rollback_close`). The store closes such a handle without
its checkpoint and starts the bulk-only database over empty (lcg.storage.store `_rolled_back`).

A child process rebuilds three groups from their WAL with a failure injected after the failing
group's COPYs, in `write_position` (the position is written, then the call raises). In
`unchecked`, the checkpoint that follows each bulk commit is skipped, as it is when a reader is
still checked out after the drain: the failing group's COPYs then append to the committed,
unchecked rows of the groups before it, the sequence that aborted the process. The child must
exit normally, with nothing of the failed load served and every other group whole (the ones
loaded before the failure are loaded again); the next open must rebuild every group whole from
the WAL.
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.engine import Batch
from lcg.storage.store import delete_database_files
from lcg.wal.records import Op

pytestmark = pytest.mark.anyio

GROUPS = ("alpha", "beta", "gamma")
FAILING = "beta"
N = 40  # entities (and facts) a group

CHILD = r"""
import json
import sys
from pathlib import Path

import anyio

import lcg.engine.replay as replay
from lcg import Settings, open_engine
from lcg.errors import StorageError
from lcg.storage.store import Store

home, failing, unchecked = Path(sys.argv[1]), sys.argv[2], sys.argv[3] == "1"
settings = Settings.for_home(home, **json.loads(sys.argv[4]))
real_position = replay.write_position
real_checkpoint = Store.checkpoint
failed = []


def failing_position(tx, group_id, *args, **kwargs):
    real_position(tx, group_id, *args, **kwargs)
    if group_id == failing and not failed:
        failed.append(group_id)
        raise StorageError("injected after the COPY")


def skipped_checkpoint(self, *, force=False, drain=0.0):
    if drain > 0:  # a bulk commit's: as when a reader outlasts the drain
        return False
    return real_checkpoint(self, force=force, drain=drain)


replay.write_position = failing_position
if unchecked:
    Store.checkpoint = skipped_checkpoint


async def main():
    engine = open_engine(settings)
    try:
        counts = {}
        for g in json.loads(sys.argv[5]):
            counts[g] = await engine.read(lambda conn, g=g: conn.group_counts(g))
    finally:
        engine.close()
    print(json.dumps({"failed": failed, "counts": counts}), flush=True)


anyio.run(main)
"""


def _ops(group: str) -> list[Op]:
    ops = [Op("entity.upsert", {"uuid": f"{group}-e{i}", "name": f"E{i}"}) for i in range(N)]
    ops += [
        Op(
            "fact.upsert",
            {
                "uuid": f"{group}-f{i}",
                "source": f"{group}-e{i}",
                "target": f"{group}-e{(i + 1) % N}",
                "name": "NEXT",
                "fact": f"E{i} comes before E{(i + 1) % N}",
            },
        )
        for i in range(N)
    ]
    return ops


def _rebuild_in_child(settings: Settings, unchecked: bool) -> dict[str, Any]:
    """Open the workspace in a child process with the failure injected; what it served."""
    overrides = {
        "kuzu_buffer_pool_mb": settings.kuzu_buffer_pool_mb,
        "embedder": settings.embedder,
        "embedded_store": settings.embedded_store,
    }
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            CHILD,
            str(settings.home),
            FAILING,
            "1" if unchecked else "0",
            json.dumps(overrides),
            json.dumps(GROUPS),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    # An abort (-6) or a segfault (-11) is the defect; any other failure is the test's.
    assert child.returncode == 0, (child.returncode, child.stderr[-3000:])
    seen: dict[str, Any] = json.loads(child.stdout.strip().splitlines()[-1])
    return seen


@pytest.mark.parametrize("unchecked", [False, True], ids=["checkpointed", "unchecked"])
async def test_a_failure_after_a_bulk_copy_leaves_the_process_and_the_workspace_whole(
    settings: Settings, unchecked: bool
) -> None:
    engine = open_engine(settings)
    try:
        for group in GROUPS:
            await engine.write(lambda conn, g=group: (None, [Batch(g, _ops(g))]))
    finally:
        engine.close()
    delete_database_files(settings.db_path)  # the next open bulk-loads every group by COPY
    seen = _rebuild_in_child(settings, unchecked)
    assert seen["failed"] == [FAILING]
    # Nothing of the failed load is served (the database was started over empty), and the
    # groups loaded before it, whose rows went with the database, were loaded again.
    assert not any(seen["counts"][FAILING].values()), seen
    whole = {"entities": N, "episodes": 0, "edges": N}
    for group in GROUPS:
        if group != FAILING:
            assert seen["counts"][group] == whole, (group, seen)
    engine = open_engine(settings)
    try:
        for group in GROUPS:
            counts = await engine.read(lambda conn, g=group: conn.group_counts(g))
            assert counts == whole, (group, counts)
    finally:
        engine.close()
