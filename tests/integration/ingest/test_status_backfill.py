"""`knowledge_status` backfills unrecorded WAL positions only where that is certain
(docs/api.md §status-wal; README, "Differences from the reference")."""

from __future__ import annotations

import json

import pytest

from lcg import Engine
from lcg.engine import exclusive
from lcg.engine.replay import position_key
from lcg.service.registry import dispatch
from lcg.wal.layout import group_dir

pytestmark = pytest.mark.anyio


async def test_an_empty_group_without_wal_lines_gets_position_zero(engine: Engine) -> None:
    directory = group_dir(engine.parts.wal.root, "quiet")
    directory.mkdir(parents=True)
    (directory / ".wal-generation.json").write_text(json.dumps({"generation": "gen-q"}))
    status = await dispatch(engine, "knowledge_status", {})
    assert status["wal_groups"]["quiet"] == {
        "applied_seq": 0,
        "max_seq": None,
        "generation": "gen-q",
        "generation_status": "known",
        "hydration_status": "not_applicable",
    }
    with engine.reader() as conn:
        recorded = json.loads(conn.get_meta(position_key("quiet")) or "null")
    assert recorded == {"applied_seq": 0, "generation": "gen-q"}
    # Writing to the group afterwards records the real position.
    await dispatch(engine, "knowledge_assert_entity", {"name": "Ada", "group_id": "quiet"})
    status = await dispatch(engine, "knowledge_status", {})
    assert status["wal_groups"]["quiet"]["applied_seq"] == status["wal_groups"]["quiet"]["max_seq"]


async def test_a_group_with_data_and_no_position_stays_unknown(engine: Engine) -> None:
    for name in ("Ada", "Grace"):
        await dispatch(engine, "knowledge_assert_entity", {"name": name, "group_id": "busy"})
    with exclusive.store(engine).transaction() as tx:
        tx.set_meta(position_key("busy"), None)
    status = await dispatch(engine, "knowledge_status", {})
    entry = status["wal_groups"]["busy"]
    assert entry["applied_seq"] is None
    assert entry["max_seq"] == 1
    assert entry["hydration_status"] == "wal_ahead"
    with engine.reader() as conn:
        assert conn.get_meta(position_key("busy")) is None
