"""`lcg ingest` over a folder of dated Markdown changelog entries, against a scripted
OpenAI-compatible server that really listens: dating, incremental sync, prune, dry run,
preflight, and a run killed half-way then resumed."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner, Result

from lcg import Settings, open_engine
from lcg.cli.main import cli
from lcg.service.registry import dispatch
from lcg.testing.heuristic_llm import heuristic_responder
from lcg.testing.scripted_llm import ScriptedLlmServer

GROUP = "changelog"
FILES = {
    "2025-01-10-release-1.md": (
        "# Release 1\n\nThe Atlas project moved its code to GitHub. Alice Smith leads the Atlas "
        "project.\n\n## Fixes\n\nBob Jones fixed the Orion parser."
    ),
    "notes/release-2.md": (
        "---\ntitle: Release 2\ndate: 2025-02-01\n---\n# Release 2\n\nThe Atlas project moved "
        "from GitHub to Codeberg. Carol White joined the Atlas team."
    ),
    "release-3.md": (
        "---\npublished: 2025-03-05T10:00:00Z\n---\nThe Orion service now runs in Frankfurt. "
        "Dave Brown maintains the Orion service."
    ),
    "undated.md": "# Ideas\n\nThe Vega library could replace the Orion parser.",
}
EXPECTED_TIMES = {
    "2025-01-10-release-1.md": "2025-01-10 00:00:00",
    "notes/release-2.md": "2025-02-01 00:00:00",
    "release-3.md": "2025-03-05 10:00:00",
}


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "docs"
    for name, text in FILES.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def server() -> Any:
    with ScriptedLlmServer(heuristic_responder) as s:
        yield s


def ingest(home: Path, *args: str, env: dict[str, str]) -> Result:
    return CliRunner().invoke(cli, ["--home", str(home), "ingest", *args], env=env)


def summary(result: Result) -> dict[str, Any]:
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout[result.stdout.index("{\n") :])


def episodes(home: Path) -> list[dict[str, Any]]:
    engine = open_engine(Settings.for_home(home, kuzu_buffer_pool_mb=256))
    try:
        result = anyio.run(
            dispatch, engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 1000}
        )
    finally:
        engine.close()
    return list(result["episodes"])


def graph(home: Path) -> tuple[Counter[str], set[str], Counter[tuple[str, str, str]]]:
    """Episodes by source description, entity names, and (source, target, fact) of facts."""
    engine = open_engine(Settings.for_home(home, kuzu_buffer_pool_mb=256))
    try:
        eps = anyio.run(
            dispatch, engine, "knowledge_get_episodes", {"group_id": GROUP, "last_n": 1000}
        )
        nodes = anyio.run(dispatch, engine, "knowledge_get_nodes_by_group", {"group_ids": [GROUP]})
        edges = anyio.run(dispatch, engine, "knowledge_get_edges_by_group", {"group_ids": [GROUP]})
    finally:
        engine.close()
    names = {n["uuid"]: n["name"] for n in nodes["nodes"]}
    return (
        Counter(e["source_description"] for e in eps["episodes"]),
        set(names.values()),
        Counter(
            (names[e["source_node_uuid"]], names[e["target_node_uuid"]], e["fact"])
            for e in edges["edges"]
            if not e.get("expired_at")
        ),
    )


def source_of(episode: dict[str, Any]) -> str:
    return str(episode["source_description"]).split(":", 1)[0]


def test_a_folder_is_ingested_with_document_dates_and_synced_incrementally(
    tmp_path: Path, folder: Path, server: ScriptedLlmServer
) -> None:
    home = tmp_path / ".lcg"
    env = {"LCG_EXTRACTION_URL": server.url}
    first = summary(ingest(home, str(folder), "--group", GROUP, "--json", env=env))
    assert first["files_done"] == 4 and first["files_failed"] == 0
    assert first["undated_files"] == ["undated.md"]
    calls = server.count
    # One per chunk (each is shorter than LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS), plus the probe.
    assert calls == first["chunks_done"] + 1
    eps = episodes(home)
    assert len(eps) == first["chunks_done"]
    for episode in eps:
        expected = EXPECTED_TIMES.get(source_of(episode))
        if expected is not None:
            assert episode["valid_at"].startswith(expected), episode

    # Nothing changed: no request at all (nothing to extract, so no preflight probe either).
    again = summary(ingest(home, str(folder), "--group", GROUP, "--json", env=env))
    assert again["files_skipped"] == 4 and again["files_done"] == 0
    assert server.count == calls

    # One file edited: only it is re-ingested, its old episodes replaced.
    (folder / "release-3.md").write_text(FILES["release-3.md"] + "\n\nErin Gray audits Orion.")
    before = server.count
    edited = summary(ingest(home, str(folder), "--group", GROUP, "--json", env=env))
    assert edited["files_done"] == 1 and edited["files_skipped"] == 3
    assert server.count == before + 1 + edited["chunks_done"]  # the probe, one call per chunk
    by_source = Counter(source_of(e) for e in episodes(home))
    assert by_source["release-3.md"] == edited["chunks_done"]
    assert sum(by_source.values()) == len(eps)
    assert any("Erin Gray" in e["content"] for e in episodes(home))

    # One file deleted, with --prune: only its episodes go.
    (folder / "undated.md").unlink()
    pruned = summary(ingest(home, str(folder), "--group", GROUP, "--prune", "--json", env=env))
    assert pruned["files_pruned"] == 1 and pruned["episodes_deleted"] >= 1
    after = Counter(source_of(e) for e in episodes(home))
    assert "undated.md" not in after
    assert {k: v for k, v in by_source.items() if k != "undated.md"} == dict(after)


def test_dry_run_prints_the_plan_and_calls_nothing(
    tmp_path: Path, folder: Path, server: ScriptedLlmServer
) -> None:
    result = ingest(
        tmp_path / ".lcg",
        str(folder),
        "--group",
        GROUP,
        "--dry-run",
        "--json",
        env={"LCG_EXTRACTION_URL": server.url},
    )
    plan = json.loads(result.stdout)
    assert plan["dry_run"] and plan["to_ingest"] == 4
    assert plan["llm_calls"] == plan["chunks"]  # every chunk is short enough for one call
    assert plan["undated_files"] == ["undated.md"]
    two_calls = ingest(
        tmp_path / ".lcg",
        str(folder),
        "--group",
        GROUP,
        "--dry-run",
        "--json",
        env={"LCG_EXTRACTION_URL": server.url, "LCG_EXTRACTION_SINGLE_CALL_MAX_CHARS": "0"},
    )
    split = json.loads(two_calls.stdout)
    assert split["llm_calls"] == 2 * split["chunks"] == 2 * plan["chunks"]
    assert split["input_tokens"] > plan["input_tokens"]
    assert server.count == 0
    assert not (tmp_path / ".lcg" / "db").exists()


def test_an_unreachable_extractor_is_named_within_seconds(tmp_path: Path, folder: Path) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed once the block ends: nothing listens there
    url = f"http://127.0.0.1:{port}/v1"
    started = time.monotonic()
    result = ingest(
        tmp_path / ".lcg", str(folder), "--group", GROUP, env={"LCG_EXTRACTION_URL": url}
    )
    assert time.monotonic() - started < 10
    assert result.exit_code != 0
    assert f"127.0.0.1:{port}" in str(result.exception) + result.output
    assert "extractor" in str(result.exception) + result.output


def _ingest_process(home: Path, folder: Path, url: str) -> subprocess.Popen[bytes]:
    env = {**os.environ, "LCG_EXTRACTION_URL": url}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "lcg.cli",
            "--home",
            str(home),
            "ingest",
            str(folder),
            "--group",
            GROUP,
            "--concurrency",
            "1",
            "--json",
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def test_a_run_killed_half_way_resumes_to_the_same_graph(tmp_path: Path, folder: Path) -> None:
    clean_home, killed_home = tmp_path / "clean", tmp_path / "killed"
    with ScriptedLlmServer(heuristic_responder) as fast:
        summary(
            ingest(
                clean_home,
                str(folder),
                "--group",
                GROUP,
                "--json",
                env={"LCG_EXTRACTION_URL": fast.url},
            )
        )
    with ScriptedLlmServer(heuristic_responder, latency_s=0.15) as slow:
        process = _ingest_process(killed_home, folder, slow.url)
        try:
            # The probe and two of the four chunks' calls: one chunk done, one in flight.
            assert slow.wait_for(3, timeout=60), "the ingest never got going"
        finally:
            process.send_signal(signal.SIGKILL)
            process.wait(timeout=30)
        assert process.returncode == -signal.SIGKILL
    with ScriptedLlmServer(heuristic_responder) as fast:
        resumed = summary(
            ingest(
                killed_home,
                str(folder),
                "--group",
                GROUP,
                "--json",
                env={"LCG_EXTRACTION_URL": fast.url},
            )
        )
    assert resumed["files_done"] + resumed["files_skipped"] == 4
    assert resumed["files_done"] >= 1  # the kill did interrupt something
    clean, killed = graph(clean_home), graph(killed_home)
    assert killed[0] == clean[0]  # the same episodes, none duplicated
    assert max(killed[0].values()) == 1
    assert killed[1] == clean[1]
    assert killed[2] == clean[2]


def test_a_symbolic_link_out_of_the_folder_is_refused_and_listed(
    tmp_path: Path, folder: Path, server: ScriptedLlmServer
) -> None:
    # A link in a shared folder must not bring another file's text into the graph (the rule
    # `lcg code ingest` follows); a link to a file inside the folder is still read.
    secret = tmp_path / "secret" / "credentials.md"
    secret.parent.mkdir()
    secret.write_text("The vault password is hunter2-orbital.")
    (folder / "notes" / "creds.md").symlink_to(secret)
    (folder / "alias.md").symlink_to(folder / "release-3.md")
    home = tmp_path / ".lcg"
    result = ingest(
        home, str(folder), "--group", GROUP, "--json", env={"LCG_EXTRACTION_URL": server.url}
    )
    stats = summary(result)
    assert stats["files_done"] == len(FILES) + 1 and stats["files_failed"] == 0
    assert "skipped 1 symbolic link leading outside the folder" in result.stderr
    assert "  notes/creds.md" in result.stderr
    contents = [e["content"] for e in episodes(home)]
    assert not any("hunter2" in c for c in contents)
    assert any(source_of(e) == "alias.md" for e in episodes(home))
