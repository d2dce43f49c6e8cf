"""An open with no database bulk-loads every group of its WAL alike: on LadybugDB by COPY into a
database that holds nothing but bulk loads (lcg.storage.bulk), each group stamped with the
embedder in its own load's transaction. The stamp used to be a commit of its own after each
group's load; that commit ended the bulk-only state, so every group after the first went in
UNWIND batches (five groups of 20k entities: over half an hour to open, instead of seconds)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.embedding import stamp
from lcg.engine import Batch
from lcg.storage.store import Conn, delete_database_files
from lcg.wal.records import Op

pytestmark = pytest.mark.anyio

GROUPS = ("alpha", "beta", "gamma")


def _ops(group: str) -> list[Op]:
    return [
        Op("entity.upsert", {"uuid": f"{group}-ada", "name": "Ada Lovelace"}),
        Op("entity.upsert", {"uuid": f"{group}-eng", "name": "Analytical Engine"}),
        Op(
            "fact.upsert",
            {
                "uuid": f"{group}-f",
                "source": f"{group}-ada",
                "target": f"{group}-eng",
                "name": "WROTE_ABOUT",
                "fact": "Ada Lovelace wrote about the Analytical Engine",
            },
        ),
    ]


@pytest.fixture
def copies(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """The tables each COPY loaded (the real COPY runs)."""
    count: Counter[str] = Counter()
    real = Conn.copy_from

    def counted(self: Conn, table: str, *args: Any, **kwargs: Any) -> Any:
        count[table] += 1
        return real(self, table, *args, **kwargs)

    monkeypatch.setattr(Conn, "copy_from", counted)
    return count


async def test_every_group_of_an_open_with_no_database_is_copied_and_stamped(
    settings: Settings, copies: Counter[str]
) -> None:
    engine = open_engine(settings)
    try:
        for group in GROUPS:
            await engine.write(lambda conn, g=group: (None, [Batch(g, _ops(g))]))
    finally:
        engine.close()
    delete_database_files(settings.db_path)
    copies.clear()
    engine = open_engine(settings)
    try:
        assert copies["Entity"] == len(GROUPS) and copies["Fact"] == len(GROUPS), copies
        identity = engine.parts.embedder.identity
        stamps = await engine.read(stamp.read_stamps)
        assert stamps == dict.fromkeys(GROUPS, (identity.model, identity.dim))
        for group in GROUPS:
            counts = await engine.read(lambda conn, g=group: conn.group_counts(g))
            assert counts["entities"] == 2 and counts["edges"] == 1, counts
    finally:
        engine.close()
