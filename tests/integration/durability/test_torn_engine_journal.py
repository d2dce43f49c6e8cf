"""A database whose own journal cannot be replayed (a torn or damaged `<db>.wal` after a kill,
which LadybugDB refuses with "Checksum verification failed, the WAL file is corrupted") is set
aside and the workspace is rebuilt from lcg's WAL: every acknowledged episode is served whole.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch
from lcg.testing.episode_kills import GROUP, judge, kill

pytestmark = pytest.mark.slow

# No checkpoint: when the child dies, the database's journal holds its commits.
SETTINGS = {"kuzu_buffer_pool_mb": 128, "embedder": "hash", "checkpoint_wal_bytes": 1 << 30}


def test_a_database_whose_journal_is_damaged_is_set_aside_and_rebuilt(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    acked = kill(home, 1, SETTINGS, [10, 63], point="after-commit", stderr=tmp_path / "c.err")
    assert acked
    settings = Settings.for_home(home, **SETTINGS)
    journal = Path(f"{settings.db_path}.wal")
    assert journal.stat().st_size > 64
    with journal.open("r+b") as f:  # a record cut short, as a kill inside its write leaves it
        f.truncate(journal.stat().st_size - 7)

    engine = open_engine(settings)
    try:
        status = anyio.run(dispatch, engine, "knowledge_status", {})
        assert status["wal_problems"] == [], status["wal_problems"]
        assert status["wal_groups"][GROUP]["hydration_status"] == "hydrated"
        verdict = judge(engine, acked)
        assert verdict.clean, verdict
    finally:
        engine.close()
    aside = sorted(
        p.name for p in settings.db_path.parent.glob(f"{settings.db_path.name}.damaged-*")
    )
    assert aside, "the damaged database is kept beside the new one, not deleted"
