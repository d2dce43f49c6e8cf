"""Parameter model of knowledge_add_facts (an lcg method): caller-written entities and facts.

Every item is checked here, before anything runs, and an error names the offending member
(`facts[2].invalid_at`). Timestamps are RFC 3339 or a bare date (`2026-03-01`, midnight UTC);
a fact's `valid_at` defaults to the episode's `reference_time`, and `invalid_at` may not be
earlier than it. What only the group can tell (endpoints, superseded uuids) is checked by
`lcg.ingest.caller.prepare`, still before the WAL append.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    BeforeValidator,
    Field,
    SkipValidation,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
)

from lcg.ingest.caller import GivenEntity, GivenFact
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.params import Params, WriteGroup
from lcg.timeutil import parse_timestamp

__all__ = ["AddFactsParams", "parse_when"]

_DATE_ONLY = re.compile(r"^\d{4}-\d{2}-\d{2}$")
_MAX_ITEMS = 1000


def parse_when(value: Any, where: str) -> datetime:
    """An RFC 3339 timestamp or a `YYYY-MM-DD` date (midnight UTC).

    Raises:
        ValueError: naming `where`.
    """
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where} must be an RFC 3339 timestamp or a YYYY-MM-DD date string")
    text = value.strip()
    try:
        if _DATE_ONLY.match(text):
            return datetime.strptime(text, "%Y-%m-%d").replace(tzinfo=UTC)
        return parse_timestamp(text)
    except ValueError:
        raise ValueError(
            f"{where} '{value}' is not an RFC 3339 timestamp or a YYYY-MM-DD date"
        ) from None


def _string(item: dict[str, Any], key: str, where: str, *, required: bool) -> str:
    value = item.get(key)
    if value is None and not required:
        return ""
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(
            f"{where}.{key} is required and must be a non-empty string"
            if required
            else f"{where}.{key} must be a string"
        )
    return value.strip()


def _items(value: Any, name: str) -> Sequence[dict[str, Any]]:
    if not isinstance(value, list | tuple):
        raise ValueError(f"{name} must be an array of objects")
    if len(value) > _MAX_ITEMS:
        raise ValueError(f"{name} has {len(value)} items; at most {_MAX_ITEMS} per call")
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise ValueError(f"{name}[{i}] must be an object")
    return value


def _entities(value: Any) -> tuple[GivenEntity, ...]:
    out = []
    for i, item in enumerate(_items(value, "entities")):
        where = f"entities[{i}]"
        labels = item.get("labels", [])
        if labels is None:
            labels = []
        if not isinstance(labels, list) or not all(isinstance(x, str) for x in labels):
            raise ValueError(f"{where}.labels must be an array of strings")
        out.append(
            GivenEntity(
                _string(item, "name", where, required=True),
                tuple(x.strip() for x in labels if x.strip()),
                _string(item, "summary", where, required=False),
            )
        )
    return tuple(out)


def _facts(value: Any) -> tuple[GivenFact, ...]:
    out = []
    for i, item in enumerate(_items(value, "facts")):
        where = f"facts[{i}]"
        supersedes = item.get("supersedes", [])
        if supersedes is None:
            supersedes = []
        if not isinstance(supersedes, list) or not all(
            isinstance(x, str) and x.strip() for x in supersedes
        ):
            raise ValueError(f"{where}.supersedes must be an array of fact uuid strings")
        valid_at = item.get("valid_at")
        invalid_at = item.get("invalid_at")
        fact = GivenFact(
            _string(item, "source", where, required=True),
            _string(item, "target", where, required=True),
            _string(item, "relation_type", where, required=True),
            _string(item, "fact", where, required=True),
            parse_when(valid_at, f"{where}.valid_at") if valid_at is not None else None,
            parse_when(invalid_at, f"{where}.invalid_at") if invalid_at is not None else None,
            tuple(dict.fromkeys(x.strip() for x in supersedes)),
        )
        if fact.invalid_at is not None and fact.supersedes:
            raise ValueError(
                f"{where}.supersedes: a fact given with its own invalid_at is history and "
                "supersedes nothing; drop one of the two"
            )
        out.append(fact)
    return tuple(out)


def _reference_time(value: Any) -> datetime:
    return parse_when(value, "reference_time")


_ENTITY_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Entities the facts are about. Each is matched to the group's existing "
    "entities by name (like extracted ones) or created; entities already in the group may "
    "be left out and referred to by exact name or uuid.",
    "items": {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "labels": {"type": "array", "items": {"type": "string"}},
            "summary": {"type": "string"},
        },
        "required": ["name"],
    },
}
_FACT_SCHEMA: dict[str, Any] = {
    "type": "array",
    "description": "Facts, each a directed (source, relation_type, target) with its sentence.",
    "items": {
        "type": "object",
        "properties": {
            "source": {"type": "string", "description": "Entity name or uuid."},
            "target": {"type": "string", "description": "Entity name or uuid."},
            "relation_type": {
                "type": "string",
                "description": "SCREAMING_SNAKE verb phrase, e.g. LEADS, REPORTS_TO, WRITTEN_IN.",
            },
            "fact": {"type": "string", "description": "The fact as one sentence."},
            "valid_at": {
                "type": "string",
                "description": "When it became true (RFC 3339 or YYYY-MM-DD); default: "
                "reference_time.",
            },
            "invalid_at": {
                "type": "string",
                "description": "When it stopped being true, if already known (history).",
            },
            "supersedes": {
                "type": "array",
                "items": {"type": "string"},
                "description": "uuids of current facts this one replaces (they end at its "
                "valid_at).",
            },
        },
        "required": ["source", "target", "relation_type", "fact"],
    },
}


class AddFactsParams(Params):
    group_id: WriteGroup = DEFAULT_GROUP_ID
    reference_time: Annotated[
        datetime,
        SkipValidation,
        BeforeValidator(_reference_time),
        WithJsonSchema(
            {
                "type": "string",
                "description": "When the source text was written (RFC 3339 or YYYY-MM-DD); "
                "dates the facts that give no valid_at.",
            }
        ),
    ] = Field(default=None, validate_default=True)
    name: str = ""
    body: str = ""
    source_description: str = ""
    entities: Annotated[
        tuple[GivenEntity, ...],
        SkipValidation,
        BeforeValidator(_entities),
        WithJsonSchema(_ENTITY_SCHEMA),
    ] = ()
    facts: Annotated[
        tuple[GivenFact, ...], SkipValidation, BeforeValidator(_facts), WithJsonSchema(_FACT_SCHEMA)
    ] = Field(default=(), validate_default=True)

    @field_validator("facts", mode="after")
    @classmethod
    def _check_times(
        cls, facts: tuple[GivenFact, ...], info: ValidationInfo
    ) -> tuple[GivenFact, ...]:
        reference = info.data.get("reference_time")
        for i, f in enumerate(facts):
            starts = f.valid_at or reference
            if f.invalid_at is not None and starts is not None and f.invalid_at < starts:
                raise ValueError(
                    f"facts[{i}].invalid_at ({f.invalid_at.isoformat()}) is before the fact's "
                    f"valid_at ({starts.isoformat()})"
                )
        if not facts and not info.data.get("entities"):
            raise ValueError("facts and entities are both empty: nothing to add")
        return facts
