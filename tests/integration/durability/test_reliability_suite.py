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

ROOT = Path(__file__).resolve().parents[3]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(1500),
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
