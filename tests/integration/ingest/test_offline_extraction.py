"""The offline extractor through knowledge_add_episode: a chat's speaker, dates and cues."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lcg import Settings, open_engine
from lcg.service.registry import dispatch

pytestmark = pytest.mark.anyio


async def _facts(engine: Any, group: str) -> list[tuple[str, str, str, str, str | None]]:
    rows = await dispatch(
        engine,
        "knowledge_query_cypher",
        {
            "query": "MATCH (f:Fact), (s:Entity), (t:Entity) "
            f"WHERE f.group_id = '{group}' AND s.uuid = f.source_uuid AND t.uuid = f.target_uuid "
            "RETURN s.name, f.name, t.name, f.valid_at, f.invalid_at ORDER BY f.valid_at"
        },
    )
    return [(s, p, t, str(v)[:10], str(e)[:10] if e else None) for s, p, t, v, e in rows["rows"]]


async def test_a_chat_turn_makes_the_speaker_the_subject_and_dates_last_week(
    tmp_path: Path,
) -> None:
    engine = open_engine(
        Settings.for_home(tmp_path / ".lcg", extractor="heuristic", embedder="hash")
    )
    try:
        result = await dispatch(
            engine,
            "knowledge_add_episode",
            {
                "name": "turn 1",
                "episode_body": "Maya: Glad you asked! I moved to the ledger team last week.",
                "source": "message",
                "reference_time": "2025-05-14T10:00:00Z",
                "group_id": "chat",
            },
        )
        assert result["salvage"]["sentences_unread"] == 1
        assert await _facts(engine, "chat") == [
            ("Maya", "MOVED_TO", "ledger team", "2025-05-05", None)
        ]
    finally:
        engine.close()


async def test_a_dated_text_read_as_one_episode_ends_what_its_cues_end(tmp_path: Path) -> None:
    engine = open_engine(
        Settings.for_home(tmp_path / ".lcg", extractor="heuristic", embedder="hash")
    )
    text = (
        "## 2025-01-13\n- We run the orders service on MySQL.\n"
        "## 2025-03-24\n- We migrated the orders service from MySQL to PostgreSQL.\n"
        "## 2025-04-01\n- Carlos Mendez works at Umbrella.\n"
        "## 2025-06-02\n- Carlos Mendez left Umbrella.\n"
    )
    try:
        await dispatch(
            engine,
            "knowledge_add_episode",
            {
                "name": "notes",
                "episode_body": text,
                "reference_time": "2025-06-02T00:00:00Z",
                "group_id": "notes",
            },
        )
        assert await _facts(engine, "notes") == [
            ("orders service", "RUN_ON", "MySQL", "2025-01-13", "2025-03-24"),
            ("orders service", "MIGRATED_TO", "PostgreSQL", "2025-03-24", None),
            ("Carlos Mendez", "WORKS_AT", "Umbrella", "2025-04-01", "2025-06-02"),
            ("Carlos Mendez", "LEFT", "Umbrella", "2025-06-02", None),
        ]
    finally:
        engine.close()
