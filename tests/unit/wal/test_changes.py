"""lcg.wal.changes: each operation decodes to its typed change and back; a malformed one is
refused with a WalOpError naming the operation; a commit is cut into the runs a store applies."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from lcg.errors import WalError, WalOpError
from lcg.models import Entity, Episode, Fact
from lcg.wal.changes import (
    Change,
    CypherExec,
    EntityUpsert,
    EpisodeAdd,
    EpisodeDelete,
    FactInvalidate,
    FactUpsert,
    GroupPurge,
    MentionsAdd,
    decode,
    decode_all,
    encode,
    runs,
)
from lcg.wal.records import OPS, Op, entity_op, episode_op, fact_op

AT = datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC)
ENTITY = Entity(uuid="e1", group_id="g", name="Apollo 11", labels=("Entity", "Mission"))
FACT = Fact(
    uuid="f1",
    group_id="g",
    source_uuid="e1",
    target_uuid="e2",
    name="LANDED_ON",
    fact="Apollo 11 landed on the Moon",
    valid_at=AT,
)
EPISODE = Episode(uuid="ep1", group_id="g", name="landing", content="The Eagle has landed.")

ONE_OF_EACH: dict[str, tuple[Op, Change]] = {
    "entity.upsert": (entity_op(ENTITY), EntityUpsert(ENTITY)),
    "fact.upsert": (fact_op(FACT), FactUpsert(FACT)),
    "episode.add": (episode_op(EPISODE), EpisodeAdd(EPISODE)),
    "fact.invalidate": (
        Op(
            "fact.invalidate",
            {
                "uuid": "f1",
                "invalid_at": "1969-07-20T20:17:40.000000+00:00",
                "expired_at": None,
            },
        ),
        FactInvalidate("f1", AT, None),
    ),
    "episode.delete": (Op("episode.delete", {"uuid": "ep1"}), EpisodeDelete("ep1")),
    "mentions.add": (
        Op("mentions.add", {"episode": "ep1", "entities": ["e1", "e2"]}),
        MentionsAdd("ep1", ("e1", "e2")),
    ),
    "group.purge": (Op("group.purge", {}), GroupPurge()),
    "cypher.exec": (
        Op("cypher.exec", {"query": "MATCH (e) SET e.x = 1"}),
        CypherExec("MATCH (e) SET e.x = 1"),
    ),
}


def test_every_operation_has_a_change() -> None:
    assert set(ONE_OF_EACH) == OPS


@pytest.mark.parametrize("name", sorted(ONE_OF_EACH))
def test_an_operation_decodes_to_its_change_and_encodes_back(name: str) -> None:
    op, change = ONE_OF_EACH[name]
    assert decode(op, "g") == change
    assert encode(change) == op


@pytest.mark.parametrize(
    ("name", "data", "says"),
    [
        ("entity.updated", {"uuid": "e1"}, "unknown WAL operation 'entity.updated'"),
        ("entity.upsert", {"uuid": 7, "name": "x"}, "entity.upsert: uuid must be a string"),
        (
            "entity.upsert",
            {"uuid": "e", "labels": "Person"},
            "entity.upsert: labels must be a list of strings",
        ),
        (
            "fact.upsert",
            {"uuid": "f", "episodes": [1]},
            "fact.upsert: episodes must be a list of strings",
        ),
        ("fact.invalidate", {"invalid_at": None}, "fact.invalidate: uuid must be a non-empty"),
        ("fact.invalidate", {"uuid": "f", "invalid_at": "soon"}, "fact.invalidate: "),
        ("episode.delete", {"uuid": ""}, "episode.delete: uuid must be a non-empty string"),
        ("mentions.add", {"episode": "ep"}, "mentions.add: entities must be a list of strings"),
        ("mentions.add", {"entities": ["e"]}, "mentions.add: episode must be a non-empty"),
        ("cypher.exec", {"query": ["MATCH"]}, "cypher.exec: query must be a string"),
        ("group.purge", ["not", "an", "object"], "group.purge: its data must be an object"),
    ],
)
def test_a_malformed_operation_is_refused_naming_it(name: str, data: Any, says: str) -> None:
    with pytest.raises(WalOpError) as info:
        decode(Op(name, data), "g")
    assert str(info.value).startswith(says)
    # Replay and fold treat a malformed record by its ValueError; callers of the WAL by WalError.
    assert isinstance(info.value, ValueError) and isinstance(info.value, WalError)


def test_decode_all_refuses_the_whole_commit_for_one_bad_operation() -> None:
    with pytest.raises(WalOpError, match=r"^episode\.delete: "):
        decode_all([entity_op(ENTITY), Op("episode.delete", {})], "g")


def test_a_decoded_row_belongs_to_the_streams_group() -> None:
    change = decode(entity_op(ENTITY), "other")
    assert isinstance(change, EntityUpsert) and change.entity.group_id == "other"


def test_runs_group_consecutive_changes_of_a_class_and_keep_the_rest_alone() -> None:
    a, b = EntityUpsert(ENTITY), FactUpsert(FACT)
    m, p, q = MentionsAdd("ep1", ("e1",)), GroupPurge(), CypherExec("RETURN 1")
    changes: list[Change] = [a, a, b, m, m, p, p, q, q, b, b, a]
    assert [list(r) for r in runs(changes)] == [
        [a, a],
        [b],
        [m],
        [m],
        [p],
        [p],
        [q],
        [q],
        [b, b],
        [a],
    ]
    assert list(runs([])) == []
