"""The reliability suite as a test: `bench/reliability.py --quick` must find every count that
must be 0 at 0 (acknowledged writes lost, partial episodes, seqs reused, dangling facts served,
a second local user let in, a symlink followed out of an ingested folder) and no scenario that
broke.

The suite drives real `lcg serve`, `lcg ingest` and `lcg mcp` processes on workspaces of its own
(SIGKILLs during writes, damaged WAL files and snapshots, a stolen WAL lock, another uid on the
socket and the loopback HTTP port); docs/reliability.md describes each scenario. A failure
names the scenarios and their counts; the JSON the suite printed is attached.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
    pytest.mark.xfail(
        strict=True,
        reason="the defects the suite finds are fixed on other branches: undetected WAL "
        "damage serving dangling facts (wal_bit_flips, wal_deleted_middle_file, "
        "wal_dropped_line), seqs reused after a stolen lock or a flipped bounds file "
        "(wal_lock_theft, wal_bounds_flip), a second user let in over HTTP without a token "
        "(second_local_user), a file symlinked from outside the folder ingested "
        "(symlink_out_of_folder), and when a kill lands in a large episode's commit, an "
        "episode left without its facts (kill_during_writes); remove this mark once they "
        "are merged",
    ),
]


def test_the_quick_reliability_suite_keeps_every_must_be_zero_count_at_zero() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "reliability.py"), "--quick"],
        capture_output=True,
        text=True,
        timeout=1400,
        cwd=ROOT,
    )
    assert done.stdout.strip(), f"the suite printed nothing: {done.stderr[-3000:]}"
    results = json.loads(done.stdout)["results"]
    assert results["scenario_errors"] == [], json.dumps(results["scenarios"], indent=1)[:6000]
    assert results["must_be_zero_violations"] == {}, json.dumps(results["scenarios"], indent=1)[
        :6000
    ]
    assert done.returncode == 0, done.stderr[-3000:]
