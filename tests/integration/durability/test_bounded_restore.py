"""A bounded restore (`knowledge_rebuild_from_wal` with `to_seq`) stays restored across a restart."""

from __future__ import annotations

from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import Context, dispatch

pytestmark = pytest.mark.anyio


def _sync() -> Context:
    return Context(progress=lambda frame: None)  # a progress sink: the synchronous form


async def _names(engine: Any) -> list[str]:
    nodes = await dispatch(engine, "knowledge_get_nodes_by_group", {"group_ids": ["g"]})
    return sorted(n["name"] for n in nodes["nodes"])


async def test_a_restore_to_a_mark_is_not_undone_by_the_next_open(settings: Settings) -> None:
    engine = open_engine(settings)
    try:
        await dispatch(engine, "knowledge_assert_entity", {"name": "A", "group_id": "g"})
        mark = (await dispatch(engine, "knowledge_status", {}))["wal_groups"]["g"]["applied_seq"]
        await dispatch(engine, "knowledge_assert_entity", {"name": "B", "group_id": "g"})
        restored = await dispatch(
            engine,
            "knowledge_rebuild_from_wal",
            {"group_id": "g", "to_seq": mark, "force_clear": True},
            _sync(),
        )
        assert restored["last_committed_seq"] == mark
        assert await _names(engine) == ["A"]
    finally:
        engine.close()

    engine = open_engine(settings)  # startup must not replay the held-back line
    try:
        assert await _names(engine) == ["A"]
        state = (await dispatch(engine, "knowledge_status", {}))["wal_groups"]["g"]
        assert (state["applied_seq"], state["max_seq"]) == (mark, mark + 1)
        await dispatch(engine, "knowledge_assert_entity", {"name": "C", "group_id": "g"})
        assert await _names(engine) == ["A", "C"]
    finally:
        engine.close()

    engine = open_engine(settings)  # after a new write the hold is gone, and nothing changes
    try:
        assert await _names(engine) == ["A", "C"]
        state = (await dispatch(engine, "knowledge_status", {}))["wal_groups"]["g"]
        assert state["applied_seq"] == state["max_seq"]
    finally:
        engine.close()
