"""The reference command line's `--extractor-uds` reaches a real service and its LLM calls."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from rpc_support import short_socket_dir, wait_healthy

from lcg.service.rpc.client import RpcClient
from lcg.testing.heuristic_llm import heuristic_responder
from lcg.testing.scripted_llm import ScriptedLlmServer


@pytest.fixture
def workdir() -> Iterator[Path]:
    with short_socket_dir() as directory:
        yield directory


def start_service(workdir: Path, *flags: str) -> subprocess.Popen[bytes]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("LCG_", "GRAPHITI_", "LIMINIS_", "ANTHROPIC_"))
    }
    env.update(
        LCG_HOME=str(workdir / ".lcg"),
        LCG_SOCKET_PATH=str(workdir / "service.sock"),
        LCG_KUZU_BUFFER_POOL_MB="256",
        LCG_EMBEDDER="hash",
    )
    with (workdir / "service.log").open("wb") as log:
        return subprocess.Popen(
            [sys.executable, "-m", "lcg.cli.compat", *flags],
            cwd=workdir,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=log,
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def telemetry(workdir: Path) -> list[dict[str, object]]:
    events = []
    for line in (workdir / "service.log").read_text(errors="replace").splitlines():
        if line.startswith("{"):
            with contextlib.suppress(ValueError):
                events.append(json.loads(line))
    return events


def test_extractor_uds_flag_drives_extraction_over_the_socket(workdir: Path) -> None:
    llm_sock = workdir / "llm.sock"
    with ScriptedLlmServer(heuristic_responder, uds_path=llm_sock, tcp=False) as llm:
        proc = start_service(workdir, "--extractor-uds", str(llm_sock))
        try:
            wait_healthy(workdir / "service.sock")
            with RpcClient(workdir / "service.sock", timeout=60) as client:
                extractor = client.call("knowledge_status")["extractor"]
                assert extractor["source"] == "--extractor-uds"
                assert extractor["endpoint"] == f"unix:{llm_sock}"
                client.call(
                    "knowledge_add_episode",
                    {
                        "name": "ep1",
                        "episode_body": "Ada Lovelace worked with Charles Babbage in London.",
                        "reference_time": "1843-01-01T00:00:00Z",
                    },
                )
        finally:
            stop(proc)
        assert llm.count >= 1
        assert all(r.path == "/v1/chat/completions" for r in llm.recorded)
    usage = [e for e in telemetry(workdir) if e.get("type") == "token_usage"]
    assert usage
    assert usage[0]["llm"] == "openai-compat:local"
    assert usage[0]["estimated_cost_usd"] is None
