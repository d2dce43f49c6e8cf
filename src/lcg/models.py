"""Value types shared by the core: episodes, entities, facts, and their wire shapes.

Rows are frozen dataclasses with aware-UTC datetimes. `attributes` is kept as the JSON object
text the wire returns (docs/api.md §records: a JSON-encoded object *as a string*), canonicalised by
`canonical_attributes` so equal objects compare equal.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lcg.timeutil import to_read_format

__all__ = [
    "DEFAULT_GROUP_ID",
    "EmbeddingRow",
    "Entity",
    "Episode",
    "Fact",
    "canonical_attributes",
    "control_character",
    "entity_to_wire",
    "episode_to_wire",
    "fact_to_wire",
    "normalize_labels",
    "normalize_name",
]

DEFAULT_GROUP_ID = "liminis"


@dataclass(frozen=True)
class Episode:
    """A piece of ingested text: the provenance of entities and facts."""

    uuid: str
    group_id: str
    name: str
    content: str
    source: str = "text"
    source_description: str = ""
    source_file: str = ""
    chunk_id: str = ""
    created_at: datetime | None = None
    valid_at: datetime | None = None


@dataclass(frozen=True)
class Entity:
    """A node of the graph: a person, thing, place or idea, typed by its labels."""

    uuid: str
    group_id: str
    name: str
    labels: tuple[str, ...] = ("Entity",)
    summary: str = ""
    attributes: str = "{}"
    created_at: datetime | None = None
    merged_into: str | None = None


@dataclass(frozen=True)
class Fact:
    """A relationship between two entities, reified so it carries text, provenance and time.

    `valid_at`/`invalid_at` are valid time (when it was true in the world); `created_at`/
    `expired_at` are system time (when the graph learned and retired it).
    """

    uuid: str
    group_id: str
    source_uuid: str
    target_uuid: str
    name: str
    fact: str
    relation_type: str | None = None
    attributes: str = "{}"
    episodes: tuple[str, ...] = field(default_factory=tuple)
    valid_at: datetime | None = None
    invalid_at: datetime | None = None
    created_at: datetime | None = None
    expired_at: datetime | None = None


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def control_character(text: str) -> str | None:
    """The first C0 control character or DEL in `text`, if any: never part of a group id or a
    name (a newline there is a client's bug, and would be stored as `%0A` in the WAL's paths)."""
    found = _CONTROL.search(text)
    return found.group() if found else None


def normalize_name(name: str) -> str:
    """The key names are matched on: trimmed, case-folded."""
    return name.strip().casefold()


def normalize_labels(labels: list[str] | tuple[str, ...] | None) -> tuple[str, ...]:
    """`"Entity"` first, exactly once; blanks and duplicates dropped; `("Entity",)` if empty."""
    rest: list[str] = []
    for label in labels or ():
        text = label.strip()
        if text and text != "Entity" and text not in rest:
            rest.append(text)
    return ("Entity", *rest)


def canonical_attributes(value: dict[str, Any] | str | None) -> str:
    """Attributes as compact JSON object text: keys sorted (at every level), nested values
    JSON-encoded, empty keys dropped.

    Raises:
        ValueError: `value` is text that is not a JSON object.
    """
    if value is None:
        return "{}"
    obj = json.loads(value) if isinstance(value, str) else value
    if not isinstance(obj, dict):
        raise ValueError("attributes must be a JSON object")
    flat: dict[str, Any] = {}
    for key, item in obj.items():
        if not isinstance(key, str) or not key.strip():
            continue
        if isinstance(item, dict | list):
            item = json.dumps(item, separators=(",", ":"), ensure_ascii=False, sort_keys=True)
        flat[key] = item
    return json.dumps(flat, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def entity_to_wire(
    entity: Entity,
    episode_uuids: list[str] | None = None,
    source_descriptions: list[str] | None = None,
) -> dict[str, Any]:
    """The entity object of docs/api.md §records."""
    return {
        "uuid": entity.uuid,
        "name": entity.name,
        "group_id": entity.group_id,
        "labels": list(entity.labels),
        "created_at": to_read_format(entity.created_at) or "",
        "summary": entity.summary,
        "attributes": entity.attributes,
        "episode_uuids": list(episode_uuids or []),
        "source_descriptions": list(source_descriptions or []),
    }


def fact_to_wire(
    fact: Fact,
    episode_uuids: list[str] | None = None,
    source_descriptions: list[str] | None = None,
    *,
    endpoints_present: bool = True,
) -> dict[str, Any]:
    """The edge object of docs/api.md §records (`created_at` is always "" there)."""
    return {
        "uuid": fact.uuid,
        "name": fact.name,
        "source_node_uuid": fact.source_uuid if endpoints_present else "",
        "target_node_uuid": fact.target_uuid if endpoints_present else "",
        "group_id": fact.group_id,
        "fact": fact.fact,
        "created_at": "",
        "valid_at": to_read_format(fact.valid_at),
        "invalid_at": to_read_format(fact.invalid_at),
        "attributes": fact.attributes,
        "relation_type": fact.relation_type or None,
        "episode_uuids": list(episode_uuids or []),
        "source_descriptions": list(source_descriptions or []),
    }


def episode_to_wire(episode: Episode, entity_edges: list[str]) -> dict[str, Any]:
    """The episode object of docs/api.md §records."""
    return {
        "uuid": episode.uuid,
        "name": episode.name,
        "group_id": episode.group_id,
        "created_at": to_read_format(episode.created_at) or "",
        "source": episode.source,
        "source_description": episode.source_description,
        "content": episode.content,
        "valid_at": to_read_format(episode.valid_at) or "",
        "entity_edges": entity_edges,
    }


@dataclass(frozen=True)
class EmbeddingRow:
    """A derived vector: `kind` is entity_name, entity_summary, fact or episode.

    The graph stores the row without `vec` (vectors live in the embedding cache).
    """

    kind: str
    owner: str
    group_id: str
    text_hash: str
    vec: Any = field(compare=False)  # a float32 numpy row; compared by text_hash, not value

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.owner}"
