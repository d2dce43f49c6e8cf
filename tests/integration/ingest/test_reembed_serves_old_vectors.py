"""Switching embedder: search answers from the old model's vectors until the re-embed is done.

A real Kuzu workspace embedded with hash-384 is reopened with hash-256 (another model): the
search index answers with hash-384 (the stamped model, which loads offline) while
`knowledge_backfill_summary_embeddings` re-embeds in batches — searches made between its
batches return what they returned before the switch — and swaps to hash-256 only when every
group is restamped.
"""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import pytest
from click.testing import CliRunner  # noqa: TID251  drives `lcg models reembed` in-process

from lcg import Engine, Settings, open_engine
from lcg.cli.main import cli
from lcg.embedding import stamp
from lcg.embedding.hashing import HashEmbedder
from lcg.engine import EpisodeCommit
from lcg.models import Entity, Episode
from lcg.service.registry import Context, dispatch
from lcg.timeutil import now

pytestmark = pytest.mark.anyio

BACKFILL = "knowledge_backfill_summary_embeddings"
QUERIES = ("moon lander", "Saturn rocket engine", "Entity 7")


def _settings(tmp_path: Path) -> Settings:
    return Settings.for_home(tmp_path / ".lcg", kuzu_buffer_pool_mb=256, embedder="hash")


async def _populate(engine: Engine, group: str, n: int) -> None:
    words = ["moon", "lander", "rocket", "engine", "Saturn", "orbit", "crew", "station"]
    entities = [
        Entity(
            str(uuid.uuid4()),
            group,
            f"Entity {i}",
            summary=f"{words[i % 8]} {words[(i * 3) % 8]} {words[(i * 5 + 1) % 8]} number {i}",
        )
        for i in range(n)
    ]
    episode = Episode(
        str(uuid.uuid4()), group, "note", f"{n} entities of {group}", created_at=now()
    )
    await engine.commit_episode(EpisodeCommit(group, episode, entities=entities))


async def _search(engine: Engine) -> list[list[tuple[str, float]]]:
    out = []
    for query in QUERIES:
        found = await dispatch(engine, "knowledge_find_entities", {"query": query})
        out.append([(n["name"], round(float(n.get("score", 0.0)), 6)) for n in found["nodes"]])
    return out


async def test_search_answers_from_the_old_vectors_until_the_re_embed_completes(
    tmp_path: Path,
) -> None:
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(384))
    try:
        await _populate(engine, "g1", 30)
        await _populate(engine, "g2", 10)
        before = await _search(engine)
    finally:
        engine.close()
    assert any(before), "the queries must find something for the comparison to mean anything"

    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(256))
    try:
        status = await dispatch(engine, "knowledge_status", {})
        assert status["embedding_model_status"] == "mismatch"
        # Opened on a workspace hash-384 embedded: search still answers with hash-384, and
        # status says so next to the model in use.
        assert (status["embedding_dim"], status["search_embedding_dim"]) == (256, 384)
        assert status["search_embedding_model"] == "hash-ngram-v2-384"
        assert engine.parts.search.embed_query("moon").shape == (384,)
        assert await _search(engine) == before

        during: list[list[list[tuple[str, float]]]] = []
        dims: list[int] = []

        def progress(frame: dict[str, Any]) -> None:
            # Between two batches of the re-embed (its worker thread): search as a client would.
            if frame["processed"] < frame["total"]:
                dims.append(int(engine.parts.search.embed_query("moon").shape[0]))
                during.append(anyio.from_thread.run(_search, engine))

        done = await dispatch(engine, BACKFILL, {"batch_size": 7}, Context(progress=progress))
        assert done["embedded"] == done["scanned"] > 7 * 3  # several batches
        assert len(during) >= 3 and dims == [384] * len(dims)
        assert all(results == before for results in during)

        # Complete: every group restamped, and search swapped to hash-256 at once.
        status = await dispatch(engine, "knowledge_status", {})
        assert status["embedding_model_status"] == "ok"
        assert {g["model"] for g in status["embedding_groups"].values()} == {"hash-ngram-v2-256"}
        assert status["search_embedding_model"] == status["embedding_model"] == "hash-ngram-v2-256"
        assert engine.parts.search.embed_query("moon").shape == (256,)
        after = await _search(engine)
        assert [names[:1] for names in after] != [[]] * len(QUERIES)
        again = await dispatch(engine, BACKFILL, {"dry_run": True})
        assert again["already_current"] == again["scanned"] == done["scanned"]
    finally:
        engine.close()

    # Reopened after the re-embed: the stamps name hash-256, so search starts with it.
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(256))
    try:
        assert engine.parts.search.embed_query("moon").shape == (256,)
        assert await _search(engine) == after
    finally:
        engine.close()


async def test_a_write_during_the_mismatch_is_found_by_the_old_model(tmp_path: Path) -> None:
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(384))
    try:
        await _populate(engine, "g1", 5)
    finally:
        engine.close()
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(256))
    try:
        await dispatch(
            engine,
            "knowledge_assert_entity",
            {"name": "Lunokhod rover", "summary": "Soviet rover", "group_id": "g1"},
        )
        assert engine.parts.search.embed_query("rover").shape == (384,)
        found = await dispatch(engine, "knowledge_find_entities", {"query": "Lunokhod rover"})
        assert "Lunokhod rover" in [n["name"] for n in found["nodes"]]
    finally:
        engine.close()


def test_lcg_models_reembed_re_embeds_the_workspace_with_the_model_in_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(384))
    try:
        anyio.run(_populate, engine, "g1", 12)
    finally:
        engine.close()
    monkeypatch.setenv("LCG_EMBEDDER", "hash")
    monkeypatch.setenv("LCG_EMBEDDING_DIM", "256")
    done = CliRunner().invoke(
        cli, ["--home", str(tmp_path / ".lcg"), "models", "reembed", "--batch-size", "5"]
    )
    assert done.exit_code == 0, done.output
    # 12 names, 12 summaries, the episode: each one embedded with hash-256.
    assert "hash-ngram-v2-256: 25 vectors embedded, 0 already current" in done.output
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(256))
    try:
        status = anyio.run(dispatch, engine, "knowledge_status", {})
        assert status["embedding_model_status"] == "ok"
    finally:
        engine.close()


async def test_an_old_model_that_cannot_load_here_leaves_search_on_the_model_in_use(
    tmp_path: Path,
) -> None:
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(384))
    try:
        await _populate(engine, "g1", 5)
        # As if an endpoint's model had embedded the group: nothing here can load it.
        value = '{"dim": 384, "model": "remote-model"}'
        await dispatch(
            engine,
            "knowledge_query_cypher",
            {"query": f"MERGE (m:Meta {{key: '{stamp.stamp_key('g1')}'}}) SET m.value = '{value}'"},
        )
    finally:
        engine.close()
    engine = open_engine(_settings(tmp_path), embedder=HashEmbedder(256))
    try:
        status = await dispatch(engine, "knowledge_status", {})
        assert status["embedding_model_status"] == "mismatch"
        assert engine.parts.search.embed_query("moon").shape == (256,)
        found = await dispatch(engine, "knowledge_find_entities", {"query": "Entity 3"})
        assert "Entity 3" in [n["name"] for n in found["nodes"]]
    finally:
        engine.close()
