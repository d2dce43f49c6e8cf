"""`lcg code ingest` from the command line: a working tree, a re-run that writes
nothing, git history, and a plain install without the `code` extra."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

pytest.importorskip("tree_sitter_language_pack")

from rpc_support import running_server, wait_settled

from lcg.cli.main import cli
from lcg.code import extract
from lcg.config import Settings
from lcg.service.rpc.client import RpcClient

BOTH_STORAGES = True  # `lcg code ingest` runs in server mode too


def run(home: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), "code", "ingest", *args], env=env)


def _env(storage: dict[str, object]) -> dict[str, str]:
    """The environment that selects the test's store (`storage` fixture) for the CLI."""
    if not storage:
        return {}
    return {"LCG_STORAGE": "falkordb", "LCG_FALKORDB_URL": str(storage["falkordb_url"])}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    (root / "m.py").write_text(
        'def f(x):\n    """F."""\n    return g(x)\n\n\ndef g(x):\n    return x\n'
    )
    (root / "bad.py").write_text("def (:\n")
    git = ["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    return root


def test_ingest_then_rerun_then_history(
    tmp_path: Path, repo: Path, storage: dict[str, object]
) -> None:
    home = tmp_path / ".lcg"
    env = _env(storage)
    first = run(home, str(repo), "--group", "c", "--json", env=env)
    assert first.exit_code == 0, first.output
    report = json.loads(first.stdout[first.stdout.index("{") :])
    assert report["files_parsed"] == 1 and report["symbols_added"] == 2
    assert report["skipped"] == [{"path": "bad.py", "reason": "syntax error near line 1"}]
    again = run(home, str(repo), "--group", "c", env=env)
    assert again.exit_code == 0, again.output
    assert "0 parsed, 1 unchanged" in again.stdout
    history = run(home, str(repo), "--group", "h", "--history", env=env)
    assert history.exit_code == 0, history.output
    assert "1 commits walked, 1 episodes written" in history.stdout
    assert "symbols added 2, removed 0" in history.stdout
    if storage:  # the groups are on the server, not in a local database
        from lcg.storage.falkordb.backend import FalkorBackend

        server = FalkorBackend(str(storage["falkordb_url"]))
        try:
            assert {"c", "h"} <= set(server.groups())
        finally:
            server.close()


def test_without_the_extra_the_command_says_how_to_install_it(
    tmp_path: Path, repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "tree_sitter_language_pack", None)  # import raises
    extract._parser.cache_clear()
    try:
        result = run(tmp_path / ".lcg", str(repo))
        assert result.exit_code == 1
        assert "pip install 'lcg[code]'" in result.output
        with pytest.raises(extract.CodeParserUnavailable, match=r"lcg\[code\]"):
            extract.parse_file("m.py", b"x = 1\n")
    finally:
        extract._parser.cache_clear()


def test_with_a_service_running_the_run_goes_to_it(settings: Settings, repo: Path) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        args = ["code", "ingest", str(repo), "--socket", str(path), "--group", "svc", "--json"]
        result = CliRunner().invoke(cli, ["--home", str(settings.home), *args])
        assert result.exit_code == 0, result.output
        report = json.loads(result.stdout[result.stdout.index("{") :])
        assert report["files_parsed"] == 1 and report["symbols_added"] == 2
        with RpcClient(path, timeout=60) as client:
            where = client.call("knowledge_code_where", {"name": "g", "group_id": "svc"})
    assert where["symbols"][0]["location"] == "m.py:6-7"
