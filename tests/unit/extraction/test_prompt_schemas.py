"""Extraction prompts reuse their answer schemas instead of rebuilding them per request."""

from __future__ import annotations

from datetime import UTC, datetime

from lcg.extraction.prompts import (
    EpisodeContext,
    GraphAnswer,
    dedup_prompt,
    entities_prompt,
    episode_prompt,
)


def test_each_prompt_reuses_one_schema_and_it_is_the_models() -> None:
    """pydantic rebuilds a JSON schema on every `model_json_schema()` call (300 ms the first
    time, which fell on the first episode after opening a workspace; ~12 ms each later)."""
    ctx = EpisodeContext("e", "Alice met Bob.", "text", datetime(2024, 1, 1, tzinfo=UTC))
    first, second = episode_prompt(ctx, []), episode_prompt(ctx, [])
    assert first.schema is second.schema
    assert first.schema == GraphAnswer.model_json_schema()
    assert entities_prompt(ctx).schema is entities_prompt(ctx).schema
    pair = [("a", "", "b", "")]
    assert dedup_prompt(pair).schema is dedup_prompt(pair).schema
