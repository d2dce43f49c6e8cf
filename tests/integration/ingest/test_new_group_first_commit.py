"""A new group's first commit stamps its embedder without asking the store whether the group
holds vectors (a scan of the Embedding table: ~0.4 s at 1M facts)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lcg import Engine
from lcg.embedding import stamp
from lcg.engine import EpisodeCommit
from lcg.models import Entity, Episode
from lcg.storage.kuzu_backend import KuzuReader

pytestmark = pytest.mark.anyio

AT = datetime(2026, 1, 10, tzinfo=UTC)


def _commit(group: str, n: int) -> EpisodeCommit:
    episode = Episode(uuid=f"ep-{group}-{n}", group_id=group, name="e", content="x", created_at=AT)
    entity = Entity(uuid=f"e-{group}-{n}", group_id=group, name=f"thing {n}", created_at=AT)
    return EpisodeCommit(group, episode, [entity])


async def test_a_new_groups_first_commit_stamps_it_without_scanning_for_vectors(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    await engine.commit_episode(_commit("old", 1))
    scans: list[str] = []
    real = KuzuReader.embedding_hashes

    def counted(self: KuzuReader, group_id: str, limit: int | None = None) -> dict[str, str]:
        scans.append(group_id)
        return real(self, group_id, limit)

    monkeypatch.setattr(KuzuReader, "embedding_hashes", counted)
    await engine.commit_episode(_commit("fresh", 1))
    await engine.commit_episode(_commit("fresh", 2))
    assert scans == []
    stamps = await engine.read(lambda r: r.get_meta(stamp.stamp_key("fresh"), "fresh"))
    assert stamps is not None and engine.parts.embedder.identity.model in stamps
