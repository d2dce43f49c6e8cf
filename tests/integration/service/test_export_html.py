"""`lcg export-html`: from a running service's socket, from the database itself, and its options.
(The page rendering offline in Chromium is tested in test_ui_browser.py.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import anyio
from click.testing import CliRunner  # noqa: TID251  CLI tests drive click's own runner
from rpc_support import running_server, wait_settled
from ui_support import build_history

from lcg.cli.main import cli
from lcg.config import Settings
from lcg.engine import open_engine


def _data(page: Path) -> dict[str, Any]:
    found = re.search(
        r'<script id="lcg-data" type="application/json">(.*?)</script>',
        page.read_text(encoding="utf-8"),
        re.S,
    )
    assert found is not None
    value = json.loads(found.group(1))
    assert isinstance(value, dict)
    return value


def test_export_reads_through_the_running_service(settings: Settings, tmp_path: Path) -> None:
    out = tmp_path / "graph.html"
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        assert server.engine is not None
        anyio.run(build_history, server.engine)
        result = CliRunner().invoke(
            cli,
            ["--home", str(settings.home), "export-html", "--socket", str(path), "-o", str(out)],
        )
    assert result.exit_code == 0, result.output
    assert "5 of 5 entities, 4 facts (1 superseded)" in result.output
    data = _data(out)
    assert {n["name"] for n in data["nodes"]} == {"Alice", "Bob", "Acme", "Globex", "Apollo"}
    assert [e["fact"] for e in data["edges"] if e["superseded"]] == ["Alice works at Acme"]


def test_as_of_shows_the_graph_of_that_day(settings: Settings, tmp_path: Path) -> None:
    engine = open_engine(settings)
    try:
        anyio.run(build_history, engine)
    finally:
        engine.close()
    out = tmp_path / "2022.html"
    result = CliRunner().invoke(
        cli,
        ["--home", str(settings.home), "export-html", "--as-of", "2022-03-01", "-o", str(out)],
    )
    assert result.exit_code == 0, result.output
    data = _data(out)
    assert data["asOf"] == "2022-03-01 00:00:00"
    facts = {e["fact"]: e["superseded"] for e in data["edges"]}
    assert facts == {
        "Alice works at Acme": False,  # still true in March 2022
        "Bob works at Acme": False,
        "Alice leads Apollo": False,
    }
    bad = CliRunner().invoke(
        cli, ["--home", str(settings.home), "export-html", "--as-of", "soon", "-o", str(out)]
    )
    assert bad.exit_code == 2 and "--as-of" in bad.output
