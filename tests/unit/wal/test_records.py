"""lcg.wal.records: operations round-trip through WAL lines without losing or inventing values."""

from __future__ import annotations

import dataclasses
import json
import zlib
from datetime import UTC, datetime, timedelta, timezone

import pytest

from lcg.models import Entity, Episode, Fact, canonical_attributes
from lcg.wal.reader import parse_line
from lcg.wal.records import (
    OPS,
    Op,
    WalRecord,
    data_to_entity,
    data_to_episode,
    data_to_fact,
    encode_batch,
    encode_line,
    entity_op,
    episode_op,
    fact_op,
    made,
)

T1 = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
T2 = datetime(1969, 7, 20, 20, 17, 40, tzinfo=UTC)
PARIS = timezone(timedelta(hours=2))


def through_a_line(op: Op) -> dict[str, object]:
    """The op's data as a reader gets it back from an encoded WAL line."""
    record = parse_line(encode_line(5, "2024-01-01T00:00:00.000000+00:00", op))
    assert record is not None and record.op == op.name and record.seq == 5
    return record.data


ENTITIES = {
    "minimal": Entity("e1", "g", "Neil"),
    "everything": Entity(
        "e2",
        "g",
        "Neil Armstrong",
        ("Entity", "Person", "Astronaut"),
        "First person on the Moon",
        canonical_attributes({"role": "commander", "missions": ["Gemini 8", "Apollo 11"], "n": 2}),
        T1,
        None,
    ),
    "merged-tombstone": Entity(
        "e3", "g", "N. Armstrong", ("Entity", "Merged"), "", '{"merged_into":"e2"}', T2, "e2"
    ),
    "unicode-and-json-looking-text": Entity(
        "e4", "g", "Ünïcödé 名前", summary="{}", attributes='{"ключ":"значение"}'
    ),
}


@pytest.mark.parametrize("entity", ENTITIES.values(), ids=ENTITIES.keys())
def test_entities_round_trip_through_a_wal_line(entity: Entity) -> None:
    op = entity_op(entity)
    assert op.name == "entity.upsert"
    assert "group_id" not in op.data and "vec" not in op.data
    assert data_to_entity(through_a_line(op), "g") == entity


def test_an_entity_op_leaves_out_what_is_empty_or_default() -> None:
    assert entity_op(ENTITIES["minimal"]).data == {"uuid": "e1", "name": "Neil"}


def test_entity_attributes_are_stored_as_a_json_object() -> None:
    data = entity_op(ENTITIES["everything"]).data
    assert data["attributes"] == {
        "role": "commander",
        "missions": '["Gemini 8","Apollo 11"]',
        "n": 2,
    }
    assert data["labels"] == ["Entity", "Person", "Astronaut"]
    assert data["created_at"] == "2024-05-06T07:08:09.123456+00:00"


def test_the_group_comes_from_the_stream_not_the_record() -> None:
    entity = data_to_entity(entity_op(ENTITIES["minimal"]).data, "other-group")
    assert entity.group_id == "other-group"


FACTS = {
    "minimal": Fact("f1", "g", "e1", "e2", "KNOWS", ""),
    "everything": Fact(
        "f2",
        "g",
        "e1",
        "e2",
        "COMMANDED",
        "Armstrong commanded Apollo 11",
        "COMMANDS",
        canonical_attributes({"seat": "left", "hours": 195.3}),
        ("ep1", "ep2"),
        T2,
        T1,
        T1 - timedelta(days=1),
        T1,
    ),
    "fact-text-looking-like-json": Fact("f3", "g", "e1", "e2", "SAID", "{}"),
    "timestamps-in-another-zone": Fact(
        "f4", "g", "e1", "e2", "MET", "met", valid_at=datetime(2024, 1, 1, 2, 0, tzinfo=PARIS)
    ),
}


@pytest.mark.parametrize("fact", FACTS.values(), ids=FACTS.keys())
def test_facts_round_trip_through_a_wal_line(fact: Fact) -> None:
    op = fact_op(fact)
    assert op.name == "fact.upsert"
    assert data_to_fact(through_a_line(op), "g") == fact


def test_a_fact_op_names_its_endpoints_and_leaves_out_nulls() -> None:
    assert fact_op(FACTS["minimal"]).data == {
        "uuid": "f1",
        "source": "e1",
        "target": "e2",
        "name": "KNOWS",
    }


def test_fact_timestamps_are_written_in_utc() -> None:
    data = fact_op(FACTS["timestamps-in-another-zone"]).data
    assert data["valid_at"] == "2024-01-01T00:00:00.000000+00:00"


EPISODES = {
    "minimal": Episode("ep1", "g", "chunk-1", "text"),
    "everything": Episode(
        "ep2",
        "g",
        "chunk-2",
        "Armstrong stepped onto the Moon.",
        "message",
        "notes/moon.md:1",
        "notes/moon.md",
        "chunk-2",
        T1,
        T2,
    ),
    "json-content": Episode("ep3", "g", "payload", "{}", "json"),
    "no-content": Episode("ep4", "g", "empty", ""),
}


@pytest.mark.parametrize("episode", EPISODES.values(), ids=EPISODES.keys())
def test_episodes_round_trip_through_a_wal_line(episode: Episode) -> None:
    op = episode_op(episode)
    assert op.name == "episode.add"
    assert data_to_episode(through_a_line(op), "g") == episode


def test_an_episode_op_leaves_out_the_default_source() -> None:
    assert episode_op(EPISODES["minimal"]).data == {
        "uuid": "ep1",
        "name": "chunk-1",
        "content": "text",
    }
    assert episode_op(EPISODES["json-content"]).data["source"] == "json"


def test_encoded_lines_are_compact_utf8_json_ending_in_their_checksum_and_a_newline() -> None:
    raw = encode_line(3, "ts", Op("episode.delete", {"uuid": "é"}))
    body = '{"seq":3,"ts":"ts","op":"episode.delete","data":{"uuid":"é"},"at":0}'.encode()
    assert zlib.crc32(body) == 0x4B8163E9  # the CRC-32 of the line without its `crc` member
    assert raw == body[:-1] + b',"crc":"4b8163e9"}\n'
    assert list(json.loads(raw)) == ["seq", "ts", "op", "data", "at", "crc"]


def test_every_single_bit_flip_of_a_line_is_caught() -> None:
    raw = encode_line(7, "ts", Op("fact.upsert", {"uuid": "f", "name": "x"}), 2, 1)
    caught = 0
    for position in range(len(raw) - 1):  # the newline's flips split or join lines: elsewhere
        for bit in range(8):
            damaged = bytearray(raw)
            damaged[position] ^= 1 << bit
            pieces = [p for p in bytes(damaged).split(b"\n") if p.strip()]
            caught += all(parse_line(p) is None for p in pieces)
    assert caught == 8 * (len(raw) - 1)


def test_a_line_written_before_checksums_is_read() -> None:
    old = b'{"seq":3,"ts":"ts","op":"episode.delete","data":{"uuid":"u"},"more":1,"at":0}'
    record = parse_line(old)
    assert record is not None and (record.seq, record.more, record.data) == (3, 1, {"uuid": "u"})


@pytest.mark.parametrize(
    "line",
    [
        # a key no format wrote: the `crc` member's name damaged
        b'{"seq":3,"ts":"ts","op":"episode.delete","data":{},"at":0,"crb":"4b8163e9"}',
        # the right shape, the wrong sum
        b'{"seq":3,"ts":"ts","op":"episode.delete","data":{},"at":0,"crc":"00000000"}',
        # the sum not last
        b'{"seq":3,"ts":"ts","op":"episode.delete","crc":"4b8163e9","data":{},"at":0}',
        b'{"seq":3,"ts":"ts","op":"episode.delete","data":{},"at":0,"crc":7}',
    ],
)
def test_a_line_whose_checksum_does_not_hold_is_not_a_record(line: bytes) -> None:
    assert parse_line(line) is None


def test_each_line_of_a_batch_says_its_place_and_how_many_follow() -> None:
    lines = [json.loads(x) for x in encode_batch(5, "ts", [Op("group.purge", {})] * 3)]
    assert [(x["seq"], x.get("more", 0), x["at"]) for x in lines] == [
        (5, 2, 0),
        (6, 1, 1),
        (7, 0, 2),
    ]


def test_the_operation_set_is_closed() -> None:
    assert sorted(OPS) == [
        "cypher.exec",
        "entity.upsert",
        "episode.add",
        "episode.delete",
        "fact.invalidate",
        "fact.upsert",
        "group.purge",
        "mentions.add",
    ]


@pytest.mark.parametrize(
    ("convert", "data"),
    [
        (data_to_entity, {"uuid": "e", "name": "n", "labels": "Person"}),
        (data_to_entity, {"uuid": "e", "name": "n", "labels": ["Entity", 1]}),
        (data_to_entity, {"uuid": "e", "name": "n", "attributes": [1]}),
        (data_to_entity, {"uuid": "e", "name": 5}),
        (data_to_entity, {"uuid": 5, "name": "n"}),
        (data_to_entity, {"uuid": "e", "name": "n", "created_at": "yesterday"}),
        (data_to_fact, {"uuid": "f", "source": "a", "target": "b", "name": "n", "episodes": "ep"}),
        (data_to_fact, {"uuid": "f", "source": 1, "target": "b", "name": "n"}),
        (data_to_fact, {"uuid": "f", "source": "a", "target": "b", "name": "n", "attributes": "x"}),
        (data_to_episode, {"uuid": "ep", "name": "n", "content": 5}),
        (data_to_episode, {"uuid": "ep", "name": "n", "valid_at": "2024-01-01"}),
    ],
    ids=[
        "entity-labels-string",
        "entity-labels-number",
        "entity-attributes-list",
        "entity-name-number",
        "entity-uuid-number",
        "entity-created_at-words",
        "fact-episodes-string",
        "fact-source-number",
        "fact-attributes-string",
        "episode-content-number",
        "episode-valid_at-date-only",
    ],
)
def test_malformed_records_raise_value_error(convert: object, data: dict[str, object]) -> None:
    assert callable(convert)
    with pytest.raises(ValueError):
        convert(data, "g")


def test_a_record_read_back_is_the_object_its_constructor_makes() -> None:
    """`made` (the fast constructor the reader uses) gives the constructor's object in every
    way the engine sees: fields, equality, repr, `replace`, frozenness."""
    op = fact_op(FACTS["everything"])
    back = parse_line(encode_line(7, "2024-01-01T00:00:00.000000+00:00", op, 2, 1))
    value = WalRecord(7, "2024-01-01T00:00:00.000000+00:00", op.name, through_a_line(op), 2, 1)
    assert type(back) is WalRecord and vars(back) == vars(value)
    assert repr(back) == repr(value) and dataclasses.replace(back) == value
    with pytest.raises(dataclasses.FrozenInstanceError):
        back.seq = 8  # type: ignore[misc]  # frozen: assignment must raise


def test_made_refuses_values_that_do_not_name_every_field() -> None:
    fields = {f.name: None for f in dataclasses.fields(Episode)}
    with pytest.raises(TypeError, match="10 fields"):
        made(Episode, {k: v for k, v in fields.items() if k != "valid_at"})
    assert made(Episode, fields) == Episode(**fields)  # type: ignore[arg-type]  # None for all


def test_made_refuses_a_class_that_needs_its_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    with pytest.raises(TypeError, match="__init__"):
        made(Checked, {"n": -1})
