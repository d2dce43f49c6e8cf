"""episode_ops (lcg.engine.commits): the WAL operations of several consecutive episodes of one
group committed as one batch — entities once in their last version, facts a later episode of
the batch ends written ended, supersessions of stored facts kept, every episode and its
mentions kept; episodes of two groups refused."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from lcg.engine.commits import EpisodeCommit, Invalidation, episode_ops
from lcg.errors import InvalidRequestError
from lcg.models import Entity, Episode, Fact

T1 = datetime(2024, 1, 1, tzinfo=UTC)
T2 = datetime(2024, 2, 1, tzinfo=UTC)
NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _entity(uuid: str, summary: str, group: str = "g") -> Entity:
    return Entity(uuid, group, uuid, ("Entity",), summary, "{}", T1)


def _fact(uuid: str) -> Fact:
    return Fact(uuid, "g", "a", "b", "CALLS", "a calls b", valid_at=T1, created_at=T1)


def _episode(uuid: str, when: datetime, group: str = "g") -> Episode:
    return Episode(uuid, group, uuid, "text", created_at=NOW, valid_at=when)


def test_one_episode_keeps_the_single_commit_order() -> None:
    commit = EpisodeCommit(
        "g",
        _episode("ep1", T1),
        [_entity("a", "first"), _entity("b", "b")],
        [_fact("f1")],
        [Invalidation("stored", T1, NOW)],
        ["a"],
    )
    names = [op.name for op in episode_ops([commit])]
    assert names == [
        "entity.upsert",
        "entity.upsert",
        "fact.upsert",
        "fact.invalidate",
        "episode.add",
        "mentions.add",
    ]


def test_several_episodes_fold_into_the_final_graph() -> None:
    first = EpisodeCommit(
        "g", _episode("ep1", T1), [_entity("a", "v1"), _entity("b", "b")], [_fact("f1")], []
    )
    second = EpisodeCommit(
        "g",
        _episode("ep2", T2),
        [_entity("a", "v2")],
        [],
        [Invalidation("f1", T2, NOW), Invalidation("stored", T2, NOW)],
        ["a"],
    )
    ops = episode_ops([first, second])
    entities = [op.data for op in ops if op.name == "entity.upsert"]
    assert [(e["uuid"], e["summary"]) for e in entities] == [("a", "v2"), ("b", "b")]
    (fact,) = [op.data for op in ops if op.name == "fact.upsert"]
    assert fact["uuid"] == "f1" and fact["valid_at"] != fact["invalid_at"]
    assert fact["invalid_at"].startswith("2024-02-01") and fact["expired_at"].startswith("2026")
    ends = [op.data["uuid"] for op in ops if op.name == "fact.invalidate"]
    assert ends == ["stored"]
    episodes = [
        (op.data["uuid"], op.data["valid_at"][:10]) for op in ops if op.name == "episode.add"
    ]
    assert episodes == [("ep1", "2024-01-01"), ("ep2", "2024-02-01")]
    assert [op.data["episode"] for op in ops if op.name == "mentions.add"] == ["ep2"]


def test_episodes_of_two_groups_or_none_are_refused() -> None:
    with pytest.raises(InvalidRequestError, match="no episode"):
        episode_ops([])
    other = EpisodeCommit("h", _episode("ep2", T2, "h"), [_entity("x", "x", "h")])
    with pytest.raises(InvalidRequestError, match="groups 'g' and 'h'"):
        episode_ops([EpisodeCommit("g", _episode("ep1", T1)), other])
