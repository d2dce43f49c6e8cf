"""An open with no database makes the name index from the rows its bulk replays loaded (no scan
of every entity), the same index a scan makes; when the database holds other entities too, it
scans as before."""

from __future__ import annotations

import shutil
from collections import Counter
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.engine import Batch
from lcg.engine.names import NameIndex
from lcg.storage.kuzu_backend import KuzuReader
from lcg.storage.store import delete_database_files
from lcg.wal.records import Op
from lcg.wal.writer import Wal

pytestmark = pytest.mark.anyio


def _ops(group: str) -> list[Op]:
    rows: list[dict[str, Any]] = [
        {"uuid": f"{group}-0", "name": "Ada Lovelace", "summary": "programmer"},
        # The same name, normalised: ordered by created_at (one given with another zone).
        {"uuid": f"{group}-1", "name": "ADA Lovelace", "created_at": "2024-01-01T12:00:00+02:00"},
        {"uuid": f"{group}-2", "name": "ada lovelace", "created_at": "2024-01-01T11:00:00+00:00"},
        {"uuid": f"{group}-3", "name": "", "summary": "no name"},
        {
            "uuid": f"{group}-4",
            "name": "Old Ada",
            "labels": ["Entity", "Merged"],
            "merged_into": f"{group}-0",
        },
    ]
    return [Op("entity.upsert", row) for row in rows]


def _index(index: NameIndex) -> dict[Any, Any]:
    return {key: list(entries) for key, entries in index._by_key.items() if entries}


@pytest.fixture
def scans(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often every entity was read for the name index."""
    count: Counter[str] = Counter()
    real = KuzuReader.name_rows

    def counted(self: Any) -> Any:
        count["name_rows"] += 1
        return real(self)

    monkeypatch.setattr(KuzuReader, "name_rows", counted)
    return count


async def test_an_open_with_no_database_makes_the_name_index_from_the_replayed_rows(
    settings: Settings, scans: Counter[str]
) -> None:
    engine = open_engine(settings)
    try:
        for group in ("alpha", "beta"):
            await engine.write(lambda conn, g=group: (None, [Batch(g, _ops(g))]))
    finally:
        engine.close()
    delete_database_files(settings.db_path)
    shutil.rmtree(settings.db_path.parent / "name-index")  # its saved copy (used if current)
    scans.clear()
    engine = open_engine(settings)
    try:
        assert scans["name_rows"] == 0
        made = _index(engine._names)
        expected = NameIndex()
        expected.load(await engine.read(lambda conn: conn.name_rows()))
        assert scans["name_rows"] == 1
        assert made == _index(expected)
        assert [u for u, _ in engine.names.lookup("alpha", "Ada Lovelace")] == [
            "alpha-0",
            "alpha-1",  # 10:00 UTC
            "alpha-2",
        ]
        assert engine.names.lookup("alpha", "old ada") == [("alpha-4", True)]
    finally:
        engine.close()


async def test_other_entities_in_the_database_mean_a_scan(
    settings: Settings, scans: Counter[str]
) -> None:
    engine = open_engine(settings)
    try:
        await engine.write(lambda conn: (None, [Batch("alpha", _ops("alpha"))]))
    finally:
        engine.close()
    wal = Wal(settings.wal_dir, settings.wal_max_bytes_per_file, settings.wal_max_events_per_file)
    wal.append("beta", _ops("beta"))  # beta: in the WAL only, so bulk-replayed at the open
    wal.close()
    scans.clear()
    engine = open_engine(settings)
    try:
        assert scans["name_rows"] == 1
        assert engine.names.lookup("alpha", "Ada Lovelace")[1][0] == "alpha-1"
        assert engine.names.lookup("beta", "Ada Lovelace")[1][0] == "beta-1"
    finally:
        engine.close()
