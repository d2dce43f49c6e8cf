"""An ingested episode's commit creates the rows it minted (its episode, new entities, new facts
and their vectors' rows) without looking them up first (those pre-reads were a third
of the commit's Kuzu time), writes the same graph as before, and a uuid wrongly passed as
minted fails the commit on the primary key with nothing written or logged."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lcg import Engine
from lcg.engine import EpisodeCommit
from lcg.errors import StorageError
from lcg.ingest.pipeline import EpisodeInput, pipeline_for
from lcg.models import Entity, Episode
from lcg.storage.store import Conn

pytestmark = pytest.mark.anyio

SETTINGS_OVERRIDES = {"extractor": "heuristic"}
GROUP = "g"
FIRST = "Neil Armstrong commanded Apollo 11. Apollo 11 landed on the Moon in July 1969."
SECOND = (
    "Buzz Aldrin flew on Apollo 11 with Neil Armstrong. Michael Collins piloted the "
    "command module Columbia during Apollo 11."
)


def _episode(name: str, body: str, day: int) -> EpisodeInput:
    return EpisodeInput(GROUP, name, body, datetime(1969, 7, day, tzinfo=UTC))


async def _rows(engine: Engine) -> tuple[set[str], set[str], set[str]]:
    """uuids of the group's entities and facts, and its Embedding keys."""

    def read(conn: Any) -> tuple[set[str], set[str], set[str]]:
        entities = {e.uuid for e in conn.entities_in_groups([GROUP])}
        facts = {f.uuid for f in conn.facts_with_hops([GROUP])}
        return entities, facts, set(conn.embedding_hashes(GROUP))

    return await engine.read(read)


async def test_an_episodes_minted_rows_are_created_without_a_lookup(
    engine: Engine, monkeypatch: pytest.MonkeyPatch
) -> None:
    pipeline = pipeline_for(engine)
    await pipeline.ingest(_episode("first", FIRST, 20))
    entities_before, facts_before, _ = await _rows(engine)
    # Every statement of the second episode's commit and the keys it was given.
    asked: list[tuple[str, Any]] = []
    real = Conn.run

    def spy(self: Conn, query: str, params: dict[str, Any] | None = None) -> Any:
        asked.append((query, params))
        return real(self, query, params)

    monkeypatch.setattr(Conn, "run", spy)
    outcome = await pipeline.ingest(_episode("second", SECOND, 21))
    monkeypatch.setattr(Conn, "run", real)
    entities_after, facts_after, keys_after = await _rows(engine)
    minted = {outcome.episode_uuid}
    minted |= (entities_after - entities_before) | (facts_after - facts_before)
    assert outcome.entities_created >= 2 and facts_after - facts_before  # it made new rows
    assert entities_after - entities_before and len(minted) > 2
    # The minted rows were written, and their vector rows too ...
    assert {k.split(":", 1)[1] for k in keys_after} >= minted
    # ... and never looked up: no primary-key read (`$u`) or UNWIND lookup (`$keys`) named one.
    looked_up: set[str] = set()
    for query, params in asked:
        if not params or "RETURN" not in query:
            continue
        values = [params["u"]] if "u" in params else list(params.get("keys", []))
        looked_up |= {str(v).split(":", 1)[-1] for v in values}
    assert not looked_up & minted
    # The stored entities it mentions are still checked and read.
    assert looked_up & entities_before


async def test_a_stored_uuid_given_as_minted_fails_the_commit_and_writes_nothing(
    engine: Engine,
) -> None:
    at = datetime(2026, 1, 10, tzinfo=UTC)
    stored = Entity(uuid="e-1", group_id=GROUP, name="thing", summary="first", created_at=at)
    first = Episode(uuid="ep-1", group_id=GROUP, name="e", content="x", created_at=at)
    await engine.commit_episode(EpisodeCommit(GROUP, first, [stored], new=frozenset({"ep-1"})))
    with engine.writer() as w:
        position = w.position(GROUP)
    wrong = EpisodeCommit(
        GROUP,
        Episode(uuid="ep-2", group_id=GROUP, name="e", content="y", created_at=at),
        [Entity(uuid="e-1", group_id=GROUP, name="thing", summary="second", created_at=at)],
        new=frozenset({"ep-2", "e-1"}),  # e-1 is stored: a caller's mistake
    )
    with pytest.raises(StorageError):
        await engine.commit_episode(wrong)
    with engine.writer() as w:
        assert w.position(GROUP) == position  # nothing logged
    episodes = await engine.read(lambda r: r.episodes_by_uuids(["ep-1", "ep-2"]))
    entity = await engine.read(lambda r: r.entity_by_uuid("e-1"))
    assert set(episodes) == {"ep-1"} and entity is not None and entity.summary == "first"
    # The same commit without the wrong hint goes through (the failed one left no state).
    await engine.commit_episode(
        EpisodeCommit(GROUP, wrong.episode, wrong.entities, new=frozenset({"ep-2"}))
    )
    entity = await engine.read(lambda r: r.entity_by_uuid("e-1"))
    assert entity is not None and entity.summary == "second"
