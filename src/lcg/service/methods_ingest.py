"""Ingestion methods: knowledge_process_chunk, knowledge_add_episode (API.md §2.0.1, §2.4, §2.5)
and lcg's knowledge_add_facts (caller-written episodes).

All run `lcg.ingest.pipeline`; the results carry API.md's fields plus what lcg adds: the
`extractor` that ran, the `cost` of its model calls, the facts the episode superseded (each with
its reason and the fact that superseded it), and the salvage counters. An episode given no
reference_time is dated now, or, when a cassette is replayed, at the time it was recorded with
(`default_reference_time`). knowledge_add_facts skips extraction: the caller gives the entities
and facts, and answers in knowledge_process_chunk's shape plus `fact_uuids`.
"""

from __future__ import annotations

import time
from typing import Any

from lcg.engine import Engine
from lcg.extraction.select import default_reference_time
from lcg.ingest.pipeline import EpisodeInput, IngestOutcome, pipeline_for
from lcg.service.declare import Context, Declarations
from lcg.service.facts_params import AddFactsParams
from lcg.service.ingest_params import AddEpisodeParams, ProcessChunkParams

__all__: list[str] = []


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
    engine.events.emit(
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
