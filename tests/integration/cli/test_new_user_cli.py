"""What a new user meets at the command line: messages that name the way
out, a folder with bad front matter or only unsupported files, errors printed literally, global
options after the subcommand, read-only commands that create nothing, `lcg mcp` next to a
running service. Real workspaces in tmp_path; `main()` runs in a subprocess where its printing
is what is tested."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result
from rpc_support import running_server, wait_settled

from lcg import Settings, open_engine
from lcg.cli.main import cli
from lcg.graph import writes
from lcg.service.registry import dispatch

HEURISTIC = {"LCG_EXTRACTOR": "heuristic", "LCG_EMBEDDER": "hash"}


def invoke(home: Path, *args: str, env: dict[str, str] | None = None) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), *args], env=env)


def lcg(home: Path, *args: str, env: dict[str, str] | None = None, **kw: Any) -> Any:
    """`python -m lcg.cli --home HOME ARGS...`: the real entry point, its real printing."""
    return subprocess.run(
        [sys.executable, "-m", "lcg.cli", "--home", str(home), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={**os.environ, "LCG_KUZU_BUFFER_POOL_MB": "256", **(env or {})},
        **kw,
    )


def make_workspace(home: Path) -> None:
    engine = open_engine(Settings.for_home(home, kuzu_buffer_pool_mb=256, embedder="hash"))
    try:
        anyio.run(writes.assert_entity, engine, "Margaret Hamilton", "liminis")
    finally:
        engine.close()


def folder(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


# -- item 3: the offline way out is named; the dry run says which extractor runs --------------


def test_ingest_without_a_provider_names_the_offline_extractor(tmp_path: Path) -> None:
    notes = folder(tmp_path / "notes", {"a.md": "Alice Smith leads the Atlas project."})
    result = invoke(tmp_path / ".lcg", "ingest", str(notes), env={"LCG_EMBEDDER": "hash"})
    assert result.exit_code != 0
    message = str(result.exception)
    assert "no extraction provider is configured" in message
    assert "LCG_EXTRACTOR=heuristic" in message


def test_dry_run_with_the_heuristic_extractor_estimates_no_llm_calls(tmp_path: Path) -> None:
    notes = folder(tmp_path / "notes", {"a.md": "Alice Smith leads the Atlas project."})
    result = invoke(tmp_path / ".lcg", "ingest", str(notes), "--dry-run", env=HEURISTIC)
    assert result.exit_code == 0, result.output
    assert "extractor: heuristic extractor" in result.stdout
    assert "about 0 LLM calls and 0 input tokens" in result.stdout
    as_json = invoke(tmp_path / ".lcg", "ingest", str(notes), "--dry-run", "--json", env=HEURISTIC)
    plan = json.loads(as_json.stdout)
    assert plan["extractor"]["kind"] == "heuristic" and plan["extractor"]["warning"] is None
    assert (plan["chunks"], plan["llm_calls"], plan["input_tokens"]) == (1, 0, 0)


def test_dry_run_without_a_provider_warns_that_a_run_would_stop(tmp_path: Path) -> None:
    notes = folder(tmp_path / "notes", {"a.md": "Alice Smith leads the Atlas project."})
    result = invoke(tmp_path / ".lcg", "ingest", str(notes), "--dry-run")
    assert result.exit_code == 0, result.output
    assert "none is configured" in result.stdout
    assert "warning: a run would stop" in result.stderr
    assert "LCG_EXTRACTOR=heuristic" in result.stderr


# -- item 4: front matter never stops a run ---------------------------------------------------

BAD_FRONT_MATTER = {
    "impossible.md": "---\ntitle: Impossible\ndate: 2025-13-45\n---\nAlice Smith leads Atlas.",
    "tuesday.md": "---\ndate: next tuesday\n---\nBob Jones fixed the Orion parser.",
    "us.md": "---\ndate: 12/03/2025\n---\nCarol White joined the Atlas team.",
    "broken.md": '---\ntitle: "unclosed\n---\nDave Brown maintains Orion.',
    "good.md": "---\ndate: 2025-03-14\n---\nErin Gray audits Orion.",
}


@pytest.mark.parametrize("dry_run", [True, False])
def test_bad_front_matter_is_reported_per_file_and_the_run_goes_on(
    tmp_path: Path, dry_run: bool
) -> None:
    notes = folder(tmp_path / "notes", BAD_FRONT_MATTER)
    home = tmp_path / ".lcg"
    result = invoke(home, "ingest", str(notes), *(["--dry-run"] if dry_run else []), env=HEURISTIC)
    assert result.exit_code == 0, (result.output, result.exception)
    err = result.stderr
    assert "impossible.md: front matter date: '2025-13-45' is not a date" in err
    assert "tuesday.md: front matter date: 'next tuesday' is not a date" in err
    assert "us.md: front matter date: '12/03/2025' is not a date" in err
    assert "broken.md: front matter is not valid YAML" in err
    assert "good.md" not in err
    assert err.count("dated by modification time instead") == 3
    if dry_run:
        assert "5 to ingest" in result.stdout
        return
    assert "5 files ingested" in result.stdout
    engine = open_engine(Settings.for_home(home, kuzu_buffer_pool_mb=256, embedder="hash"))
    try:
        episodes = anyio.run(dispatch, engine, "knowledge_get_episodes", {"last_n": 100})
    finally:
        engine.close()
    contents = [e["content"] for e in episodes["episodes"]]
    assert len(contents) == 5
    assert not any("unclosed" in c or c.startswith("---") for c in contents)  # not body text


# -- item 5: error text is printed literally ---------------------------------------------------


@pytest.mark.skipif(
    importlib.util.find_spec("fastembed") is not None, reason="fastembed is installed here"
)
def test_error_messages_keep_their_brackets(tmp_path: Path) -> None:
    home = tmp_path / ".lcg"
    make_workspace(home)
    done = lcg(home, "status", env={"LCG_EMBEDDER": "fastembed"})
    assert done.returncode != 0
    assert "pip install 'lcg[fastembed]'" in done.stderr, done.stderr


# -- item 7: global options after the subcommand; read-only commands create nothing -----------


def test_home_is_accepted_after_the_subcommand(tmp_path: Path) -> None:
    home = tmp_path / "ws"
    make_workspace(home)
    after = CliRunner().invoke(cli, ["status", "--home", str(home)], env={"LCG_EMBEDDER": "hash"})
    assert after.exit_code == 0, after.output
    assert json.loads(after.stdout)["entity_count"] == 1
    nested = CliRunner().invoke(
        cli, ["wal", "marks", "--home", str(home)], env={"LCG_EMBEDDER": "hash"}
    )
    assert nested.exit_code == 0, nested.output


@pytest.mark.parametrize(
    "args",
    [
        ["status"],
        ["cypher", "MATCH (n) RETURN count(n)"],
        ["export", "out.jsonl"],
        ["export-html", "-o", "out.html"],
        ["wal", "dump"],
        ["wal", "marks"],
        ["rebuild"],
    ],
)
def test_read_only_commands_do_not_create_a_workspace(tmp_path: Path, args: list[str]) -> None:
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "lcg.cli", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=cwd,
        env={k: v for k, v in os.environ.items() if k != "LCG_HOME"} | {"LCG_EMBEDDER": "hash"},
    )
    assert done.returncode != 0
    assert "no lcg workspace at" in done.stderr and "--home" in done.stderr
    assert list(cwd.iterdir()) == []  # no ./.lcg, no output file


def test_a_folder_of_unsupported_files_is_an_error_naming_them(tmp_path: Path) -> None:
    pdfs = tmp_path / "pdfs"
    pdfs.mkdir()
    (pdfs / "report.pdf").write_bytes(b"%PDF-1.7")
    for extra in ([], ["--dry-run"]):
        result = invoke(tmp_path / ".lcg", "ingest", str(pdfs), *extra, env=HEURISTIC)
        assert result.exit_code == 1
        assert "skipped 1 file of a type lcg does not ingest" in result.stderr
        assert "report.pdf" in result.stderr
        assert "nothing to ingest" in result.output


def test_the_summary_says_what_each_entity_count_counts(tmp_path: Path) -> None:
    text = "Alice Smith leads the Atlas project. Alice Smith met Bob Jones."
    notes = folder(tmp_path / "notes", {"a.md": text, "b.md": text})
    home = tmp_path / ".lcg"
    result = invoke(home, "ingest", str(notes), "--json", env=HEURISTIC)
    assert result.exit_code == 0, result.output
    stats = json.loads(result.stdout)
    status = json.loads(invoke(home, "status", env=HEURISTIC).stdout)
    # The same names in both files: mentions are counted per chunk, new entities once.
    assert stats["entities"] > stats["entities_created"] == status["entity_count"]
    plain = invoke(home, "ingest", str(notes), "--json", env=HEURISTIC)
    assert plain.exit_code == 0
    (notes / "c.md").write_text("Carol White joined.")
    line = invoke(home, "ingest", str(notes), env=HEURISTIC)
    assert "entity mentions (" in line.stdout and " new entities) · " in line.stdout
    assert "facts inserted" in line.stdout


# -- item 6: `lcg mcp` attaches to a running service, or says what to do -------------------

MCP_LINES = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "knowledge_status", "arguments": {}},
    },
]


def test_mcp_attaches_to_the_running_service_of_the_workspace(settings: Settings) -> None:
    with running_server(settings) as (server, path, _):
        wait_settled(server)
        assert server.engine is not None
        anyio.run(writes.assert_entity, server.engine, "Margaret Hamilton", "liminis")
        done = lcg(
            settings.home,
            "mcp",
            input="".join(json.dumps(line) + "\n" for line in MCP_LINES),
            env={"LCG_SOCKET_PATH": str(path), "LCG_EMBEDDER": "hash"},
        )
    assert done.returncode == 0, done.stderr
    assert f"attached to the running lcg service at {path}" in done.stderr
    answers = {m["id"]: m for m in map(json.loads, done.stdout.splitlines())}
    assert answers[2]["result"]["structuredContent"]["entity_count"] == 1


def test_mcp_on_a_locked_database_with_no_service_says_what_to_do(
    settings: Settings, tmp_path: Path
) -> None:
    engine = open_engine(settings)  # this process holds the database; no socket answers
    try:
        done = lcg(settings.home, "mcp", input="", env={"LCG_EMBEDDER": "hash"})
    finally:
        engine.close()
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, done.stderr
    assert "is in use by another process" in lines[0]
    assert "no lcg service answers on" in lines[0] and "lcg serve" in lines[0]
