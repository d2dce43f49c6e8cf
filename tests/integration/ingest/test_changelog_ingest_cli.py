"""`lcg ingest` of a changelog, offline, through the real engine: one dated episode per
release, a new dependency minimum and a dropped Python version ending what they replace, and
"what changed" rows naming their release."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner

from lcg import Settings, open_engine
from lcg.cli.main import cli
from lcg.service.registry import dispatch

CHANGELOG = """# Changelog

## [Unreleased]

- Drop support for Python 3.9.

## [3.1.0] - 2024-11-13

### Changed

-   Drop support for Python 3.8.
-   Require Werkzeug >= 3.1 and
    Jinja2 >= 3.1.2 for the new loader.

### Fixed

-   Werkzeug now assumes UTF-8 as filesystem encoding on Unix if Python
    detected it as ASCII.

## [3.0.0] - 2023-09-30

### Added

- Add support for Python 3.12.

### Changed

- Require Werkzeug >= 3.0.

## [2.3.0] - 2023-04-25

### Added

- Add support for Python 3.8.
- Add support for Python 3.11.
"""
ENV = {"LCG_EXTRACTOR": "heuristic", "LCG_EMBEDDER": "hash"}


def _run(home: Path, *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(cli, ["--home", str(home), "ingest", *args, "--json"], env=ENV)
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{") :])


async def _reads(home: Path) -> tuple[list[tuple[str, str, str, str]], list[dict[str, Any]]]:
    engine = open_engine(Settings.for_home(home, extractor="heuristic", embedder="hash"))
    try:
        edges = await dispatch(
            engine, "knowledge_get_edges_by_group", {"include_invalidated": False}
        )
        entities = await dispatch(
            engine, "knowledge_query_cypher", {"query": "MATCH (e:Entity) RETURN e.uuid, e.name"}
        )
        changes = await dispatch(
            engine, "knowledge_get_changes", {"since": "2024-01-01", "until": "2025-01-01"}
        )
    finally:
        engine.close()
    name = dict(entities["rows"])
    current = [
        (name[e["source_node_uuid"]], e["name"], name[e["target_node_uuid"]], e["fact"])
        for e in edges["edges"]
    ]
    return current, changes["changes"]


def test_a_changelog_becomes_dated_releases_whose_changes_end_what_they_replace(
    tmp_path: Path,
) -> None:
    repo = tmp_path / "flask"
    repo.mkdir()
    (repo / "CHANGES.md").write_text(CHANGELOG, encoding="utf-8")
    home = tmp_path / "home"
    summary = _run(home, str(repo))
    assert summary["files_done"] == 1 and summary["files_failed"] == 0
    assert any("[Unreleased]" in n["note"] for n in summary["notes"])
    current, changes = anyio.run(_reads, home)

    supported = sorted(t for s, p, t, _ in current if s == "flask" and p == "SUPPORTS")
    assert supported == ["Python 3.11", "Python 3.12"]  # 3.8 dropped in 3.1.0; 3.9 unreleased
    werkzeug = [f for s, p, t, f in current if s == "flask" and p == "REQUIRES"]
    assert werkzeug == [
        "flask 3.1.0 requires Werkzeug>=3.1: Require Werkzeug >= 3.1 and Jinja2 "
        ">= 3.1.2 for the new loader."
    ]

    window = [(c["kind"], c["at"][:10], c["fact"]["fact"]) for c in changes]
    assert (
        "started",
        "2024-11-13",
        "flask 3.1.0: Werkzeug now assumes UTF-8 as filesystem "
        "encoding on Unix if Python detected it as ASCII.",
    ) in window
    assert (
        "ended",
        "2024-11-13",
        "flask 3.0.0 requires Werkzeug>=3.0: Require Werkzeug >= 3.0.",
    ) in window
    assert ("ended", "2024-11-13", "flask 2.3.0: Add support for Python 3.8.") in window
    started = [f for kind, _, f in window if kind == "started"]
    assert started and all(f.startswith("flask 3.1.0") for f in started)
