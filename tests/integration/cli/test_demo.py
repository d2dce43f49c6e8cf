"""`lcg demo`: its own articles (examples/demo/) through the real pipeline, offline, the changelog's
time views, then the WAL rebuild."""

from __future__ import annotations

import importlib.util
import io
import json
import logging
import re
import sys
from pathlib import Path

import pytest
from rich.console import Console

from lcg.cli.demo import SOURCE, lcg_command, run_demo
from lcg.cli.demo_time import example_file


def _between(text: str, start: str, end: str) -> str:
    return text.split(start, 1)[1].split(end, 1)[0]


def _bullets(text: str, heading: str) -> list[str]:
    block = _between(text, heading, "\n\n")
    return [line.strip().removeprefix("• ") for line in block.splitlines()[1:]]


def test_demo_ingests_its_articles_offline_queries_them_and_rebuilds_identically(
    tmp_path: Path,
) -> None:
    out = io.StringIO()
    run_demo(tmp_path / "demo", Console(file=out, width=200))
    text = out.getvalue()
    assert "heuristic extractor (offline: no model, no API key)" in text
    assert "LadybugDB + JSONL WAL" in text  # the default engine, named as it is
    row = re.search(r"│ +(\d+) │ +(\d+) │ +(\d+) │ +(\d+) │", text)
    assert row, text
    episodes, entities, facts, current = map(int, row.groups())
    assert episodes == 20 and entities >= 50 and facts >= 50
    assert current < facts  # superseded facts are kept as history, not deleted

    found = _bullets(text, "knowledge_find_entities 'Platform Team' — top entities:")
    assert found[0] == "Platform Team" and "Mei Tanaka" in found  # its head
    moved = _bullets(text, "knowledge_find_relationships 'moved to the Lisbon office' — top facts:")
    assert moved[0].startswith(
        "MOVED_TO: In February 2025 Jonas Lindqvist moved from the Bristol office to the Lisbon"
    )
    passages = _bullets(
        text, "knowledge_search_passages 'security review of the sync command' — top passages:"
    )
    # The three articles that tell of Harbourline Bank's review and the fix it led to.
    assert {p.split(":", 1)[0] for p in passages} == {
        "Elena Petrova",
        "Atlas 1.2.0",
        "Harbourline Bank",
    }

    changes = _between(text, "from 2025-03-01 to 2025-05-01:\n", "\n\n").splitlines()
    assert changes and all("2025-03-01" <= line.split()[0] < "2025-05-01" for line in changes)
    took_over = "LEADS: In April 2025 Tomasz Nowak took over the Atlas project from Hannah Okafor."
    assert f"  2025-04-01 started  {took_over}" in changes
    assert any(line.startswith("  2025-04-01 ended    LED: Hannah Okafor led") for line in changes)

    rebuilt = f"rebuilt {entities} entities, {facts} facts, 20 episodes from the WAL in "
    assert re.search(re.escape(rebuilt) + r"[\d.]+ s: identical\n", text), text
    assert (tmp_path / "demo" / "wal" / "fernhill").is_dir()
    assert "examples/demo/README.md" in text
    assert "Apollo" not in text and "Wikipedia" not in text


def test_the_demo_articles_are_twenty_short_titled_articles() -> None:
    lines = example_file(SOURCE).read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]
    assert rows[0]["_header"] is True and rows[0]["record_count"] == len(rows) - 1
    articles = rows[1:]
    assert len(articles) == 20 and len({a["title"] for a in articles}) == 20
    assert all(set(a) == {"title", "prose"} for a in articles)
    assert all(120 <= len(a["prose"].split()) <= 250 for a in articles)


@pytest.mark.skipif(
    any(importlib.util.find_spec(m) for m in ("fastembed", "sentence_transformers")),
    reason="a local embedding model package is installed: auto does not fall back to hash",
)
def test_the_embedder_fallback_warning_is_printed_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # The demo opened two engines, each choosing (and warning about) the embedder.
    with caplog.at_level(logging.WARNING, logger="lcg.embedding.select"):
        run_demo(tmp_path / "demo", Console(file=io.StringIO(), width=200), articles=1)
    warnings = [r for r in caplog.records if "no local embedding model" in r.getMessage()]
    assert len(warnings) == 1


def test_the_closing_hint_names_lcg_as_this_shell_can_run_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `lcg --home .lcg-demo status` fails when the venv is not activated.
    script = tmp_path / ".venv" / "bin" / "lcg"
    script.parent.mkdir(parents=True)
    script.write_text("#!/bin/sh\n")
    script.chmod(0o755)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", "/nonexistent")
    monkeypatch.setattr(sys, "argv", [".venv/bin/lcg", "demo"])
    assert lcg_command() == ".venv/bin/lcg"
    out = io.StringIO()
    run_demo(Path(".lcg-demo"), Console(file=out, width=300), articles=1)
    assert "Try: .venv/bin/lcg --home .lcg-demo status" in out.getvalue()
    monkeypatch.setenv("PATH", str(script.parent))  # activated: `lcg` is that script
    assert lcg_command() == "lcg"


def test_demo_shows_time_with_facts_ending_and_no_line_twice(tmp_path: Path) -> None:
    out = io.StringIO()
    run_demo(tmp_path / "demo", Console(file=out, width=200), articles=3)
    text = out.getvalue()
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    assert len(lines) == len(set(lines)), [x for x in lines if lines.count(x) > 1]
    now = text.split("What is true now", 1)[1].split("What was true on", 1)[0]
    then = text.split("What was true on 2025-02-15", 1)[1].split("What changed", 1)[0]
    # The changelog is written the way projects write theirs: release headings, sections,
    # imperative and hard-wrapped bullets (examples/changelog/atlas.md).
    newest = "Atlas 2.0.0 requires httpx>=0.28: Require `httpx>=0.28`."
    first = "Atlas 1.0.0 requires httpx>=0.25: Require `httpx>=0.25`."
    assert newest in now and first not in now
    assert first in then and newest not in then
    assert "Atlas 1.0.0: Add support for Python 3.9." in then
    assert "Atlas 1.0.0: Add support for Python 3.9." not in now
    assert (
        "Atlas 2.0.0: Rewrite the query planner in Rust; plans for large repositories are built"
        in now
    )
    assert "[Unreleased]" not in now and "--dry-run" not in text
    assert "2025-03-03  ended    " + first in text
    assert "2025-06-02  ended    Atlas 1.0.0: Add support for Python 3.9." in text
    assert (
        "2025-06-02  ended    Atlas 1.0.0: Add the `atlas.legacy_client` module for integrations"
        in text
    )
    assert "superseded by: " + newest in text
