"""Ingestion methods: knowledge_process_chunk, knowledge_add_episode and lcg's
knowledge_add_facts (caller-written episodes); docs/api.md §ingest.

All run `lcg.ingest.pipeline`; the results carry the reference's fields plus what lcg adds: the
`extractor` that ran, the `cost` of its model calls, the facts the episode superseded (each with
its reason and the fact that superseded it), and the salvage counters. An episode given no
reference_time is dated now, or, when a cassette is replayed, at the time it was recorded with
(`default_reference_time`). knowledge_add_facts skips extraction: the caller gives the entities
and facts, and answers in knowledge_process_chunk's shape plus `fact_uuids`.
"""

from __future__ import annotations

import re
import time
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

from lcg.engine import Engine
from lcg.extraction.select import default_reference_time
from lcg.ingest.caller import GivenEntity, GivenFact
from lcg.ingest.pipeline import EpisodeInput, IngestOutcome, pipeline_for
from lcg.models import DEFAULT_GROUP_ID
from lcg.service.declare import Context, Declarations
from lcg.service.params import Params, WriteGroup
from lcg.timeutil import parse_timestamp, parse_wire_timestamp

__all__: list[str] = []


def _required(message: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value.strip():
            raise ValueError(message)
        return value

    return BeforeValidator(check)


def _text(name: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str):
            raise ValueError(f"{name} must be a string")
        return value

    return BeforeValidator(check)


def _reference_time(value: Any) -> datetime | None:
    if isinstance(value, str) and not value.strip():
        return None
    if not isinstance(value, str):
        raise ValueError(f"reference_time is not valid ISO 8601: {value!r}")
    try:
        return parse_wire_timestamp(value)
    except ValueError:
        raise ValueError(f"reference_time is not valid ISO 8601: {value}") from None


ReferenceTime = Annotated[datetime | None, BeforeValidator(_reference_time)]


class ProcessChunkParams(Params):
    # Defaulted so that a missing value gets the same message as an empty one
    # (docs/api.md §knowledge_process_chunk).
    chunk_text: Annotated[str, _required("chunk_text is required and must be non-empty")] = Field(
        default="", validate_default=True
    )
    chunk_id: Annotated[str, _required("chunk_id is required")] = Field(
        default="", validate_default=True
    )
    source_file: Annotated[str, _required("source_file is required")] = Field(
        default="", validate_default=True
    )
    group_id: WriteGroup = DEFAULT_GROUP_ID
    reference_time: ReferenceTime = None


class AddEpisodeParams(Params):
    name: Annotated[str, _text("name")] = ""
    episode_body: Annotated[str, _text("episode_body")] = ""
    source: Annotated[str, _text("source")] = "text"
    source_description: Annotated[str, _text("source_description")] = ""
    group_id: WriteGroup = DEFAULT_GROUP_ID
    reference_time: ReferenceTime = None


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


def _facts_reference_time(value: Any) -> datetime:
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
        BeforeValidator(_facts_reference_time),
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


def _extras(outcome: IngestOutcome) -> dict[str, Any]:
    return {
        "extractor": outcome.extractor,
        "cost": outcome.cost.as_dict(),
        "entities_created": outcome.entities_created,
        "entities_merged": outcome.entities_merged,
        "edges_duplicate": outcome.edges_duplicate,
        "edges_dropped_self_referential": outcome.edges_self_referential,
        "edges_superseded": outcome.superseded,
        "salvage": outcome.salvage.as_dict(),
        "timings": outcome.timings,
    }


def _oversized(engine: Engine, a: ProcessChunkParams) -> dict[str, Any] | None:
    limit = engine.settings.chunk_text_advisory_max_chars
    size = len(a.chunk_text)
    if size <= limit:
        return None
    engine.parts.events.emit(
        "chunk_text_oversized",
        group_id=a.group_id,
        chunk_id=a.chunk_id,
        source_file=a.source_file,
        chunk_text_chars=size,
        recommended_max_chars=limit,
    )
    return {
        "type": "chunk_text_oversized",
        "chunk_text_chars": size,
        "recommended_max_chars": limit,
        "message": (
            f"chunk_text has {size} characters, more than the recommended {limit} "
            "(LCG_CHUNK_TEXT_ADVISORY_MAX_CHARS); it was ingested, but extraction from long "
            "chunks misses more — split them"
        ),
    }


declare = Declarations()


@declare(
    "knowledge_process_chunk",
    "write",
    ProcessChunkParams,
    "Ingest one chunk of a source document as an episode: entities and dated facts are "
    "extracted, matched to what the graph already holds, and facts the text supersedes are "
    "retired (kept as history). chunk_id names the episode; source_file groups a document's "
    "chunks (knowledge_delete_by_source removes them). Give reference_time (RFC 3339) for "
    "when the text was written; it dates facts the text does not date itself.",
    required=("chunk_text", "chunk_id", "source_file"),
)
async def _process_chunk(engine: Engine, a: ProcessChunkParams, ctx: Context) -> dict[str, Any]:
    started = time.perf_counter()
    warning = _oversized(engine, a)
    source_type = "json" if a.source_file.lower().endswith(".json") else "text"
    outcome = await pipeline_for(engine).ingest(
        EpisodeInput(
            group_id=a.group_id,
            name=a.chunk_id,
            body=a.chunk_text,
            reference_time=a.reference_time
            or default_reference_time(engine, a.group_id, a.chunk_id, a.chunk_text),
            source="text",
            source_type=source_type,
            source_description=f"{a.source_file}:{a.chunk_id}",
            source_file=a.source_file,
            chunk_id=a.chunk_id,
        )
    )
    result = _chunk_result(outcome, a.chunk_id, a.source_file, started)
    if warning is not None:
        result["warning"] = warning
    result.update(_extras(outcome))
    return result


def _chunk_result(
    outcome: IngestOutcome, chunk_id: str, source_file: str, started: float
) -> dict[str, Any]:
    return {
        "success": True,
        "chunk_id": chunk_id,
        "source_file": source_file,
        "episode_uuid": outcome.episode_uuid,
        "nodes_extracted": outcome.nodes_extracted,
        "edges_extracted": outcome.edges_extracted,
        "edges_dropped_unresolvable": len(outcome.dropped_edges),
        "dropped_edges": outcome.dropped_edges,
        "edges_reclassified_unclassified": outcome.edges_reclassified_unclassified,
        "entities_reclassified_unclassified": outcome.entities_reclassified_unclassified,
        "entities_dropped_malformed": outcome.salvage.entities_dropped_malformed,
        "edges_dropped_malformed": outcome.salvage.edges_dropped_malformed,
        "duration_seconds": round(time.perf_counter() - started, 6),
    }


@declare(
    "knowledge_add_episode",
    "write",
    AddEpisodeParams,
    "Ingest an arbitrary episode (a message, a note, a JSON document) into a group: entities "
    "and dated facts are extracted and merged into the graph, superseded facts are retired. "
    "source is 'text', 'message' or 'json'; reference_time (RFC 3339) is when it was written.",
    required=("name", "episode_body"),
)
async def _add_episode(engine: Engine, a: AddEpisodeParams, ctx: Context) -> dict[str, Any]:
    kind = a.source.strip().lower()
    outcome = await pipeline_for(engine).ingest(
        EpisodeInput(
            group_id=a.group_id,
            name=a.name,
            body=a.episode_body,
            reference_time=a.reference_time
            or default_reference_time(engine, a.group_id, a.name, a.episode_body),
            source=a.source,
            source_type=kind if kind in ("json", "message") else "text",
            source_description=a.source_description,
        )
    )
    return {"episode_uuid": outcome.episode_uuid, **_extras(outcome)}


@declare(
    "knowledge_add_facts",
    "write",
    AddFactsParams,
    "Add facts YOU extracted (no extraction model runs; use this instead of knowledge_add_episode "
    "when you can read the text yourself). Steps: 1) look up what the graph holds now about the "
    "entities — knowledge_get_context, or knowledge_get_entity_timeline for one entity — and note "
    "the uuids of current facts; 2) call this with the episode's reference_time (when the text "
    "was written, RFC 3339 or YYYY-MM-DD), optional name/body (the source text, kept as the "
    "episode), entities [{name, labels?, summary?}] and facts [{source, target, relation_type, "
    "fact, valid_at?, invalid_at?, supersedes?}] (source/target: entity names or uuids; names "
    "already in the group need not be listed in entities); 3) when a fact REPLACES a current one "
    "(a new lead, a new team, a moved deadline), put the old fact's uuid in supersedes: it ends "
    "at the new fact's valid_at and stays as history. Without supersedes, lcg still retires a "
    "current fact when the ontology declares the relation type cardinality one, or when the "
    "type is one of lcg's single-valued families (LEADS/MANAGES/OWNS: one per target; "
    "REPORTS_TO, WORKS_AT, LIVES_IN, LOCATED_IN, OWNED_BY, MEMBER_OF, ROLE/TITLE, "
    "PRIMARY_DATABASE, WRITTEN_IN, STATUS, DEADLINE: one per source) — never for a sentence "
    "that says it adds ('also', 'as well'). The result lists edges_superseded with the reason "
    "(caller, ontology, builtin) and fact_uuids, the uuid of each given fact in order (an "
    "existing duplicate's uuid when it was already known). Bad input changes nothing.",
    required=("reference_time",),  # lcg's own
)
async def _add_facts(engine: Engine, a: AddFactsParams, ctx: Context) -> dict[str, Any]:
    started = time.perf_counter()
    name = a.name or f"facts {a.reference_time.date().isoformat()}"
    outcome = await pipeline_for(engine).ingest_given(
        EpisodeInput(
            group_id=a.group_id,
            name=name,
            body=a.body,
            reference_time=a.reference_time,
            source="text",
            source_description=a.source_description,
        ),
        a.entities,
        a.facts,
    )
    result = _chunk_result(outcome, name, "", started)
    result.update(_extras(outcome))
    result["fact_uuids"] = outcome.fact_uuids
    return result
