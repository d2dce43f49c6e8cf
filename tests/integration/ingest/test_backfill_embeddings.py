"""knowledge_backfill_summary_embeddings: counts, progress frames, idempotence, the cache."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from rpc_support import running_server, wait_settled

from lcg import Engine, Settings, open_engine
from lcg.embedding.base import EmbedderIdentity, Vectors
from lcg.embedding.hashing import HashEmbedder
from lcg.engine import EpisodeCommit
from lcg.errors import InvalidRequestError
from lcg.models import Entity, Episode, Fact
from lcg.service.registry import Context, dispatch
from lcg.service.rpc.client import RpcClient
from lcg.storage.store import delete_database_files
from lcg.testing.scripted_embeddings import ScriptedEmbeddingServer
from lcg.timeutil import now

# The method tests run on the embedded store and on a FalkorDB server (conftest).
BOTH_STORAGES = True

pytestmark = pytest.mark.anyio

BACKFILL = "knowledge_backfill_summary_embeddings"


def _uuid() -> str:
    return str(uuid.uuid4())


class CountingEmbedder:
    """The hash embedder, counting the texts it is asked to embed (the model boundary)."""

    def __init__(self, dim: int) -> None:
        self.inner = HashEmbedder(dim)
        self.calls: list[int] = []

    @property
    def identity(self) -> EmbedderIdentity:
        return self.inner.identity

    def embed(self, texts: list[str]) -> Vectors:
        self.calls.append(len(texts))
        return self.inner.embed(texts)


def settings_for(tmp_path: Path) -> Settings:
    return Settings.for_home(tmp_path / ".lcg", kuzu_buffer_pool_mb=256, embedder="hash")


async def populate(engine: Engine, group: str = "g1") -> None:
    """3 entities (2 with summaries), 2 facts, 1 episode: 3 + 2 + 2 + 1 = 8 vector rows."""
    a = Entity(_uuid(), group, "Apollo 13", summary="A crewed Moon mission.")
    b = Entity(_uuid(), group, "Jim Lovell", summary="Its commander.")
    c = Entity(_uuid(), group, "Fred Haise")
    facts = [
        Fact(_uuid(), group, b.uuid, a.uuid, "COMMANDED", "Jim Lovell commanded Apollo 13"),
        Fact(_uuid(), group, c.uuid, a.uuid, "FLEW_ON", "Fred Haise flew on Apollo 13"),
    ]
    episode = Episode(_uuid(), group, "note", "Apollo 13 launched in April 1970.", created_at=now())
    await engine.commit_episode(
        EpisodeCommit(group, episode, entities=[a, b, c], facts=facts, mentions=[a.uuid, b.uuid])
    )


async def test_a_new_embedder_re_embeds_every_row_once_with_progress(tmp_path: Path) -> None:
    engine = open_engine(settings_for(tmp_path), embedder=HashEmbedder(384))
    try:
        await populate(engine, "g1")
        await populate(engine, "g2")
    finally:
        engine.close()

    counting = CountingEmbedder(128)
    engine = open_engine(settings_for(tmp_path), embedder=counting)
    try:
        opened = list(counting.calls)  # the search index may embed while it loads
        dry = await dispatch(engine, BACKFILL, {"dry_run": True})
        assert (dry["scanned"], dry["stale"], dry["missing"], dry["embedded"]) == (16, 16, 0, 0)
        assert counting.calls == opened and set(dry["groups"]) == {"g1", "g2"}

        frames: list[dict[str, Any]] = []
        done = await dispatch(engine, BACKFILL, {"batch_size": 3}, Context(progress=frames.append))
        assert (done["scanned"], done["embedded"], done["already_current"]) == (16, 16, 0)
        assert done["groups"]["g1"]["embedded"] == done["groups"]["g1"]["written"] == 8
        assert all(n <= 3 for n in counting.calls[len(opened) :])  # batches of at most 3
        assert sum(counting.calls) == 8  # g2 repeats g1's texts: each was embedded once
        assert [f["processed"] for f in frames] == [3, 6, 8, 11, 14, 16]
        assert {f["phase"] for f in frames} == {"embedding"} and frames[-1]["total"] == 16
        assert (await dispatch(engine, "knowledge_status", {}))["embedding_model_status"] == "ok"

        calls = list(counting.calls)
        again = await dispatch(engine, BACKFILL, {})
        assert (again["embedded"], again["already_current"]) == (0, 16)
        assert counting.calls == calls  # nothing embedded the second time
    finally:
        engine.close()


async def test_a_rebuild_after_a_backfill_embeds_nothing_again(tmp_path: Path) -> None:
    engine = open_engine(settings_for(tmp_path), embedder=HashEmbedder(384))
    try:
        await populate(engine)
    finally:
        engine.close()
    first = CountingEmbedder(96)
    engine = open_engine(settings_for(tmp_path), embedder=first)
    try:
        assert (await dispatch(engine, BACKFILL, {}))["embedded"] == 8
    finally:
        engine.close()
    delete_database_files(settings_for(tmp_path).db_path)
    second = CountingEmbedder(96)
    engine = open_engine(settings_for(tmp_path), embedder=second)  # rebuilt from the WAL
    try:
        assert second.calls == []  # every vector came from the on-disk cache
        assert (await dispatch(engine, BACKFILL, {}))["already_current"] == 8
    finally:
        engine.close()


@pytest.mark.kuzu_only(
    "raw Cypher mutations are logged as Kuzu statements (cypher.exec) and refused on FalkorDB"
)
async def test_rows_made_stale_by_raw_cypher_are_re_embedded_or_removed(engine: Engine) -> None:
    await populate(engine)
    await dispatch(
        engine,
        "knowledge_query_cypher",
        {"query": "MATCH (e:Entity) WHERE e.name = 'Fred Haise' SET e.name = 'Fred W. Haise'"},
    )
    await dispatch(
        engine,
        "knowledge_query_cypher",
        {"query": "MATCH (e:Entity) WHERE e.name = 'Jim Lovell' SET e.summary = ''"},
    )
    result = await dispatch(engine, BACKFILL, {"group_ids": ["g1"]})
    assert (result["stale"], result["embedded"], result["removed"]) == (1, 1, 1)
    assert result["scanned"] == 7 and result["already_current"] == 6
    again = await dispatch(engine, BACKFILL, {"group_ids": ["g1"]})
    assert (again["embedded"], again["removed"], again["already_current"]) == (0, 0, 7)


async def test_an_unknown_group_is_scanned_as_empty(engine: Engine) -> None:
    result = await dispatch(engine, BACKFILL, {"group_ids": ["nobody"]})
    assert result["groups"] == {
        "nobody": {
            "scanned": 0,
            "missing": 0,
            "stale": 0,
            "already_current": 0,
            "embedded": 0,
            "written": 0,
            "skipped_changed": 0,
            "removed": 0,
        }
    }


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"batch_size": 0}, "batch_size"),
        ({"batch_size": 5000}, "batch_size"),
        ({"batch_size": "10"}, "batch_size"),
        ({"dry_run": "yes"}, "dry_run"),
        ({"group_ids": [1]}, "group_ids"),
    ],
)
async def test_bad_params_are_refused_naming_the_field(
    engine: Engine, params: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidRequestError) as info:
        await dispatch(engine, BACKFILL, params)
    assert info.value.field == field


def test_the_service_streams_backfill_progress_frames_over_the_socket(tmp_path: Path) -> None:
    with ScriptedEmbeddingServer(dim=32) as embeddings:
        settings = Settings.for_home(
            tmp_path / ".lcg",
            kuzu_buffer_pool_mb=256,
            embedder="http",
            embedding_url=embeddings.url,
            embedding_batch_size=2,
        )
        with running_server(settings) as (server, path, _):
            wait_settled(server)
            with RpcClient(path, timeout=60) as client:
                for name in ("Apollo 13", "Jim Lovell", "Fred Haise"):
                    client.call("knowledge_assert_entity", {"name": name, "group_id": "g1"})
                # Texts edited behind the engine's back (raw Cypher) leave stale vector rows.
                client.call(
                    "knowledge_query_cypher",
                    {"query": "MATCH (e:Entity) SET e.name = e.name + ' (renamed)'"},
                )
                sent = embeddings.count
                frames: list[dict[str, Any]] = []
                result = client.call(
                    BACKFILL, {"group_ids": ["g1"], "batch_size": 2}, progress=frames.append
                )
    assert (result["scanned"], result["stale"], result["embedded"]) == (3, 3, 3)
    assert [(f["type"], f["phase"], f["processed"], f["total"]) for f in frames] == [
        ("progress", "embedding", 2, 3),
        ("progress", "embedding", 3, 3),
    ]
    assert [len(b) for b in embeddings.batches[sent:]] == [2, 1]  # the renamed texts, batched
