"""The search index's memory after a load: commits fill the loaded matrices' spare rows instead
of copying them (at 1M facts the first episode after opening copied ~3 GB)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch

pytestmark = pytest.mark.anyio


async def test_a_commit_after_reopening_does_not_copy_the_loaded_vectors(
    settings: Settings,
) -> None:
    engine = open_engine(settings)
    try:
        for i in range(40):
            await dispatch(
                engine,
                "knowledge_assert_entity",
                {"name": f"Probe {i}", "summary": f"Probe number {i} of the memory test."},
            )
    finally:
        engine.close()
    engine = open_engine(settings)  # loads the index in bulk from the database
    try:
        index = engine.parts.search

        def matrices() -> dict[str, Any]:
            [(_, view)] = index.views("entity", None)
            return {k: v.rows[: v.n] for k, v in view.vectors.items()}

        before = matrices()
        assert {k: len(v) for k, v in before.items()} == {
            "entity_name": 40,
            "entity_summary": 40,
        }
        await dispatch(engine, "knowledge_assert_entity", {"name": "Probe new", "summary": "New."})
        after = matrices()
        for kind, matrix in after.items():
            assert len(matrix) == 41
            assert np.shares_memory(matrix, before[kind]), kind  # filled in place, not copied
            assert np.array_equal(matrix[:40], before[kind])
        found = await dispatch(engine, "knowledge_find_entities", {"query": "Probe new"})
        assert found["nodes"][0]["name"] == "Probe new"
    finally:
        engine.close()
