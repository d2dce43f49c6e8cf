"""Server mode as far as it is wired (issue 19): the engine refuses a store it cannot run on
yet, and `knowledge_status` says which store serves the graph."""

from __future__ import annotations

from pathlib import Path

import pytest

from lcg import Engine, Settings, open_engine
from lcg.errors import ConfigError
from lcg.service.registry import dispatch


def test_the_engine_refuses_falkordb_storage_until_it_runs_on_it(tmp_path: Path) -> None:
    settings = Settings.for_home(
        tmp_path / ".lcg", embedder="hash", storage="falkordb", falkordb_url="redis://127.0.0.1:1"
    )
    with pytest.raises(ConfigError, match="LCG_STORAGE=falkordb"):
        open_engine(settings)
    assert not settings.db_path.exists() and not settings.wal_dir.exists()


@pytest.mark.anyio
async def test_status_reports_the_storage_backend(engine: Engine) -> None:
    status = await dispatch(engine, "knowledge_status", {})
    assert status["storage"] == {
        "backend": "kuzu",
        "server": engine.settings.database_path_text,
        "role": "embedded",
    }
