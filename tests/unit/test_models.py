"""lcg.models: label and attribute normalisation, names, and the wire shapes of rows."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from lcg.models import (
    Entity,
    Episode,
    Fact,
    canonical_attributes,
    entity_to_wire,
    episode_to_wire,
    fact_to_wire,
    normalize_labels,
    normalize_name,
)


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (None, ("Entity",)),
        ([], ("Entity",)),
        ((), ("Entity",)),
        (["Entity"], ("Entity",)),
        (["Person"], ("Entity", "Person")),
        (["Person", "Entity"], ("Entity", "Person")),
        (["Entity", "Person", "Entity"], ("Entity", "Person")),
        (["Person", "Astronaut", "Person"], ("Entity", "Person", "Astronaut")),
        ([" Person ", "Person", "  "], ("Entity", "Person")),
        (["", " Entity "], ("Entity",)),
        (["entity"], ("Entity", "entity")),  # only the exact label is the base one
        (("Rocket", "Vehicle"), ("Entity", "Rocket", "Vehicle")),
    ],
)
def test_normalize_labels_puts_entity_first_exactly_once(
    labels: list[str] | tuple[str, ...] | None, expected: tuple[str, ...]
) -> None:
    assert normalize_labels(labels) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (None, "{}"),
        ({}, "{}"),
        ("{}", "{}"),
        ({"role": "commander"}, '{"role":"commander"}'),
        ('{"role": "commander"}', '{"role":"commander"}'),
        ({"n": 1, "ok": True, "none": None, "x": 1.5}, '{"n":1,"none":null,"ok":true,"x":1.5}'),
        ({"nested": {"a": 1}}, '{"nested":"{\\"a\\":1}"}'),
        ({"list": [1, "two"]}, '{"list":"[1,\\"two\\"]"}'),
        ({"": 1, "  ": 2, "kept": 3}, '{"kept":3}'),
        ({"名": "é"}, '{"名":"é"}'),
    ],
    ids=[
        "none",
        "empty",
        "empty-text",
        "object",
        "object-text",
        "scalars",
        "nested-object",
        "nested-list",
        "blank-keys",
        "unicode",
    ],
)
def test_canonical_attributes_is_compact_flat_json_object_text(
    value: object, expected: str
) -> None:
    assert canonical_attributes(value) == expected  # type: ignore[arg-type]
    assert isinstance(json.loads(expected), dict)


def test_canonical_attributes_is_idempotent() -> None:
    once = canonical_attributes({"b": {"y": 1, "x": [2]}, "a": "text", "": 0})
    assert canonical_attributes(once) == once


def test_equal_attribute_objects_give_equal_text() -> None:
    assert canonical_attributes({"a": 1, "b": 2}) == canonical_attributes({"b": 2, "a": 1})
    assert canonical_attributes({"k": {"x": 1, "y": 2}}) == canonical_attributes(
        {"k": {"y": 2, "x": 1}}
    )
    assert canonical_attributes('{"b": 2, "a": 1}') == canonical_attributes({"a": 1, "b": 2})


@pytest.mark.parametrize("value", ["[1, 2]", '"text"', "3", "null", "not json"])
def test_canonical_attributes_refuses_text_that_is_not_a_json_object(value: str) -> None:
    with pytest.raises(ValueError):
        canonical_attributes(value)


def test_canonical_attributes_refuses_values_that_are_not_objects() -> None:
    with pytest.raises(ValueError):
        canonical_attributes([("a", 1)])  # type: ignore[arg-type]  # the wrong type is the point


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("Neil Armstrong", "neil armstrong"),
        ("  NEIL armstrong \n", "neil armstrong"),
        ("Straße", "strasse"),
    ],
)
def test_names_match_trimmed_and_case_folded(name: str, key: str) -> None:
    assert normalize_name(name) == key


STAMP = datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)


def test_entity_wire_shape() -> None:
    entity = Entity("e1", "g", "Neil", ("Entity", "Person"), "s", '{"a":1}', STAMP)
    assert entity_to_wire(entity, ["ep1"], ["notes.md:1"]) == {
        "uuid": "e1",
        "name": "Neil",
        "group_id": "g",
        "labels": ["Entity", "Person"],
        "created_at": "2024-05-06 07:08:09",
        "summary": "s",
        "attributes": '{"a":1}',
        "episode_uuids": ["ep1"],
        "source_descriptions": ["notes.md:1"],
    }
    bare = entity_to_wire(Entity("e2", "g", "X"))
    assert bare["created_at"] == "" and bare["episode_uuids"] == [] and bare["attributes"] == "{}"


def test_fact_wire_shape_has_an_empty_created_at_and_null_times() -> None:
    fact = Fact("f1", "g", "a", "b", "KNOWS", "a knows b", "", valid_at=STAMP, created_at=STAMP)
    wire = fact_to_wire(fact)
    assert wire["created_at"] == ""
    assert wire["valid_at"] == "2024-05-06 07:08:09"
    assert wire["invalid_at"] is None
    assert wire["relation_type"] is None
    assert (wire["source_node_uuid"], wire["target_node_uuid"]) == ("a", "b")
    hidden = fact_to_wire(fact, endpoints_present=False)
    assert (hidden["source_node_uuid"], hidden["target_node_uuid"]) == ("", "")


def test_episode_wire_shape() -> None:
    episode = Episode("ep1", "g", "chunk-1", "text", "message", "notes.md:1", created_at=STAMP)
    assert episode_to_wire(episode, ["e1"]) == {
        "uuid": "ep1",
        "name": "chunk-1",
        "group_id": "g",
        "created_at": "2024-05-06 07:08:09",
        "source": "message",
        "source_description": "notes.md:1",
        "content": "text",
        "valid_at": "",
        "entity_edges": ["e1"],
    }
