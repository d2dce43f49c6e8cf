"""The existing facts ingestion shows for supersession, through the real engine: a fact between
two entities an episode names is shown even when a hub entity's more similar facts fill the
bound, so a drop ends the support it replaces."""

from __future__ import annotations

from pathlib import Path

import anyio

from lcg import Settings, open_engine
from lcg.service.registry import dispatch

FIRST = """Release: proj 1.0 (2024-01-01)

- Add support for Python 3.9.
- Require `aaa>=1`.
- Require `bbb>=1`.
- Require `ccc>=1`.
"""
# Prose gives no fact but makes the requirement facts the most similar to the text.
SECOND = """Release: proj 2.0 (2025-06-01)

proj 2.0 requires what proj 1.0 requires: Require the same as proj 1.0 requires.

- Drop support for Python 3.9.
"""


async def _ingest_and_read(home: Path) -> list[tuple[str, str]]:
    settings = Settings.for_home(
        home, extractor="heuristic", embedder="hash", supersede_candidates=1
    )
    engine = open_engine(settings)
    try:
        for i, (text, day) in enumerate([(FIRST, "2024-01-01"), (SECOND, "2025-06-01")]):
            params = {
                "chunk_text": text,
                "chunk_id": f"r{i}",
                "source_file": "CHANGES.md",
                "reference_time": f"{day}T00:00:00Z",
            }
            await dispatch(engine, "knowledge_process_chunk", params)
        edges = await dispatch(
            engine, "knowledge_get_edges_by_group", {"include_invalidated": False}
        )
    finally:
        engine.close()
    return sorted((e["name"], e["fact"]) for e in edges["edges"])


def test_a_drop_ends_the_support_it_names_though_more_similar_facts_fill_the_bound(
    tmp_path: Path,
) -> None:
    current = anyio.run(_ingest_and_read, tmp_path / "home")
    assert ("DROPPED_SUPPORT_FOR", "proj 2.0: Drop support for Python 3.9.") in current
    assert [f for p, f in current if p == "SUPPORTS"] == []  # ended by the drop
    assert sorted(f for p, f in current if p == "REQUIRES") == [
        "proj 1.0 requires aaa>=1: Require `aaa>=1`.",
        "proj 1.0 requires bbb>=1: Require `bbb>=1`.",
        "proj 1.0 requires ccc>=1: Require `ccc>=1`.",
    ]
