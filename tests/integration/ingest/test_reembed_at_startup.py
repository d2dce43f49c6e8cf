"""`lcg serve` on a workspace embedded by another model (`mismatch`).

A real Kuzu workspace embedded with hash-384 is served with hash-256: by default the service
says in one line how to re-embed (`lcg models reembed`) and changes nothing; with
`LCG_REEMBED=auto` it re-embeds in the background and status turns `ok`, search swapping to the
new model. The second test runs `lcg serve` itself (the setting read from the environment).
"""

from __future__ import annotations

import logging
import time
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from rpc_support import WAIT_SECONDS, ServiceProcess, running_server, short_socket_dir

from lcg import Settings, open_engine
from lcg.embedding.hashing import HashEmbedder
from lcg.engine import EpisodeCommit
from lcg.models import Entity, Episode
from lcg.service.rpc.client import RpcClient
from lcg.timeutil import now

OFFER = "run `lcg models reembed` to re-embed"


def _settings(tmp_path: Path, **kw: Any) -> Settings:
    return Settings.for_home(tmp_path / ".lcg", kuzu_buffer_pool_mb=256, embedder="hash", **kw)


def _populate_with_hash_384(tmp_path: Path) -> None:
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(384))
    try:
        for group in ("g1", "g2"):
            entities = [
                Entity(str(uuid.uuid4()), group, f"Entity {i}", summary=f"moon lander {i}")
                for i in range(12)
            ]
            episode = Episode(str(uuid.uuid4()), group, "note", "notes", created_at=now())
            anyio.run(engine.commit_episode, EpisodeCommit(group, episode, entities=entities))
    finally:
        engine.close()


def _status(path: Path) -> dict[str, Any]:
    with RpcClient(path, timeout=30) as client:
        status: dict[str, Any] = client.call("knowledge_status")
        return status


def _wait_for(check: Any, what: str) -> None:
    deadline = time.monotonic() + WAIT_SECONDS
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_a_mismatch_is_offered_the_reembed_command_and_left_alone_by_default(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    _populate_with_hash_384(tmp_path)
    caplog.set_level(logging.INFO, logger="lcg.service.rpc.server")
    with running_server(_settings(tmp_path), embedder=HashEmbedder(256)) as (_, path, events):
        _wait_for(lambda: any(OFFER in r.getMessage() for r in caplog.records), "the offer")
        offers = [r.getMessage() for r in caplog.records if "lcg models reembed" in r.getMessage()]
        assert len(offers) == 1 and "\n" not in offers[0]
        assert "hash-ngram-v2-384" in offers[0] and "LCG_REEMBED=auto" in offers[0]
        status = _status(path)
        assert status["embedding_model_status"] == "mismatch"
        assert status["search_embedding_dim"] == 384
        assert not events.of_type("reembed")


def test_reembed_auto_re_embeds_in_the_background_until_status_is_ok(tmp_path: Path) -> None:
    _populate_with_hash_384(tmp_path)
    settings = _settings(tmp_path, reembed="auto")
    with running_server(settings, embedder=HashEmbedder(256)) as (_, path, events):
        _wait_for(
            lambda: any(e["state"] == "complete" for e in events.of_type("reembed")),
            "the background re-embed",
        )
        status = _status(path)
        assert status["embedding_model_status"] == "ok"
        assert {g["model"] for g in status["embedding_groups"].values()} == {"hash-ngram-v2-256"}
        assert (status["search_embedding_model"], status["search_embedding_dim"]) == (
            "hash-ngram-v2-256",
            256,
        )
        started, done = events.of_type("reembed")
        assert (started["state"], started["groups"], done["state"]) == ("started", 2, "complete")
        assert done["embedded"] >= 2 * 12 * 2  # names and summaries of both groups at least


def test_lcg_serve_reads_lcg_reembed_from_the_environment(tmp_path: Path) -> None:
    _populate_with_hash_384(tmp_path)
    env = {"LCG_EMBEDDER": "hash", "LCG_EMBEDDING_DIM": "256", "LCG_REEMBED": "auto"}
    with short_socket_dir() as directory:
        service = ServiceProcess(tmp_path, directory / "s.sock", env=env).start()
        try:
            _wait_for(
                lambda: any(
                    e.get("type") == "reembed" and e.get("state") == "complete"
                    for e in service.events()
                ),
                "lcg serve's re-embed",
            )
            assert _status(service.socket_path)["embedding_model_status"] == "ok"
        finally:
            assert service.stop() == 0
        log = service.stderr_path.read_text(encoding="utf-8")
        assert "LCG_REEMBED=auto: re-embedding 2 group(s) from hash-ngram-v2-384" in log


def test_an_unknown_reembed_mode_is_refused_naming_the_variable(tmp_path: Path) -> None:
    from lcg.config import load_settings
    from lcg.errors import ConfigError

    with pytest.raises(ConfigError, match="LCG_REEMBED"):
        load_settings(env={"LCG_HOME": str(tmp_path), "LCG_REEMBED": "sometimes"})
