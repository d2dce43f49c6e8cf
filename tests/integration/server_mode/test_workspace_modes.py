"""Everything lcg creates inside `.lcg` is private: directories 0700 and files 0600, like `.lcg`
itself, whatever the process umask (files were 0644 and directories 0755 under umask 022).

The database directory is walked too: the search and name snapshots saved beside the database
were 0644 (numpy and Arrow write under the umask), and so was the database file itself.
"""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from rpc_support import short_socket_dir, wait_healthy

from lcg import Settings, open_engine
from lcg.service.registry import dispatch


def _exercise(settings: Settings) -> None:
    engine = open_engine(settings)

    async def writes() -> None:
        await dispatch(engine, "knowledge_assert_entity", {"name": "Neil Armstrong"})
        await dispatch(engine, "knowledge_assert_entity", {"name": "Apollo 11"})
        await dispatch(
            engine,
            "knowledge_assert_relationship",
            {"source_name": "Neil Armstrong", "predicate": "COMMANDED", "target_name": "Apollo 11"},
        )
        await dispatch(engine, "knowledge_assert_entity", {"name": "Ops", "group_id": "team/ops"})
        await dispatch(engine, "knowledge_wal_mark_create", {"name": "m1"})
        await dispatch(engine, "knowledge_status", {})  # refreshes the WAL bounds caches
        await dispatch(engine, "knowledge_dump_wal", {})
        await dispatch(engine, "knowledge_export_graph", {"path": "graph.jsonl"})
        await dispatch(engine, "knowledge_prepare_checkpoint", {})
        await dispatch(engine, "knowledge_build_indices", {})
        await dispatch(engine, "knowledge_find_relationships", {"query": "Apollo"})

    try:
        anyio.run(writes)
    finally:
        engine.close()


@pytest.mark.parametrize("umask", [0o022, 0o000])
def test_a_fresh_workspace_is_private(tmp_path: Path, umask: int) -> None:
    home = tmp_path / ".lcg"
    settings = Settings.for_home(home, kuzu_buffer_pool_mb=256, embedder="hash")
    old = os.umask(umask)
    try:
        _exercise(settings)
    finally:
        os.umask(old)
    db_dir = settings.db_path.parent
    seen = {"dirs": 0, "files": 0}
    loose = []
    for path in [home, *home.rglob("*")]:
        mode = stat.S_IMODE(path.lstat().st_mode)
        if path.is_dir():
            seen["dirs"] += 1
            if mode != 0o700:
                loose.append((str(path.relative_to(tmp_path)), oct(mode)))
        else:
            seen["files"] += 1
            if mode != 0o600:
                loose.append((str(path.relative_to(tmp_path)), oct(mode)))
    assert loose == []
    # The walk saw what the calls made: WAL files, generations, bounds caches, marks, the
    # embedding cache, the compacted dump, the export, the database directory.
    names = {p.name for p in home.rglob("*")}
    assert {".wal-generation.json", ".wal-bounds.json", "g1.create.json", "graph.jsonl"} <= names
    assert (home / "embeddings").is_dir() and (home / "wal-compacted").is_dir()
    assert any(p.suffix == ".jsonl" for p in (home / "wal" / "liminis").iterdir())
    assert stat.S_IMODE(db_dir.stat().st_mode) == 0o700
    assert (db_dir / "search-index").is_dir() and settings.db_path.is_file()
    assert seen["dirs"] >= 8 and seen["files"] >= 8, seen


@pytest.mark.slow  # five `lcg` processes: outside the fast lane
def test_a_cli_session_leaves_only_private_files(tmp_path: Path) -> None:
    # The real commands, as a user runs them (under a umask that lets others read): a folder
    # ingested offline, a search (its snapshot is saved), an export, an HTML export, and
    # `lcg serve --http` started (its token written) and stopped.
    home = tmp_path / ".lcg"
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "notes.md").write_text("# Notes\n\nAlice Smith leads the Atlas project at Acme.\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("LCG_")}
    env |= {"LCG_HOME": str(home), "LCG_EXTRACTOR": "heuristic", "LCG_EMBEDDER": "hash"}
    env["LCG_KUZU_BUFFER_POOL_MB"] = "256"

    def lcg(*args: str) -> None:
        done = subprocess.run(
            [sys.executable, "-m", "lcg.cli", *args],
            env=env,
            cwd=tmp_path,
            capture_output=True,
            timeout=300,
            preexec_fn=lambda: os.umask(0o022),
        )
        assert done.returncode == 0, done.stderr.decode()[-2000:]

    lcg("ingest", str(docs), "--group", "notes")
    lcg("search", "Atlas")
    lcg("export", str(home / "exports" / "graph.jsonl"))
    lcg("export-html", "-o", str(home / "exports" / "graph.html"))
    with short_socket_dir() as directory:
        sock = directory / "s.sock"
        args = ["serve", "--socket", str(sock), "--http", "--port", "0"]
        proc = subprocess.Popen(
            [sys.executable, "-m", "lcg.cli", *args],
            env=env,
            cwd=tmp_path,
            stderr=subprocess.DEVNULL,
            preexec_fn=lambda: os.umask(0o022),
        )
        try:
            wait_healthy(sock)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(60)
    loose = [
        (str(p.relative_to(home)), oct(stat.S_IMODE(p.lstat().st_mode)))
        for p in [home, *home.rglob("*")]
        if stat.S_IMODE(p.lstat().st_mode) != (0o700 if p.is_dir() else 0o600)
    ]
    assert loose == []
    names = {p.name for p in home.rglob("*")}
    assert {"http-token", "graph.jsonl", "graph.html", "search-index"} <= names, names
