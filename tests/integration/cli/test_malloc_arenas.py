"""`lcg mcp` / `lcg serve` on glibc run with malloc arenas capped (`lcg.cli.entry`): the process
re-executes itself with `MALLOC_ARENA_MAX=2` (same pid), unless the environment sets a value."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lcg.cli import entry

pytestmark = pytest.mark.skipif(
    not (sys.platform.startswith("linux") and entry._glibc()), reason="glibc's malloc only"
)

_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2024-11-05",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}


def _arena_max_of_a_running_mcp(tmp_path: Path, preset: str | None) -> str | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LCG_", "MALLOC_ARENA"))}
    if preset is not None:
        env["MALLOC_ARENA_MAX"] = preset
    env["LCG_HOME"] = str(tmp_path / ".lcg")
    proc = subprocess.Popen(
        [sys.executable, "-m", "lcg.cli", "mcp"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        env=env,
    )
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write((json.dumps(_INIT) + "\n").encode())
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())  # answered: past any re-execution
        assert answer["id"] == 1 and "result" in answer
        environ = Path(f"/proc/{proc.pid}/environ").read_bytes().split(b"\0")
        values = [
            e.split(b"=", 1)[1].decode() for e in environ if e.startswith(b"MALLOC_ARENA_MAX=")
        ]
        return values[0] if values else None
    finally:
        proc.kill()
        proc.communicate(timeout=30)  # waits, and closes the pipes


def test_a_long_running_command_starts_again_with_two_arenas(tmp_path: Path) -> None:
    assert _arena_max_of_a_running_mcp(tmp_path, None) == entry.ARENA_MAX


def test_a_value_the_environment_sets_is_kept(tmp_path: Path) -> None:
    assert _arena_max_of_a_running_mcp(tmp_path, "4") == "4"


def test_other_commands_are_not_re_executed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLOC_ARENA_MAX", raising=False)
    calls: list[object] = []
    monkeypatch.setattr(os, "execv", lambda *a: calls.append(a))
    entry.cap_malloc_arenas(["lcg", "--home", "x", "ingest", "notes/"])
    assert calls == [] and "MALLOC_ARENA_MAX" not in os.environ
    entry.cap_malloc_arenas(["lcg", "--home", "x", "serve"])
    assert len(calls) == 1 and os.environ["MALLOC_ARENA_MAX"] == entry.ARENA_MAX
