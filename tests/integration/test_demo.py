"""`lcg demo`: the Apollo articles through the real pipeline, offline, then the WAL rebuild."""

from __future__ import annotations

import io
from pathlib import Path

from rich.console import Console

from lcg.cli.demo import run_demo


def test_demo_ingests_articles_offline_queries_them_and_rebuilds_identically(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    run_demo(tmp_path / "demo", Console(file=out, width=200), articles=3)
    text = out.getvalue()
    assert "heuristic extractor (offline: no model, no API key)" in text
    assert "knowledge_find_entities" in text and "knowledge_search_passages" in text
    assert "knowledge_get_changes" in text
    assert "3 episodes from the WAL" in text and "identical" in text
    assert (tmp_path / "demo" / "wal" / "apollo").is_dir()
